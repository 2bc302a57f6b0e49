"""Verification inputs stay inside the model's domain and change nothing of the caller's.

Differential throughout: every model here is converted and verified by fxport (eager vs ONNX
Runtime), and the generated input sets are checked against the domain the program implies.
"""

import json
import os

import pytest
import torch

import fxport
from fxport.verify.inputs.domains import InputDomain, input_domains, is_padding_shaped, padding_mask
from fxport.eager.inputs import InputSet
from fxport.verify.compare import flatten_outputs
from fxport.verify.verification import generate_input_sets
from tests.conftest import MODELS, assert_matches_eager, run_cli

TEXT = os.path.join(MODELS, "text.py")


class Embed(torch.nn.Module):
    def __init__(self, rows=37):
        super().__init__()
        self.table = torch.nn.Embedding(rows, 4)
        self.types = torch.nn.Embedding(2, 4)

    def forward(self, ids, token_types, mask):
        h = self.table(ids.reshape(ids.shape)) + self.types(token_types)
        return (h * mask[..., None]).sum(1)


def embed_example():
    ids = torch.tensor([[1, 2, 3, 4], [4, 3, 2, 1]])
    return InputSet((ids, torch.zeros_like(ids), torch.ones_like(ids)))


def export(module, example, dynamic=None):
    return torch.export.export(module, example.args, dynamic_shapes=dynamic)


def test_domains_come_from_the_program_not_the_names():
    example = embed_example()
    domains = input_domains(export(Embed(), example), example)
    assert domains[0] == InputDomain(index_bound=37, index_source="embedding table")
    assert domains[1].index_bound == 2, "token types index their own 2-row table"
    assert domains[2].padding_mask and domains[2].index_bound is None


def test_index_select_bounds_and_sorted_preconditions():
    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(11, 3))

        def forward(self, rows, boundaries, values):
            return self.table.index_select(0, rows).sum() + torch.searchsorted(boundaries, values).sum()

    example = InputSet((torch.tensor([0, 5]), torch.tensor([[0.1, 0.5, 0.9]]), torch.tensor([[0.3, 0.7]])))
    domains = input_domains(export(Lookup(), example), example)
    assert domains[0].index_bound == 11 and domains[0].index_source == "index_select"
    assert domains[1].sorted_last_axis and 2 not in domains


def test_domains_follow_operands_into_converted_branches():
    """An id tensor that reaches an embedding only inside a torch.cond branch is still an id."""
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(13, 2)

        def forward(self, x, ids):
            return torch.cond(x.sum() > 0, lambda x, ids: self.table(ids).sum() + x.sum(),
                              lambda x, ids: x.sum(), (x, ids))

    example = InputSet((torch.randn(3), torch.tensor([1, 2])))
    assert input_domains(export(Branchy(), example), example)[1].index_bound == 13


@pytest.mark.parametrize("mask, shaped", [
    ([[1, 1, 0], [0, 1, 1], [1, 1, 1]], True),
    ([[1, 0, 1], [1, 1, 1]], False),        # a hole: not padding
    ([[0, 0, 0], [1, 1, 1]], False),        # a row without a valid position
    ([1, 1, 0], False),                     # rank 1: a vector of flags, not a batch of masks
    ([[2, 1, 0]], False),
])
def test_padding_shape_is_recognised_only_for_padding(mask, shaped):
    assert is_padding_shaped(torch.tensor(mask)) is shaped


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (3, 1), (4, 6), (2, 3, 7)])
def test_padding_masks_keep_a_valid_position_per_row(side, shape):
    mask = padding_mask(shape, torch.int64, side, torch.Generator().manual_seed(3))
    assert mask.shape == shape and is_padding_shaped(mask) if len(shape) > 1 else True
    rows = mask.reshape(-1, shape[-1])
    assert bool((rows.sum(-1) >= 1).all())
    if rows.shape[0] > 1 and shape[-1] > 1:
        assert int(rows.sum(-1).min()) < shape[-1], "some row is padded"
        edge = rows[:, -1] if side == "right" else rows[:, 0]
        assert int(edge.min()) == 0, f"padding sits on the {side}"


def test_generated_sets_are_in_domain_and_named_by_what_they_exercise():
    example = embed_example()
    program = export(Embed(), example, dynamic=({0: torch.export.Dim("b"), 1: torch.export.Dim("s")},) * 3)
    domains = input_domains(program, example)
    axes = {i: {0: "batch", 1: "seq"} for i in range(3)}
    sets = generate_input_sets(example, axes, domains=domains)
    names = [s.name for s in sets]
    assert names[:3] == ["random, all-ones mask", "right-padded mask", "left-padded mask"]
    assert any(n.startswith("larger[batch=3,seq=6]") and n.endswith("left-padded mask") for n in names)
    for input_set in sets:
        ids, types, mask = input_set.tensors()
        if ids.numel() == 0:  # the size-0 sets (batch=0, seq=0): nothing to range-check
            continue
        assert 0 <= int(ids.min()) and int(ids.max()) < 37 and set(types.unique().tolist()) <= {0, 1}
        assert is_padding_shaped(mask) and mask.dtype == torch.int64
    drawn = torch.cat([s.tensors()[0].flatten() for s in sets])
    assert int(drawn.max()) > 4, "ids range over the table, not just the example's values"


def test_generated_values_are_never_the_callers_tensors():
    example = embed_example()
    for input_set in generate_input_sets(example, None):
        assert all(a.data_ptr() != b.data_ptr() for a, b in zip(input_set.tensors(), example.tensors()))


def test_sets_of_other_sizes_keep_the_inputs_they_do_not_resize():
    """A set testing size 0 or 1 keeps the example's trip count: a count redrawn to 0 would
    leave the loop body untested at that size (the fuzzer's find: a file failing at batch 0
    passed because its batch-0 set drew a count that ran no step)."""
    example = InputSet((torch.rand(3, 4), torch.tensor(7)))
    sets = generate_input_sets(example, {0: {0: "batch"}})
    edges = [s for s in sets if s.name.startswith("size[")]
    assert {s.tensors()[0].shape[0] for s in edges} == {0, 1}
    assert all(int(s.tensors()[1]) == 7 for s in edges)
    assert any(int(s.tensors()[1]) != 7 for s in sets if s.name.startswith("larger[")), "fresh values elsewhere"


def test_fresh_values_at_the_example_sizes_run_only_where_no_other_size_draws_them():
    """``random`` is one full-size run of both sides: left out when ``larger``/``smaller`` draw
    fresh values at other sizes, kept without dynamic sizes and for a mask's all-ones variant."""
    image = InputSet((torch.randn(4, 3, 8, 8),))
    names = [s.name for s in generate_input_sets(image, {0: {0: "batch", 2: "height"}})]
    assert "random" not in names and names[0].startswith("larger[") and names[1].startswith("smaller[")
    assert [s.name for s in generate_input_sets(image, {})] == ["random"]
    at_its_only_size = generate_input_sets(image, {0: {0: "batch"}}, bounds={0: {0: (4, 4)}})
    assert at_its_only_size[0].name == "random"
    text = InputSet((torch.randint(0, 37, (2, 5)), torch.zeros(2, 5, dtype=torch.int64), torch.ones(2, 5)))
    masked = generate_input_sets(text, {0: {1: "seq"}, 1: {1: "seq"}, 2: {1: "seq"}},
                                 domains={2: InputDomain(padding_mask=True)})
    assert masked[0].name == "random, all-ones mask" and any(s.name.startswith("larger[") for s in masked)


def test_smaller_is_left_to_the_edge_set_that_shrinks_the_same_single_dimension():
    """A clip of 8 frames at batch 1: ``smaller`` would shrink the frames alone (to 4), which the
    edge set at 2 frames already checks for less; two dimensions shrunk together stay a set."""
    clip = InputSet((torch.randn(1, 3, 8, 4, 4),))
    names = [s.name for s in generate_input_sets(clip, {0: {0: "batch", 2: "frames"}})]
    assert not any(n.startswith("smaller[") for n in names) and "size[frames=2]" in names
    assert any(n.startswith("larger[batch=") for n in names) and "size[frames=1]" in names
    bounded = generate_input_sets(clip, {0: {0: "batch", 2: "frames"}}, bounds={0: {2: (6, 64)}})
    assert any(s.name == "smaller[batch=1,frames=6]" for s in bounded), "no edge inside the range below 8"
    image = InputSet((torch.randn(4, 3, 8, 8),))
    assert any(s.name == "smaller[batch=2,height=4]"
               for s in generate_input_sets(image, {0: {0: "batch", 2: "height"}}))


def test_a_big_clips_batch_grows_in_the_edge_set_that_shrinks_its_frames():
    """r3d_18's clip of 8 frames at batch 1 (over 65,536 elements): the batch grows in the edge
    set at 2 frames rather than in ``larger``: 1.6 example runs where 2×9 frames and the edge
    cost 2.5, and frames and batch are each still run above and below the example."""
    clip = InputSet((torch.randn(1, 3, 8, 112, 112),))
    names = [s.name for s in generate_input_sets(clip, {0: {0: "batch", 2: "frames"}})]
    assert names == ["larger[batch=1,frames=9]", "mixed[batch=2,frames=2]", "size[batch=0]",
                     "size[frames=1]", "size[frames=0]"], names


@pytest.mark.slow
def test_text_model_verifies_on_padded_masks_through_the_cli(tmp_path):
    result = run_cli("convert", f"{TEXT}:MaskedPooler", "-o", str(tmp_path / "m.onnx"), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["verification"]}
    assert {"right-padded mask", "left-padded mask"} <= set(rows)
    assert all(row["passed"] for row in rows.values())


def test_text_model_matches_eager_on_user_padding():
    from tests.models.text import MaskedPooler

    model = MaskedPooler().eval()
    result = fxport.convert(model, model.example_inputs(), dynamic_shapes=MaskedPooler.example_dynamic_shapes)
    ids = torch.randint(0, 50, (3, 9))
    mask = torch.tensor([[1] * 9, [0] * 4 + [1] * 5, [1] * 2 + [0] * 7])
    assert_matches_eager(model, result.model, ids, mask, atol=1e-5)


class Searchsorted(torch.nn.Module):
    def forward(self, boundaries, values):
        return torch.searchsorted(boundaries, values)


def test_searchsorted_model_verifies_on_sorted_sequences():
    boundaries = torch.sort(torch.randn(3, 10)).values
    result = fxport.convert(Searchsorted(), (boundaries, torch.randn(3, 5)))
    assert result.verified and len(result.verification) >= 2
    assert any(r.rule == "aten::searchsorted" for r in result.rewrites)


class WritesInput(torch.nn.Module):
    """ExportDB's user_input_mutation, plus a buffer the forward counts in."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        x.mul_(2)
        return x.cos()


def test_convert_changes_nothing_of_the_callers():
    model, x = WritesInput(), torch.randn(3, 4)
    before = x.clone()
    result = fxport.convert(model, (x,), dynamic_shapes={"x": {0: "batch"}})
    assert result.verified and all(row.max_abs_error < 1e-5 for row in result.verification)
    assert torch.equal(x, before), "the caller's tensor is as it was"
    assert float(model.calls) == 0.0, "the module's buffer is as it was"
    fresh = torch.randn(5, 4)
    from tests.conftest import run_onnx

    torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, fresh)[0]), (fresh * 2).cos())


class Numbers(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.shape[1] + 1, (x.shape[0] * 0.5, True)


@pytest.mark.parametrize("dynamic", [None, {"x": {0: "batch", 1: "width"}}])
def test_number_outputs_are_compared_as_values(dynamic):
    result = fxport.convert(Numbers(), (torch.randn(3, 4),), dynamic_shapes=dynamic)
    assert result.verified and len(result.model.graph.output) == 4
    x = torch.randn(5, 7) if dynamic else torch.randn(3, 4)
    expected = flatten_outputs(Numbers()(x))
    from tests.conftest import run_onnx

    actual = run_onnx(result.model, x)
    assert [a.tolist() for a in actual[1:]] == [e.tolist() for e in expected[1:]]


def test_a_wrong_number_output_is_refused():
    """Comparing numbers can fail: an ONNX file returning another value than eager is refused."""
    import numpy as np

    from fxport.verify.compare import compare_outputs

    comparisons, _ = compare_outputs(flatten_outputs((torch.ones(2), 5)), [np.ones(2, np.float32), np.array(6)])
    assert [c.passed for c in comparisons] == [True, False]


def test_a_big_image_batch_grows_in_the_set_that_shrinks_the_image():
    """1×3×224×224: growing the batch to 2 in ``larger`` doubles its run; grown in the shrunk set
    (``mixed``) instead, the pair costs 1.5 example runs, not 2.3, and each dimension is still
    run above the example (and height and width below it)."""
    image = InputSet((torch.randn(1, 3, 224, 224),))
    sets = generate_input_sets(image, {0: {0: "batch", 2: "height", 3: "width"}})
    shapes = {s.name: tuple(s.tensors()[0].shape) for s in sets}
    assert shapes["larger[batch=1,height=225,width=225]"] == (1, 3, 225, 225)
    assert shapes["mixed[batch=2,height=112,width=112]"] == (2, 3, 112, 112)
    assert "size[batch=2]" not in shapes  # the mixed set runs batch 2
    cost = sum(s.tensors()[0].numel() for s in sets if s.name.startswith(("larger", "mixed"))) / image.tensors()[0].numel()
    assert cost < 1.6
    small = InputSet((torch.randn(1, 3, 64, 64),))  # under 65,536 elements: cheap either way, not crossed
    names = [s.name for s in generate_input_sets(small, {0: {0: "batch", 2: "height", 3: "width"}})]
    assert names[:2] == ["larger[batch=2,height=65,width=65]", "smaller[batch=1,height=32,width=32]"]


def test_smaller_keeps_its_right_padded_mask_when_there_is_no_larger_set():
    """A sequence exported for at most its example's length has no ``larger`` set; ``smaller``
    still pads on the right (``larger`` pads on the left), as before sizes moved to set_sizes.py."""
    text = InputSet((torch.randint(0, 37, (2, 5)), torch.ones(2, 5)))
    names = [s.name for s in generate_input_sets(text, {0: {1: "seq"}, 1: {1: "seq"}},
                                                 bounds={0: {1: (2, 5)}, 1: {1: (2, 5)}},
                                                 domains={1: InputDomain(padding_mask=True)})]
    assert "smaller[seq=2], right-padded mask" in names and not any(n.startswith("larger[") for n in names)
