"""Tensor constants created inside converted branches and loop bodies (the ``subgraph-constants``
pass, rewrites/subgraph_constants.py): torch 2.13's exporter fails on them ("Attempting to use
FunctionalTensor on its own"), which refused a masked assignment of a number in a loop (found by
the fuzzer). Differential: eager vs ONNX Runtime on every branch and trip counts 0, 1, 2, N."""

import pytest
import torch

import fxport
from tests.conftest import line_of
from tests.controlflow import constant_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

BATCH = {0: torch.export.Dim("b", min=1, max=64)}


def _constant_records(exported):
    return [r for r in exported.records if r.rule == "subgraph-constants"]


def test_masked_number_in_a_while_loop():
    model = m.MaskedNumberInLoop()
    x = torch.tensor([[-0.5, 0.8, -0.9], [0.2, -0.7, 0.1]])
    inputs = [(x, torch.tensor(t)) for t in (0, 1, 2, 5)] + [(torch.randn(1, 3), torch.tensor(3)),
                                                              (torch.randn(7, 3), torch.tensor(4))]
    assert {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (x, torch.tensor(2)), dynamic_shapes=(BATCH, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_vector_and_index_literals_in_cond_branches():
    model = m.LiteralsInBranch()
    inputs = [(torch.rand(4, 3) + 0.5,), (-torch.rand(4, 3) - 0.5,), (torch.rand(1, 3),), (-torch.rand(6, 3),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=(BATCH,), strategy="cond")
    assert exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)


def test_float64_literal_is_exact():
    """0.1 in float64 is built from float32-exact pieces: the sum over n trips equals eager exactly."""
    model = m.Float64LiteralInLoop()
    inputs = [(torch.randn(3, dtype=torch.float64), torch.tensor(t)) for t in (0, 1, 2, 7)]
    exported = export_to_ort(model, inputs[2])
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_literal_in_a_loop_nested_in_a_branch():
    model = m.LiteralInLoopInBranch()
    inputs = [(torch.rand(2, 3) + 2, torch.tensor(t)) for t in (0, 1, 2, 6)] + [(-torch.rand(5, 3), torch.tensor(3))]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[2], dynamic_shapes=(BATCH, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)


def test_end_to_end_records_the_pass():
    result = fxport.convert(m.MaskedNumberInLoop(), (torch.randn(3, 3), torch.tensor(2)),
                            dynamic_shapes={"x": {0: "batch"}})
    assert result.verified
    assert any(r.rule == "subgraph-constants" and "while_loop_body_graph" in r.detail for r in result.rewrites)


def test_large_literal_in_a_loop_is_refused_at_its_line():
    with pytest.raises(fxport.ConversionError) as caught:
        fxport.convert(m.LargeLiteralInLoop(), (torch.randn(2, 3), torch.tensor(2)), verify=False)
    message = str(caught.value)
    assert "tensor constant of 300 elements" in message and "\n" not in message
    assert message.split(" at ")[1].startswith("tests/controlflow/" + line_of(m.__file__, "for _ in range(int(n)):  # large"))


def test_extreme_float64_literals_and_signed_zeros_are_exact():
    model = m.ExtremeLiteralsInLoop()
    inputs = [(torch.randn(3, dtype=torch.float64), torch.tensor(t)) for t in (0, 1, 2)]
    exported = export_to_ort(model, inputs[1])
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)
