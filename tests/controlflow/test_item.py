"""`.item()` predicates convert at the top level and inside traced bodies; an `.item()` value
used as a number inside a loop body converts (it stays symbolic there)."""

import pytest
import torch

import fxport
from tests.conftest import op_counts
from tests.controlflow._util import assert_every_branch_taken
from tests.controlflow.item_models import (ItemAgainstUnrepresentableConstant, ItemAtTopLevel, ItemInsideTracedBranch,
                                          ItemPredicateInsideLoop, ItemPredicatesInBranchWithParameters, ItemRangeThenShapeCondWithParameters,
                                          ItemValueInsideLoop)


def test_item_predicate_at_top_level_converts_and_takes_both_branches():
    model = ItemAtTopLevel()
    result = fxport.convert(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}},
                            verify_inputs=[(torch.ones(2, 3),), (-torch.ones(5, 3),)])
    assert result.verified
    assert "Where" in op_counts(result.model) or "If" in op_counts(result.model)


@pytest.mark.parametrize("make, args, inputs", [
    (ItemInsideTracedBranch, (torch.rand(5, 4),),
     [(torch.rand(b, 4) * scale + shift,) for b, scale, shift in ((3, 0.01, 0.01), (2, 1.0, 1.0), (4, 0.1, -10.0), (7, 0.1, 0.2))]),
    (ItemPredicateInsideLoop, (torch.rand(3, 4), torch.tensor(3)),
     [(torch.rand(b, 4), torch.tensor(k)) for b, k in ((1, 0), (1, 1), (2, 5), (4, 3), (6, 8))]),
], ids=["in_cond_branch", "in_loop_body"])
def test_item_predicate_inside_traced_body_converts(make, args, inputs):
    model = make().eval()
    assert_every_branch_taken(model, inputs)
    result = fxport.convert(model, args, dynamic_shapes={"x": {0: "batch"}}, verify_inputs=inputs)
    assert result.verified
    assert any(r.rule.endswith("in-traced-body") for r in result.rewrites)
    assert {"If", "Loop"} & set(op_counts(result.model)) and "Where" in op_counts(result.model)


def test_item_value_inside_loop_body_converts():
    """``x * float(x.max().item())`` in a loop body: the number stays symbolic (issue 13, item 4;
    refusals of numbers the body cannot keep symbolic: tests/controlflow/test_numbers_in_bodies.py)."""
    inputs = [(torch.rand(b, 4) + 0.5, torch.tensor(k)) for b, k in ((1, 0), (3, 1), (2, 2), (4, 3))]
    result = fxport.convert(ItemValueInsideLoop(), inputs[-1], dynamic_shapes={"x": {0: "batch"}}, verify_inputs=inputs)
    assert result.verified
    assert "Loop" in op_counts(result.model)


def test_item_predicates_in_branch_reading_parameters_become_tensor_comparisons():
    model = ItemPredicatesInBranchWithParameters().eval()
    inputs = [(torch.rand(b, 4) + shift,) for b, shift in ((3, 0.0), (5, 0.0), (6, 1.0), (5, 2.0), (4, -3.0))]
    assert_every_branch_taken(model, inputs)
    result = fxport.convert(model, (torch.rand(4, 4) + 1,), dynamic_shapes={"x": {0: "batch"}}, verify_inputs=inputs)
    assert result.verified
    assert sum(r.rule == "item-predicate-to-tensor" for r in result.rewrites) == 2
    assert "If" in op_counts(result.model)


def test_item_comparison_keeps_python_double_precision():
    model = ItemAgainstUnrepresentableConstant().eval()
    ones = torch.ones(1)
    assert torch.equal(model(ones), ones * 2)
    result = fxport.convert(model, (torch.rand(3),), dynamic_shapes={"x": {0: "n"}},
                            verify_inputs=[(ones,), (torch.full((1,), 0.5),)])
    assert result.verified
    assert any(r.rule == "item-predicate-to-tensor" for r in result.rewrites)


@pytest.mark.slow
def test_item_symbol_before_a_cond_with_parameters_lowers():
    model = ItemRangeThenShapeCondWithParameters().eval()
    inputs = [(torch.rand(b, 4) + shift, torch.tensor(k)) for b, shift, k in ((2, 0.0, 0), (3, -1.0, 1), (5, 0.0, 2), (2, -2.0, 3))]
    assert_every_branch_taken(model, inputs)
    result = fxport.convert(model, (torch.rand(3, 4), torch.tensor(2)), dynamic_shapes={"x": {0: "batch"}},
                            verify_inputs=inputs)
    assert result.verified
    assert {"If", "Loop"} <= set(op_counts(result.model))
