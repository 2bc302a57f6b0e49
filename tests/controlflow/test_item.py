"""`.item()` predicates: converted at the top level, a clear error inside a traced body."""

import os

import pytest
import torch

import fxport
from tests.conftest import line_of, op_counts
from tests.controlflow.item_models import ItemAtTopLevel, ItemInsideTracedBranch

MODELS = os.path.join(os.path.dirname(__file__), "item_models.py")


def test_item_predicate_at_top_level_converts_and_takes_both_branches():
    model = ItemAtTopLevel()
    result = fxport.convert(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}},
                            verify_inputs=[(torch.ones(2, 3),), (-torch.ones(5, 3),)])
    assert result.verified
    assert "Where" in op_counts(result.model) or "If" in op_counts(result.model)


def test_item_predicate_inside_traced_branch_is_a_located_error():
    with pytest.raises(fxport.ControlFlowError) as info:
        fxport.convert(ItemInsideTracedBranch(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: "batch"}})
    message = str(info.value)
    assert "inside a converted branch or loop body" in message
    assert line_of(MODELS, "if g.sum().item() > 0.5") in message
    assert "\n" not in message
