"""``b_ref = b``, a converted statement rebinding one name on some paths, then an in-place write:
the file writes through to the other name exactly where eager does (issue 25, item 3).

Differential: eager vs ONNX Runtime on trip counts on both sides of the rebinding step and on
both outcomes of the tensor condition; the graph holds the Loop/If and the flag's Where.
"""

import pytest
import torch

import fxport
from fxport.errors import ConversionError
from tests.controlflow import alias_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

BATCH = torch.export.Dim("b", min=1, max=64)


def test_a_loop_rebinding_under_a_branch_splits_the_alias_only_on_the_steps_it_runs():
    model = m.LoopRebindsUnderBranch()
    inputs = [(torch.randn(3), torch.randn(3), torch.tensor(n)) for n in (0, 1, 2, 3, 4, 5, 8)]
    assert {0, 1, 2, 3, 4, 5, 8} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(3), torch.randn(3), torch.tensor(5)))
    assert exported.ops.get("Loop", 0) >= 1 and exported.ops.get("Where", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def test_an_if_on_a_tensor_that_rebinds_one_name():
    model = m.IfRebinds()
    inputs = [(torch.rand(4, 3) + 0.5, torch.randn(4, 3)), (-torch.rand(1, 3) - 0.5, torch.randn(1, 3)),
              (torch.rand(1, 3) + 0.5, torch.randn(1, 3)), (-torch.rand(6, 3) - 0.5, torch.randn(6, 3))]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: BATCH}, {0: BATCH}))
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def test_the_rebound_name_is_the_alias_and_the_write_goes_through_the_original():
    model = m.WriteThroughTheRebound()
    inputs = [(torch.randn(2, 3), torch.tensor(n)) for n in (0, 1, 2, 5)]
    exported = export_to_ort(model, (torch.randn(2, 3), torch.tensor(3)))
    assert exported.ops.get("Loop", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def test_a_while_loop_that_splits_and_joins_the_pair_again():
    model = m.RealiasedInTheBody()
    inputs = [(torch.full((2,), v),) for v in (-1.0, 0.3, 0.8, 1.2, 2.5)]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[2])
    assert exported.ops.get("Loop", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def test_end_to_end_the_issue_model_converts_and_verifies_on_both_sides_of_the_branch():
    model = m.LoopRebindsUnderBranch()
    result = fxport.convert(model, (torch.randn(3), torch.randn(3), torch.tensor(5)))
    assert all(row.passed for row in result.verification)
    from tests.conftest import run_onnx

    for n in (0, 3, 4, 7):
        a, b = torch.randn(3), torch.randn(3)
        expected = model(a.clone(), b.clone(), torch.tensor(n))
        got = run_onnx(result.model, a, b, torch.tensor(n))
        for want, have in zip(expected, got):
            torch.testing.assert_close(torch.from_numpy(have), want)


def test_a_split_into_another_shape_is_refused_at_the_users_line():
    with pytest.raises(ConversionError) as caught:
        fxport.convert(m.SplitIntoOtherShape(), (torch.rand(3, 2), torch.randn(3, 2)), verify=False)
    message = str(caught.value)
    assert "\n" not in message and "b_ref" in message and "alias_models.py:" in message


def test_a_pair_split_by_python_alone_costs_nothing_in_the_graph():
    """Python ran the loop, so the objects keep their identity: no flag in the program, no write
    into the caller's input, no Where in the file."""
    from fxport.engine.pipeline import run

    model = m.ResidualAfterStaticLoop().eval()
    job = run(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), until="capture", verify=False)
    signature = job.program.graph_signature
    assert not signature.user_inputs_to_mutate, signature.user_inputs_to_mutate
    assert not any(n.target is torch.ops.aten.where.self for n in job.program.graph.nodes)
    exported = export_to_ort(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert "Where" not in exported.ops, exported.ops
    assert_matches_eager(model, exported, [(torch.randn(b, 4),) for b in (1, 3, 5)])


def test_a_rebinding_inside_a_with_block_in_the_loop():
    """The flag is set again inside the ``with`` block too (the walk once crashed on a ``with``)."""
    model = m.RebindsUnderWith().eval()
    inputs = [(torch.randn(3), torch.tensor(k)) for k in (0, 1, 2, 4)]
    exported = export_to_ort(model, (torch.randn(3), torch.tensor(3)))
    assert exported.ops.get("Loop", 0) >= 1 and exported.ops.get("Where", 0) >= 1
    assert_matches_eager(model, exported, inputs)
