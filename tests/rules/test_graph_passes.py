"""Graph passes and graph rules see every graph: cond branches and while_loop bodies too, and the
ONNX still verifies against eager; the built-in `.item()` pass is one such pass."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop

import fxport
from fxport.report.result import iter_nodes
from fxport.rules import iter_graphs, rule_of_node, rules_of


def naive_softplus(x):
    return torch.log(torch.exp(x) + 1)


@fxport.graph_rule(pattern=naive_softplus, example_inputs=(torch.randn(2, 3),))
def stable_softplus(x):
    """log(exp(x) + 1) -> softplus(x)."""
    return torch.nn.functional.softplus(x)


@fxport.rules.graph_pass(name="double-to-add")
def double_to_add(graph_module, context):
    """x * 2 -> x + x."""
    records = []
    for node in list(graph_module.graph.nodes):
        if node.target is torch.ops.aten.mul.Tensor and node.args[1] == 2:
            with graph_module.graph.inserting_before(node):
                added = graph_module.graph.call_function(torch.ops.aten.add.Tensor, (node.args[0], node.args[0]))
            added.meta.update(node.meta)
            node.replace_all_uses_with(added)
            graph_module.graph.erase_node(node)
            records.append(context.record(node, "x * 2 -> x + x", new_nodes=[added]))
    return records


class SoftplusInCondBranch(torch.nn.Module):
    def forward(self, x):
        def positive(x):
            return torch.log(torch.exp(x) + 1) * 2

        def negative(x):
            return x - 1

        return torch.cond(x.sum() > 0, positive, negative, (x,)) + torch.exp(x)


class SoftplusInLoopBody(torch.nn.Module):
    def forward(self, x, n):
        def more(i, y):
            return i < n

        def body(i, y):
            return i + 1, torch.log(torch.exp(y) + 1) * 2

        _, y = while_loop(more, body, (torch.zeros((), dtype=torch.int64), x))
        return y


class SoftplusInConvertedIf(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = torch.sin(torch.log(torch.exp(x) + 1) * 2)
        else:
            y = x - 1
        return y


CASES = [
    (SoftplusInCondBranch, (torch.randn(4, 3),), {"x": {0: "batch"}},
     [(torch.rand(2, 3) + 0.5,), (-torch.rand(5, 3),)], "true_graph_0"),
    (SoftplusInLoopBody, (torch.randn(4, 3), torch.tensor(3)), {"x": {0: "batch"}, "n": None},
     [(torch.randn(2, 3), torch.tensor(0)), (torch.randn(5, 3), torch.tensor(5))], "while_loop_body_graph_0"),
    (SoftplusInConvertedIf, (torch.randn(4, 3),), {"x": {0: "batch"}},
     [(torch.rand(2, 3) + 0.5,), (-torch.rand(5, 3),)], "true_graph_0"),
]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("make, args, dynamic, inputs, subgraph", CASES, ids=["cond_branch", "while_loop_body", "converted_if"])
def test_pattern_rule_and_pass_fire_inside_the_subgraph_and_onnx_verifies(make, args, dynamic, inputs, subgraph):
    result = fxport.convert(make(), args, dynamic_shapes=dynamic, verify_inputs=inputs, if_strategy="cond",
                            rules=[stable_softplus, double_to_add])
    assert result.verified
    fired = {(r.rule, r.tier): r for r in result.rewrites if r.tier in ("graph", "pass")}
    assert set(fired) == {("stable_softplus", "graph"), ("double-to-add", "pass")}
    assert all(r.data["graph"] == subgraph for r in fired.values())
    assert all(r.location and r.location.filename.endswith("test_graph_passes.py") for r in fired.values())
    ops = result.op_counts()
    assert "Softplus" in ops and "Log" not in ops and "Mul" not in ops, ops
    assert "stable_softplus" in {rule_of_node(n) for n in iter_nodes(result.model.graph)}


def test_explain_covers_subgraphs_with_their_path():
    rule = rules_of(stable_softplus)[0]

    class Shifted(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: torch.log(torch.exp(x) + 1),
                              lambda x: torch.log(torch.exp(x) + 3), (x,))

    assert rule.explain(torch.export.export(Shifted(), (torch.randn(4),))) == [
        "true_graph_0/log: matches",
        "false_graph_0/log: argument 1 of add is 3, the pattern has 1",
    ]


def test_explain_names_the_first_pattern_node_the_matcher_failed_on():
    class Different(torch.nn.Module):
        def forward(self, x):
            return torch.log(torch.exp(x) * 1) + torch.log(x + 1)

    rule = rules_of(stable_softplus)[0]
    assert rule.explain(torch.export.export(Different(), (torch.randn(4),))) == [
        "log: mul is aten.mul.Tensor, the pattern expects aten.add.Tensor",
        "log_1: x is placeholder x, the pattern expects aten.exp.default",
    ]


class WhileInsideCond(torch.nn.Module):
    def forward(self, x, n):
        def loop(x):
            return while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * 2),
                              (torch.zeros((), dtype=torch.int64), x))[1]

        return torch.cond(x.sum() > 0, loop, lambda x: x + 1, (x,))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_walk_reaches_nested_subgraphs_with_their_callers():
    program = torch.export.export(WhileInsideCond(), (torch.randn(3), torch.tensor(2)))
    walked = [(g.path, g.caller.target.__name__ if g.caller else None) for g in iter_graphs(program)]
    assert walked == [
        ("", None),
        ("true_graph_0", "cond"),
        ("true_graph_0.while_loop_cond_graph_0", "while_loop"),
        ("true_graph_0.while_loop_body_graph_0", "while_loop"),
        ("false_graph_0", "cond"),
    ]
    records = []
    fxport.rules.passes.apply_graph_passes(program, rules_of(double_to_add), records)
    assert [r.data["graph"] for r in records] == ["true_graph_0.while_loop_body_graph_0"]
    x = torch.randn(3).abs() + 0.1
    assert torch.equal(program.module()(x, torch.tensor(2)), WhileInsideCond()(x, torch.tensor(2)))


def test_a_failing_pass_is_a_rule_error_naming_the_pass_and_graph():
    @fxport.rules.graph_pass(name="broken-pass")
    def broken(graph_module, context):
        """Fails."""
        if context.is_subgraph:
            raise ValueError("boom")

    program = torch.export.export(SoftplusInCondBranch(), (torch.randn(4, 3),))
    with pytest.raises(fxport.RuleError, match="graph pass 'broken-pass' failed on graph true_graph_0: ValueError: boom"):
        fxport.rules.passes.apply_graph_passes(program, rules_of(broken), [])


class ItemPredicate(torch.nn.Module):
    def forward(self, x):
        if x.max().item() > 0.99999999:
            return x * 2
        return x - 1


def test_item_predicate_pass_is_a_builtin_rule_that_can_be_disabled():
    rule = fxport.rules.resolve().get("item-predicate-to-tensor")
    assert rule.tier == "pass" and rule.priority == fxport.BUILTIN_PRIORITY
    assert rule.defined_at.filename.endswith("item_predicates.py")
    ones = torch.ones(3)
    result = fxport.convert(ItemPredicate(), (torch.rand(3),), verify_inputs=[(ones,)])
    assert result.verified and any(r.rule == "item-predicate-to-tensor" for r in result.rewrites)
    disabled = fxport.convert(ItemPredicate(), (torch.rand(3),), verify=False, disable_rules=("item-predicate-to-tensor",))
    assert not any(r.rule == "item-predicate-to-tensor" for r in disabled.rewrites)


def test_passes_know_whether_control_flow_is_converted():
    seen = []

    @fxport.rules.graph_pass(name="spy")
    def spy(graph_module, context):
        """Notes what it is told."""
        seen.append((context.path, context.control_flow))

    fxport.convert(SoftplusInCondBranch(), (torch.randn(4, 3),), verify=False, rules=[spy], control_flow=False)
    assert seen == [("", False), ("true_graph_0", False), ("false_graph_0", False)]


def test_passes_run_after_the_passes_they_name_whatever_their_priority():
    from fxport.rules.passes import apply_graph_passes

    seen = []

    @fxport.rules.graph_pass(name="second", priority=10, after="first")
    def second(graph_module, context):
        seen.append("second")

    @fxport.rules.graph_pass(name="first", priority=0)
    def first(graph_module, context):
        seen.append("first")

    program = torch.export.export(torch.nn.Tanh(), (torch.randn(2),))
    apply_graph_passes(program, [*rules_of(second), *rules_of(first)], [])
    assert seen == ["first", "second"]

    @fxport.rules.graph_pass(name="first", after="second")
    def circular(graph_module, context):
        pass

    with pytest.raises(fxport.RuleError, match="in a circle: second, first"):
        apply_graph_passes(program, [*rules_of(second), *rules_of(circular)], [])


def test_the_suite_lints_the_graph_after_each_pass():
    """tests/conftest.py sets the lint hook: a pass leaving a use before its definition fails there."""
    from fxport.rules import passes
    from fxport.rules.passes import apply_graph_passes

    @fxport.rules.graph_pass(name="use-before-def")
    def use_before_def(graph_module, context):
        nodes = [n for n in graph_module.graph.nodes if n.op == "call_function"]
        nodes[0].prepend(nodes[-1])  # the last op now runs first, before what it reads

    assert passes.after_each_pass is passes.lint_after_pass
    program = torch.export.export(Double2(), (torch.randn(2),))
    with pytest.raises(fxport.RuleError, match="graph pass 'use-before-def' left a malformed graph"):
        apply_graph_passes(program, rules_of(use_before_def), [])


class Double2(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2
