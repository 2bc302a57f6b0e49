"""Decisions taken otherwise on keys within tolerance are replayed; others still fail (fxport/verify/decisions.py).

Each test converts a small model, then *perturbs the file* at the key of one decision (an Add
in front of the TopK, the comparison, the NMS), which makes ONNX Runtime decide otherwise than
eager the way float32 noise does on a knife edge — or, with a large perturbation, the way a
wrong conversion does. The first must verify (the verdict says which decision it replayed);
the second must still be refused.
"""

import numpy as np
import pytest
import torch

import fxport
from fxport.errors import VerificationError
from fxport.eager.inputs import InputSet
from fxport.verify.verification import verify_model
from tests.conftest import perturbed


class TopBoxes(torch.nn.Module):
    """The boxes of the three best keys (the keys themselves are not an output)."""

    def forward(self, scores, boxes):
        keys = scores * 2.0
        return boxes[keys.topk(3).indices] + 1.0


class KeptBoxes(torch.nn.Module):
    """The boxes whose key passes a threshold: how many depends on the decision."""

    def forward(self, scores, boxes):
        keys = scores * 2.0
        return boxes[keys > 1.0] * 3.0


def _converted(module, *inputs):
    result = fxport.convert(module, inputs, verify=False, keep_artifacts=True)
    return result.model, result.artifacts["translated_program"]


def _boxes(count):
    return torch.arange(count * 4, dtype=torch.float32).reshape(count, 4)


def _verify(module, model, program, *inputs):
    return verify_model(module, model, [InputSet(inputs)], generate=False, program=program)


def test_a_top_k_decided_otherwise_on_tied_keys_is_replayed_and_verifies():
    scores = torch.tensor([2.5, 2.0, 1.50000012, 1.5, 0.5])     # keys 3.0000002 and 3.0 tie for third place
    model, program = _converted(TopBoxes(), scores, _boxes(5))
    noisy = perturbed(model, "mul", np.array([0, 0, 0, 1e-6, 0]))  # the file now picks index 3
    with pytest.raises(VerificationError):                          # position by position the boxes differ
        _verify(TopBoxes(), noisy, None, scores, _boxes(5))
    rows = _verify(TopBoxes(), noisy, program, scores, _boxes(5))
    assert rows[0].passed and rows[0].max_abs_error == 0.0
    assert "1 decision(s) ONNX Runtime took otherwise on keys within tolerance (top-k at" in rows[0].note
    assert "test_decisions.py" in rows[0].note                      # the user's line of the topk


def test_a_top_k_that_picks_a_key_beyond_tolerance_is_refused():
    scores = torch.tensor([2.5, 2.0, 1.5, 1.4, 0.5])                # keys 3.0 and 2.8: no tie
    model, program = _converted(TopBoxes(), scores, _boxes(5))
    wrong = perturbed(model, "mul", np.array([0, 0, 0, 0.5, 0]))   # a wrong file picks index 3
    with pytest.raises(VerificationError) as failure:
        _verify(TopBoxes(), wrong, program, scores, _boxes(5))
    assert "top-k at" in failure.value.report[0].note and "is not one eager takes" in failure.value.report[0].note
    assert "top-k keys 2.8 where eager has 3" in failure.value.report[0].note


def test_a_threshold_decided_otherwise_at_the_threshold_is_replayed_and_changes_the_count():
    scores = torch.tensor([0.9, 0.50000006, 0.2, 0.7])              # key 1.0000001 at the threshold 1.0
    model, program = _converted(KeptBoxes(), scores, _boxes(4))
    noisy = perturbed(model, "mul", np.array([0, -1e-6, 0, 0]))    # the file drops it: 2 boxes, not 3
    rows = _verify(KeptBoxes(), noisy, program, scores, _boxes(4))
    assert rows[0].passed and "comparison (gt) at" in rows[0].note
    assert "keys 1.2e-07 apart" in rows[0].note, rows[0].note      # the margin: the key's distance to 1.0


def test_a_threshold_decided_otherwise_far_from_it_is_refused():
    scores = torch.tensor([0.9, 0.6, 0.2, 0.7])                     # key 1.2, clearly above 1.0
    model, program = _converted(KeptBoxes(), scores, _boxes(4))
    wrong = perturbed(model, "mul", np.array([0, -0.3, 0, 0]))
    with pytest.raises(VerificationError) as failure:
        _verify(KeptBoxes(), wrong, program, scores, _boxes(4))
    assert "it decides 1.2 against 1 otherwise" in failure.value.report[0].note


def test_a_file_whose_outputs_differ_after_the_replay_is_refused():
    scores = torch.tensor([2.5, 2.0, 1.50000012, 1.5, 0.5])
    model, program = _converted(TopBoxes(), scores, _boxes(5))
    gathered = next(node.output[0] for node in model.graph.node if node.op_type == "GatherND")
    noisy = perturbed(perturbed(model, "mul", np.array([0, 0, 0, 1e-6, 0])), gathered,
                       np.full((3, 4), 0.25))                       # and a wrong offset on the gathered boxes
    with pytest.raises(VerificationError) as failure:
        _verify(TopBoxes(), noisy, program, scores, _boxes(5))
    assert failure.value.report[0].max_abs_error >= 0.25


def test_sets_that_pass_never_build_the_replay():
    scores = torch.tensor([2.5, 2.0, 1.5, 1.4, 0.5])
    model, program = _converted(TopBoxes(), scores, _boxes(5))
    rows = _verify(TopBoxes(), model, program, scores, _boxes(5))
    assert rows[0].passed and rows[0].note == ""


class PerImage(torch.nn.Module):
    """torchvision's output structure: a list of dicts, one per image."""

    def forward(self, scores, boxes):
        keys = scores * 2.0
        best = keys.topk(3).indices
        return [{"boxes": boxes[best], "count": (keys > 1.0).sum()}, {"boxes": boxes[:2] * 2.0}]


def test_a_replay_keeps_the_output_structure_of_lists_of_dicts():
    scores = torch.tensor([2.5, 2.0, 1.50000012, 1.5, 0.5])
    model, program = _converted(PerImage(), scores, _boxes(5))
    noisy = perturbed(model, "mul", np.array([0, 0, 0, 1e-6, 0]))
    rows = _verify(PerImage(), noisy, program, scores, _boxes(5))
    assert rows[0].passed and "top-k at" in rows[0].note


class SizeBranch(torch.nn.Module):
    """A Python branch on a size: torch.export keeps the example's side and guards it."""

    def forward(self, scores, other):
        keys = scores * 2.0
        if other.shape[0] > 2:
            return keys.topk(2).indices
        return keys.topk(2).indices + 10


def test_inputs_beyond_the_programs_guards_fail_and_are_not_skipped():
    from fxport.lower.external import Staging
    from fxport.lower.lowering import lower_model

    scores = torch.tensor([2.5, 2.0, 1.5, 1.4, 0.5])
    program = torch.export.export(SizeBranch(), (scores, torch.ones(4)),
                                  dynamic_shapes=(None, {0: torch.export.Dim.DYNAMIC}))
    lowered = lower_model(program, staging=Staging())
    with pytest.raises(VerificationError) as failure:   # eager takes the other side at size 1
        _verify(SizeBranch(), lowered.proto, lowered.translated_program, scores, torch.ones(1))
    assert not failure.value.report[0].passed
    assert "the exported program itself differs from eager on these inputs" in failure.value.report[0].note


class BestPerRow(torch.nn.Module):
    """max over a dimension: which column wins decides what is gathered."""

    def forward(self, scores, table):
        keys = scores * 2.0
        best, where = keys.max(dim=1)
        return table[where] + best[:, None]


def test_a_max_over_a_dimension_decided_otherwise_on_a_tie_is_replayed():
    scores = torch.tensor([[0.5, 1.00000006, 1.0], [0.3, 0.2, 0.1]])     # row 0: columns 1 and 2 tie
    table = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    model, program = _converted(BestPerRow(), scores, table)
    noisy = perturbed(model, "mul", np.array([[0, 0, 1e-6], [0, 0, 0]]))
    rows = _verify(BestPerRow(), noisy, program, scores, table)
    assert rows[0].passed and "max over a dimension at" in rows[0].note
    wrong = perturbed(model, "mul", np.array([[0, 0, 0], [0, 0.5, 0]]))  # row 1 picks column 1 (0.4 < 0.6)
    with pytest.raises(VerificationError) as failure:
        _verify(BestPerRow(), wrong, program, scores, table)
    assert "arg-max keys 0.4 where eager has 0.6" in failure.value.report[0].note


class CeilSize(torch.nn.Module):
    """A size rounded up from float keys (Keypoint R-CNN's box widths)."""

    def forward(self, scores):
        return (scores * 2.0).ceil() * 3.0


def test_a_rounding_decided_otherwise_at_an_integer_is_replayed_and_one_far_from_it_refused():
    scores = torch.tensor([1.0000001, 0.3, 1.15])                      # keys 2.0000002, 0.6, 2.3
    model, program = _converted(CeilSize(), scores)
    noisy = perturbed(model, "mul", np.array([-5e-7, 0, 0]))           # the file rounds 1.9999997 up to 2
    with pytest.raises(VerificationError):
        _verify(CeilSize(), noisy, None, scores)
    rows = _verify(CeilSize(), noisy, program, scores)
    assert rows[0].passed and "ceil at" in rows[0].note
    wrong = perturbed(model, "mul", np.array([0, 0, -0.5]))            # 1.8 rounded up: 2, not 3
    with pytest.raises(VerificationError) as failure:
        _verify(CeilSize(), wrong, program, scores)
    assert "it rounds 2.3 to 2 where eager has 3" in failure.value.report[0].note


class CancellingAfterTopK(torch.nn.Module):
    """The three best boxes through arithmetic that loses float32 precision (a large offset added
    and taken away): after the decision, float32 noise beyond the fixed tolerances."""

    def forward(self, scores, boxes):
        keys = scores * 2.0
        return (boxes[keys.topk(3).indices] + 1e5) - 1e5


def test_float32_noise_after_a_replayed_decision_is_judged_against_the_program_replayed_in_float64():
    """The replay's outputs and the file's then differ as float32 noise does (here a step of
    float32's 0.0078 spacing at 1e5, beyond the fixed 1e-4 + 1e-3·|x|): judged against the
    program run in float64 with the file's decisions, as the float64 judge judges a set; a file
    0.5 off after the same decision is still refused."""
    scores = torch.tensor([2.5, 2.0, 1.50000012, 1.5, 0.5])
    boxes = _boxes(5) / 10.0
    model, program = _converted(CancellingAfterTopK(), scores, boxes)
    gathered = next(node.output[0] for node in model.graph.node if node.op_type == "GatherND")
    tie = perturbed(model, "mul", np.array([0, 0, 0, 1e-6, 0]))      # the file picks index 3
    noisy = perturbed(tie, gathered, np.full((3, 4), 0.006))
    rows = _verify(CancellingAfterTopK(), noisy, program, scores, boxes)
    assert rows[0].passed and "top-k at" in rows[0].note, rows[0].note
    assert rows[0].onnx_error is not None and 0.004 < rows[0].onnx_error < 0.02, rows[0]
    assert "after them, judged against the program replayed in float64" in rows[0].note, rows[0].note
    wrong = perturbed(tie, gathered, np.full((3, 4), 0.5))
    with pytest.raises(VerificationError) as failure:
        _verify(CancellingAfterTopK(), wrong, program, scores, boxes)
    assert not failure.value.report[0].passed


class CancellingKeys(torch.nn.Module):
    """Keys that carry float32 noise beyond the fixed tolerances (a large offset added and taken
    away: float32 keeps them on a 0.0078 grid), then the boxes of the two best."""

    def forward(self, scores, boxes):
        keys = (scores + 1e5) - 1e5
        return boxes[keys.topk(2).indices] * 2.0


def test_a_decision_on_keys_within_their_own_float32_noise_is_replayed_and_one_beyond_it_refused():
    """Keys 1.5 and 1.5078 (one float32 step apart at 1e5): the fixed tolerance (1.6e-3) refuses
    the file's top-k picking the lower one, but float32 carries these keys up to 0.004 from
    their float64 values, and a decision within 8× that noise is a knife edge; a key 0.49 lower
    is not."""
    scores = torch.tensor([3.0, 1.5, 1.51, 0.2])
    boxes = _boxes(4)
    model, program = _converted(CancellingKeys(), scores, boxes)
    keys = next(node.output[0] for node in model.graph.node if node.op_type == "Sub")
    tie = perturbed(model, keys, np.array([0, 0.0079, 0, 0]))           # the file now prefers index 1
    with pytest.raises(VerificationError):
        _verify(CancellingKeys(), tie, None, scores, boxes)
    rows = _verify(CancellingKeys(), tie, program, scores, boxes)
    assert rows[0].passed and "top-k at" in rows[0].note and "their float32 noise" in rows[0].note, rows[0].note
    wrong = perturbed(model, keys, np.array([0, 0, 0, 1.4]))            # 1.6 against 1.51: beyond the noise
    with pytest.raises(VerificationError) as failure:
        _verify(CancellingKeys(), wrong, program, scores, boxes)
    assert "is not one eager takes on keys within tolerance" in failure.value.report[0].note
