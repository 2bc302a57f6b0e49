"""Graph rules: export-captured patterns, checks that explain themselves, provenance."""

from __future__ import annotations

import pytest
import torch

import fxport
import fxport.testing
from fxport.report.result import iter_nodes
from fxport.rules import rule_of_node, rules_of
from fxport.rules.graph import apply_graph_rules


def naive_softplus(x):
    return torch.log(torch.exp(x) + 1)


@fxport.graph_rule(pattern=naive_softplus, example_inputs=(torch.randn(2, 3),))
def stable_softplus(x):
    """log(exp(x) + 1) -> softplus(x): no overflow for large x."""
    return torch.nn.functional.softplus(x)


class Net(torch.nn.Module):
    def forward(self, x):
        return torch.log(torch.exp(x) + 1) * 2


@pytest.fixture(scope="module")
def converted():
    x = torch.linspace(-20, 20, 41)
    return fxport.testing.assert_rule_converts(Net(), (x,), rules=[stable_softplus],
                                               expect_fired=["stable_softplus"])


def test_pattern_is_replaced_and_onnx_matches_eager(converted):
    ops = converted.result.op_counts()
    assert "Exp" not in ops and "Log" not in ops, ops


def test_replacement_nodes_carry_the_rule_name(converted):
    stamped = {rule_of_node(n) for n in iter_nodes(converted.result.model.graph)}
    assert "stable_softplus" in stamped
    record = next(r for r in converted.result.rewrites if r.tier == "graph")
    assert record.location is not None and record.location.filename.endswith("test_graph_rules.py")


def test_check_can_refuse_a_match_and_explain_says_why():
    @fxport.graph_rule(pattern=naive_softplus, example_inputs=(torch.randn(2, 3),),
                       check=lambda match: "only for float64" if match.value("x").dtype
                       != torch.float64 else True, name="softplus-f64")
    def refused(x):
        return torch.nn.functional.softplus(x)

    rule = rules_of(refused)[0]
    exported = torch.export.export(Net(), (torch.randn(4),))
    records = []
    apply_graph_rules(exported, [rule], records)
    assert records == []
    assert rule.explain(exported) == ["log: check refused: only for float64"]


def test_explain_names_the_first_difference():
    class Shifted(torch.nn.Module):
        def forward(self, x):
            return torch.log(torch.exp(x) + 2)

    rule = rules_of(stable_softplus)[0]
    exported = torch.export.export(Shifted(), (torch.randn(4),))
    (reason,) = rule.explain(exported)
    assert "argument 1 of add is 2, the pattern has 1" in reason


def test_explain_reports_outside_users():
    class Reused(torch.nn.Module):
        def forward(self, x):
            e = torch.exp(x)
            return torch.log(e + 1) + e

    rule = rules_of(stable_softplus)[0]
    (reason,) = rule.explain(torch.export.export(Reused(), (torch.randn(4),)))
    assert "exp is also used by" in reason


def test_uncapturable_pattern_is_a_rule_error():
    @fxport.graph_rule(pattern=lambda x: torch.from_numpy(x.numpy()), example_inputs=(
        torch.randn(2),), name="bad-pattern")
    def bad(x):
        return x

    with pytest.raises(fxport.RuleError, match="could not capture its pattern"):
        rules_of(bad)[0].captured()
