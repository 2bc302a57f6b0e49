"""Op rules: registration checks, decomposition bypass, custom ops, priority, scope,
provenance."""

from __future__ import annotations

import pytest
import torch
from onnxscript import opset18 as op

import fxport
import fxport.testing
from fxport.rules import PROVENANCE_KEY, rule_of_node
from fxport.report.result import iter_nodes
from tests.rules.cases import Apply


def test_signature_must_follow_the_schema_names():
    with pytest.raises(fxport.RuleError, match="parameter 2 is 'kk' but the schema's is 'k'"):
        @fxport.onnx_op("aten::kthvalue")
        def kthvalue(self, kk, dim=-1, keepdim=False):
            return self


def test_signature_missing_and_extra_parameters_are_named():
    with pytest.raises(fxport.RuleError, match="missing parameter.*keepdim"):
        @fxport.onnx_op("aten::kthvalue")
        def kthvalue(self, k, dim):
            return self
    with pytest.raises(fxport.RuleError, match="parameter\(s\) extra are not in the schema"):
        @fxport.onnx_op("aten::erfinv")
        def erfinv(self, extra):
            return self


@pytest.mark.parametrize("target, message", [
    ("aten::no_such_op", "no op aten::no_such_op is registered"),
    ("aten::median.no_such_overload", "has no overload 'no_such_overload'"),
    ("aten::searchsorted", "no default overload"),
    ("erfinv", "is not 'namespace::op"),
])
def test_unknown_ops_are_rule_errors(target, message):
    with pytest.raises(fxport.RuleError, match=message):
        fxport.onnx_op(target)(lambda self: self)


class Erfinv(torch.nn.Module):
    def forward(self, x):
        return torch.erfinv(torch.tanh(x))


@pytest.fixture(scope="module")
def erfinv_result():
    return fxport.convert(Erfinv(), (torch.randn(64),))


def test_rule_fires_for_the_users_op_although_the_exporter_would_decompose_it(erfinv_result):
    """Without a rule the exporter turns erfinv into prims::erf_inv and fails."""
    assert erfinv_result.verified
    assert [r.rule for r in erfinv_result.rewrites] == ["aten::erfinv"]
    with pytest.raises(fxport.UnsupportedOpsError, match="erf"):
        fxport.convert(Erfinv(), (torch.randn(8),), disable_rules=["aten::erfinv"])


def test_rule_name_reaches_onnx_node_metadata_and_the_report(erfinv_result):
    stamped = [n for n in iter_nodes(erfinv_result.model.graph) if rule_of_node(n)]
    assert stamped and {rule_of_node(n) for n in stamped} == {"aten::erfinv"}
    record = erfinv_result.rewrites[0]
    assert record.tier == "op" and record.location.filename.endswith("test_op_rules.py")
    assert PROVENANCE_KEY == "fxport.rule"


@torch.library.custom_op("fxport_tests::scaled_add", mutates_args=())
def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    return a * alpha + b


@scaled_add.register_fake
def _(a, b, alpha):
    return torch.empty_like(a)


@fxport.onnx_op(torch.ops.fxport_tests.scaled_add.default)
def scaled_add_onnx(a, b, alpha: float):
    """a * alpha + b."""
    return op.Add(op.Mul(a, op.CastLike(op.Constant(value_float=alpha), a)), b)


def test_custom_op_rule_by_op_object():
    model = Apply(lambda a, b: torch.ops.fxport_tests.scaled_add(a, b, 3.0))
    check = fxport.testing.assert_rule_converts(
        model, (torch.randn(3), torch.randn(3)), rules=[scaled_add_onnx],
        expect_fired=["fxport_tests::scaled_add"])
    assert check.max_abs_error < 1e-6


def test_user_rule_overrides_builtin_and_equal_priorities_conflict():
    @fxport.onnx_op("aten::erfinv", name="my-erfinv")
    def mine(self):
        return op.Neg(self)

    @fxport.onnx_op("aten::erfinv", name="their-erfinv")
    def theirs(self):
        return op.Neg(self)

    ruleset = fxport.rules.resolve([mine])
    assert "my-erfinv" in ruleset.names() and "aten::erfinv" not in ruleset.names()
    assert [r.name for r in ruleset.shadowed] == ["aten::erfinv"]
    with pytest.raises(fxport.RuleError, match="both claim aten::erfinv at priority 0"):
        fxport.rules.resolve([mine, theirs])


def test_priority_orders_two_user_rules():
    @fxport.onnx_op("aten::erfinv", name="low", priority=1)
    def low(self):
        return op.Neg(self)

    @fxport.onnx_op("aten::erfinv", name="high", priority=2)
    def high(self):
        return op.Neg(self)

    assert "high" in fxport.rules.resolve([low, high]).names()


def test_scope_and_disable_filter_rules():
    @fxport.onnx_op("aten::erfinv", name="future-erfinv", opset=(30, None), priority=5)
    def future(self):
        return op.Neg(self)

    ruleset = fxport.rules.resolve([future], opset=18, device="cpu")
    assert "future-erfinv" in ruleset.skipped and "aten::erfinv" in ruleset.names()
    assert "needs opset >= 30" in ruleset.skipped["future-erfinv"]
    assert "aten::erfinv" not in fxport.rules.resolve(disable=["aten::erfinv"]).names()
    with pytest.raises(fxport.RuleError, match="unknown rule"):
        fxport.rules.resolve(disable=["aten::erfinvv"])


def test_scope_by_device_and_torch_version():
    scope = fxport.Scope(devices=("cuda",), torch=">=99")
    assert "needs device cuda" in scope.why_not(device="cpu")
    assert "needs torch >=99" in scope.why_not(device="cuda")
    with pytest.raises(fxport.RuleError, match="invalid torch version scope"):
        fxport.Scope(torch="not a version")
