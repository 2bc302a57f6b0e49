"""``convert_control_flow(disabled=...)``: a disabled conversion is never produced; the
statement gets what ``auto`` would give without it, or is left as written (plain Python, so
the capture fails on it as it would without fxport)."""

import pytest
import torch

from fxport.controlflow import convert_control_flow
from fxport.errors import ControlFlowError, UsageError
from tests.controlflow import if_models, loop_models

def _export(model, args, disabled, strategy="auto", dynamic_shapes=None):
    with convert_control_flow(model, strategy=strategy, disabled=disabled) as records:
        program = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    targets = {str(n.target) for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)
               for n in m.graph.nodes if n.op == "call_function"}
    return records, targets


def _has(targets, name):
    return any(name in t for t in targets)


def _refused_by_torch(exc):
    """torch's own refusal of a data-dependent condition, as without fxport."""
    assert not isinstance(exc, ControlFlowError) and "data-dependent" in str(exc), exc


X = (if_models.scaled(3, 1.0),)


@pytest.mark.parametrize("strategy", ["auto", "where"])
def test_if_to_where_disabled_lowers_with_cond(strategy):
    records, targets = _export(if_models.IfElse(), X, {"if-to-where"}, strategy)
    assert [r.rule for r in records] == ["if-to-cond"] and records[0].detail == "cond: if-to-where is disabled"
    assert _has(targets, "cond") and not _has(targets, "where")


def test_if_to_cond_disabled_keeps_where_for_cheap_branches():
    records, _ = _export(if_models.IfElse(), X, {"if-to-cond"})
    assert [r.rule for r in records] == ["if-to-where"]


@pytest.mark.parametrize("strategy", ["auto", "cond"])
def test_if_to_cond_disabled_leaves_an_expensive_if_as_written(strategy):
    with pytest.raises(Exception) as info:
        _export(if_models.SelectSubmodule(), X, {"if-to-cond"}, strategy)
    _refused_by_torch(info.value)


def test_while_to_while_loop_disabled_leaves_the_loop_as_written():
    records, targets = _export(loop_models.WhileTensorCondition(), (torch.rand(3),), set())
    assert _has(targets, "while_loop") and [r.rule for r in records] == ["while-to-while_loop"]
    with pytest.raises(Exception) as info:
        _export(loop_models.WhileTensorCondition(), (torch.rand(3),), {"while-to-while_loop"})
    _refused_by_torch(info.value)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_for_to_while_loop_disabled_leaves_the_loop_as_written():
    model, args = loop_models.ForRangeInt(), (torch.rand(3), torch.tensor(3))
    records, _ = _export(model, args, set())
    assert [r.rule for r in records] == ["for-to-while_loop"]
    with pytest.raises(Exception) as info:
        _export(model, args, {"for-to-while_loop"})
    _refused_by_torch(info.value)


def test_if_in_traced_body_disabled_leaves_a_nested_if_as_written():
    model, args = loop_models.BranchInLoop(), (torch.rand(3), torch.tensor(3))
    records, _ = _export(model, args, set())
    assert {r.rule for r in records} == {"for-to-while_loop", "if-in-traced-body"}
    with pytest.raises(Exception) as info:
        _export(model, args, {"if-in-traced-body"})
    _refused_by_torch(info.value)


def test_unknown_rule_name_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown control-flow rule 'if-to-nowhere'"):
        with convert_control_flow(if_models.IfElse(), disabled={"if-to-nowhere"}):
            pass


def test_a_disabled_set_changes_nothing_for_python_conditions():
    model = if_models.IfElse()
    x = if_models.scaled(3, 1.0)
    with convert_control_flow(model, disabled={"if-to-where", "if-to-cond"}) as records:
        got = model(x)
    torch.testing.assert_close(got, if_models.IfElse()(x))
    assert records == []
