"""Classes of loops from public code that fxport refused or lowered wrongly (issue #47): each
converts, equals eager on inputs that take every exit, and holds the Loop it was converted to."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import fxport
from tests.controlflow import loop_class_models as m
from tests.controlflow import loop_models as lm
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, trip_counts


def _positive(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) + 0.1


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_sinkhorn_with_an_item_error_equals_eager_at_every_exit():
    model = m.SinkhornItemError()
    exported = export_to_ort(model, (_positive(4, 3),), dynamic_shapes={"cost": {0: "n", 1: "m"}})
    square = torch.full((3, 3), 1 / 3)  # doubly stochastic: converged after the first trip
    inputs = [(_positive(4, 3, seed=1),), (_positive(1, 5, seed=2),), (_positive(6, 2, seed=3),), (square,)]
    assert {1, 40} <= set().union(*trip_counts(model, inputs).values())  # error below tol at once; the trip bound
    assert_matches_eager(model, exported, inputs, atol=1e-4, rtol=1e-3)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_python_int_level_written_into_a_float_buffer_loads_and_equals_eager():
    model = m.BfsLevels()
    chain = torch.tensor([[0., 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
    exported = export_to_ort(model, (chain,), dynamic_shapes={"adjacency": {0: "n", 1: "n"}})
    star = torch.tensor([[0., 1, 1], [1, 0, 0], [1, 0, 0]])
    alone = torch.zeros(1, 1)
    inputs = [(chain,), (star,), (alone,), (torch.zeros(3, 3),)]
    assert {1, 3, 4} <= set().union(*trip_counts(model, inputs).values())  # break at once; 2 and 3 levels
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class _TransposedMatVec(torch.nn.Module):
    def forward(self, M, u):
        return 1.0 / (M.t() @ u)


def _ort_fuses_transposed_matvec_wrongly() -> bool:
    import onnx.helper as h

    graph = h.make_graph([h.make_node("Transpose", ["M"], ["t"], perm=[1, 0]), h.make_node("MatMul", ["t", "u"], ["y"])],
                         "g", [h.make_tensor_value_info("M", 1, ["n", "m"]), h.make_tensor_value_info("u", 1, ["n"])],
                         [h.make_tensor_value_info("y", 1, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    matrix, vector = _positive(4, 3).numpy(), np.full(4, 0.25, np.float32)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"M": matrix, "u": vector})[0]
    return not np.allclose(got, matrix.T @ vector, atol=1e-5)


def test_a_transposed_matrix_times_a_vector_is_written_as_onnx_runtime_computes_it():
    model = _TransposedMatVec()
    result = fxport.convert(model, (_positive(4, 3), _positive(4)), dynamic_shapes={"M": {0: "n", 1: "m"}, "u": {0: "n"}})
    assert result.verified
    ops = result.op_counts()
    assert ops.get("Unsqueeze") and ops.get("Squeeze") and ops.get("MatMul") == 1
    from tests.conftest import assert_matches_eager as equals_eager

    for n, k in [(1, 5), (6, 2), (3, 3)]:
        equals_eager(model, result.model, _positive(n, k, seed=n), _positive(n, seed=k))


def test_without_the_workaround_verification_refuses_the_file_onnx_runtime_miscomputes(monkeypatch):
    """The seeded counterpart: the workaround off, ONNX Runtime's fused product differs from eager
    and verification refuses the file (where this ONNX Runtime still miscomputes the pattern)."""
    if not _ort_fuses_transposed_matvec_wrongly():
        pytest.skip(f"onnxruntime {ort.__version__} computes MatMul(Transpose(A), v) right")
    import fxport.lower.lowering as lowering

    monkeypatch.setattr(lowering, "apply_ort_workarounds", lambda model: {})
    with pytest.raises(fxport.VerificationError):
        fxport.convert(_TransposedMatVec(), (_positive(4, 3), _positive(4)), dynamic_shapes={"M": {0: "n", 1: "m"}, "u": {0: "n"}})


@pytest.mark.parametrize("model", [lm.DefinedOnlyInLoop(), lm.IndexUndefinedBeforeLoop()], ids=["value", "counter"])
def test_a_variable_first_bound_in_the_loop_and_read_after_it_converts(model):
    """``for i in range(int(n)): y = x * i`` then ``return y`` (or ``return x * i``): no value before
    the loop. A placeholder the body overwrites before reading stands for it; after the loop it is
    left only at 0 trips, where eager raises (the name is unbound)."""
    x = torch.randn(3, 4)
    exported = export_to_ort(model, (x, torch.tensor(3)), dynamic_shapes={"x": {0: "b"}, "n": None})
    inputs = [(torch.randn(2, 4), torch.tensor(k)) for k in (1, 2, 5)] + [(torch.randn(1, 4), torch.tensor(1))]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
    with pytest.raises(UnboundLocalError):
        model(x, torch.tensor(0))


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_power_iteration_ending_on_allclose_converts_and_returns_the_last_iterate():
    """cockpit-style power iteration: ``for _ in range(100)``, ``w`` first bound in the body,
    ``if torch.allclose(w, v): break`` (a bool about tensors: a tensor condition here)."""
    model = m.PowerIterationAllclose()
    spd = lambda n, seed: (lambda a: a @ a.T + torch.eye(n))(torch.randn(n, n, generator=torch.Generator().manual_seed(seed)))
    exported = export_to_ort(model, (spd(4, 0),), dynamic_shapes={"a": {0: "n", 1: "n"}})
    identity = torch.eye(3)  # converged at the first check
    inputs = [(spd(3, 1),), (spd(6, 2),), (identity,), (torch.tensor([[2.0]]),)]
    trips = set().union(*trip_counts(model, inputs).values())
    assert 1 in trips and max(trips) > 2
    assert_matches_eager(model, exported, inputs, atol=1e-4, rtol=1e-3)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_flood_fill_until_equal_converts():
    """Region growing until ``torch.equal(new, r)`` (a dilation loop): the exit is a tensor."""
    model = m.FloodFillUntilEqual()
    seed = torch.zeros(1, 1, 6, 6)
    seed[..., 0, 0] = 1
    allowed = torch.ones(1, 1, 6, 6)
    allowed[..., 3, :] = 0
    exported = export_to_ort(model, (seed, allowed), dynamic_shapes={"seed": {2: "h", 3: "w"}, "allowed": {2: "h", 3: "w"}})
    blocked = torch.zeros(1, 1, 4, 5)
    inputs = [(seed[..., :4, :5].clone(), torch.ones(1, 1, 4, 5)), (seed[..., :4, :5].clone(), blocked),
              (torch.ones(1, 1, 3, 3), torch.ones(1, 1, 3, 3)), (seed, allowed)]
    assert {1, 2}.issubset(set().union(*trip_counts(model, inputs).values()))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_row_written_at_the_loop_counter_converts():
    """``trellis[t + 1, 1:] = f(trellis[t, 1:], emission[t, tokens[1:]])`` over a dynamic number of
    frames: the row at ``t`` is read, written as eager writes it and put back (no ``.item()``)."""
    model = m.ForcedAlignTrellis()
    tokens = torch.export.Dim("tokens", min=3)  # the model's own slice -k + 1: narrows k (torch says so)
    emission = torch.randn(6, 5).log_softmax(-1)
    exported = export_to_ort(model, (emission, torch.tensor([0, 1, 2])),
                             dynamic_shapes={"emission": {0: torch.export.Dim("frames", min=2)}, "tokens": {0: tokens}})
    ids = lambda *v: torch.tensor(v)
    inputs = [(torch.randn(2, 5).log_softmax(-1), ids(0, 3, 4)), (torch.randn(9, 5).log_softmax(-1), ids(1, 2, 3, 4)),
              (torch.randn(3, 5).log_softmax(-1), ids(4, 4, 4, 4, 4))]
    assert {1, 2, 8} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_emissions_read_at_the_counter_beside_index_tensors_convert():
    model = m.CrfScore()
    g = torch.Generator().manual_seed(1)
    make = lambda s, b, lengths: (torch.randn(s, b, 5, generator=g), torch.randint(0, 5, (s, b), generator=g),
                                  torch.arange(s)[:, None] < torch.tensor(lengths)[None])
    exported = export_to_ort(model, make(4, 2, [4, 2]), dynamic_shapes={"emissions": {0: "s", 1: "b"}, "tags": {0: "s", 1: "b"},
                                                                         "mask": {0: "s", 1: "b"}})
    inputs = [make(1, 3, [1, 1, 1]), make(2, 1, [2]), make(6, 4, [6, 1, 3, 5])]  # 0, 1 and 5 trips; padding on the right
    assert {0, 1, 5} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_stop_gate_loop_that_prints_at_its_step_bound_converts(capsys):
    """Tacotron 2's inference loop: the ``print`` beside the step-bound ``break`` runs when the
    converted code runs eagerly and is left out of the file (whose outputs are the same)."""
    model = m.StopGateDecoder()
    memory = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0))
    exported = export_to_ort(model, (memory, torch.tensor([0.0])), dynamic_shapes={"memory": {1: "t"}, "bias": None})
    assert "Reached max decoder steps" not in capsys.readouterr().out  # the export printed nothing
    inputs = [(memory[:, :2], torch.tensor([9.0])), (memory[:, :3], torch.tensor([-9.0])), (memory, torch.tensor([0.0]))]
    trips = set().union(*trip_counts(model, inputs).values())
    assert {1, model.max_decoder_steps} <= trips  # the gate at once; the step bound (and its print)
    assert "Reached max decoder steps" in capsys.readouterr().out  # eager, converted, printed it
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def _boxes(*rows):
    return torch.tensor(rows, dtype=torch.float32)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_nms_whose_order_empties_stops_where_eager_stops_at_every_exit():
    """The file must not run the body once more when ``order`` empties (the issue's shipped bug):
    two overlapping boxes empty it after one trip; one box leaves by the break; disjoint boxes by
    the break after the last; the loop test turns false on an emptied order."""
    model = m.TutorialNms()
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(8, 2, generator=g) * 10
    example = (torch.cat([xy, xy + torch.rand(8, 2, generator=g) * 5 + 1], 1), torch.rand(8, generator=g))
    exported = export_to_ort(model, example, dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    overlapping = (_boxes([0, 0, 10, 10], [1, 1, 11, 11]), torch.tensor([0.9, 0.8]))
    one = (_boxes([0, 0, 1, 1]), torch.tensor([0.5]))
    disjoint = (_boxes([0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]), torch.tensor([0.1, 0.7, 0.4]))
    tied = (_boxes([0, 0, 4, 4], [0, 0, 4, 4], [1, 1, 5, 5], [20, 20, 21, 21]), torch.tensor([0.9, 0.8, 0.7, 0.6]))
    inputs = [overlapping, one, disjoint, tied]
    from tests.controlflow._util import loop_exits

    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by its test", "left by a break", "emptied a carried tensor"} <= exits
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_coverage_wants_a_shrinking_state_seen_empty(tmp_path):
    """A loop whose carried tensor shrinks but whose input sets never empty it is reported: the
    emptied exit is a side to cover (where no search reaches it, a warning at the loop's line)."""
    from fxport.controlflow.operators.loops.statements import EMPTIED, SHRANK
    from fxport.verify.exercise import ConstructCoverage
    from fxport.errors import SourceLocation

    construct = ConstructCoverage("while", SourceLocation(__file__, 1), {1, 2, SHRANK, "left by its test"})
    assert "emptied carried tensor" in construct.missing()
    construct.outcomes.add(EMPTIED)
    assert "emptied carried tensor" not in construct.missing()
    assert ConstructCoverage("for", SourceLocation(__file__, 1), {1, 3, "left by a break"}, has_break=True).missing() == \
        ["0 iterations", "exit at its trip bound"]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_state_written_into_attributes_by_a_callee_is_carried():
    """NVIDIA Tacotron 2's ``decode``: dynamo's refusal of the attribute write inside the loop
    body (once 'torch.export failed', then a one-line refusal) is gone: the method runs on an
    overlay of the carried ``self.hidden`` (method_state.py)."""
    model = m.StateInAttributesOfACallee()
    exported = export_to_ort(model, (torch.zeros(2, 4),), dynamic_shapes={"x": {0: "b"}})
    inputs = [(torch.full((1, 4), 3.0),), (torch.zeros(2, 4),), (torch.full((3, 4), -0.5),)]
    assert len(set().union(*trip_counts(model, inputs).values())) >= 2
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_a_size_read_before_a_loop_whose_state_grows_keeps_its_value():
    """``length = tokens.shape[1]`` read in the body of a loop that grows ``seq = tokens.clone()``
    was rebuilt from ``seq``'s growing axis (the loop fuzzer's find): positions came out one
    further each step. The body reads it from a free tensor, never from an axis that grows."""
    model = m.PositionFromPromptLength()
    ids = lambda b, t: torch.randint(0, 9, (b, t), generator=torch.Generator().manual_seed(t))
    exported = export_to_ort(model, (ids(2, 3), torch.tensor(2)), dynamic_shapes={"tokens": {0: "b", 1: "t"}, "n": None})
    inputs = [(ids(2, 4), torch.tensor(0)), (ids(1, 1), torch.tensor(1)), (ids(3, 5), torch.tensor(2)), (ids(2, 2), torch.tensor(6))]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_value_none_before_a_loop_is_replaced_by_a_peeled_first_iteration():
    """``pred = None`` before a data-dependent loop and ``x = start if pred is None else pred`` in
    it (torch-nmt's decoder) was refused: the first iteration runs as Python, peeled, and the Loop
    carries the tensors it made; the builtin ``all`` over a tensor is a tensor exit; the GRU
    encoder keeps the source length dynamic."""
    model = m.GruDecoderFromNone()

    def ids(b, s, seed):
        return torch.randint(0, 7, (b, s), generator=torch.Generator().manual_seed(seed))

    start = lambda b: torch.full((b, 1), 1, dtype=torch.long)
    exported = export_to_ort(model, (ids(2, 4, 0), start(2)), dynamic_shapes={"src": {0: "b", 1: "s"}, "start": {0: "b"}})
    inputs = [(ids(b, s, seed), start(b)) for b, s, seed in [(1, 1, 5), (1, 3, 4), (3, 7, 2), (2, 2, 3), (1, 5, 4), (4, 3, 5), (1, 1, 1)]]
    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by a break", "left at its trip bound"} <= exits, exits
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and exported.ops.get("GRU")


def test_the_builtin_any_over_a_tensor_is_a_loop_exit():
    model = m.AnyFinishedStop()
    exported = export_to_ort(model, (torch.tensor([1.0, 3.0]),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.tensor([1.0, 3.0]),), (torch.tensor([20.0]),), (torch.tensor([0.5, 0.1, 0.3]),)]
    assert {1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_slices_read_and_written_by_a_loop_counter_and_a_branch_that_faults_on_the_other_side():
    """``scores[pos:] = w * scores[pos:]`` with ``pos`` a traced counter (soft-NMS) was refused (a
    number read from a tensor); the rows are read with index_select and written with index_put.
    The arg-max of the rest, guarded by ``if i != n - 1``, fails on an empty rest: the if becomes
    an If inside the Loop (torch.onnx's nested subgraph versions made it unwritable before)."""
    model = m.DecayTailByCounter()
    exported = export_to_ort(model, (torch.rand(5),), dynamic_shapes={"scores": {0: "n"}})
    inputs = [(torch.rand(n, generator=torch.Generator().manual_seed(n)),) for n in (1, 2, 3, 9)]
    assert {1, 2, 3, 9} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
    bodies = [n for n in exported.model.graph.node if n.op_type == "Loop"]
    assert any(node.op_type == "If" for loop in bodies for node in loop.attribute[0].g.node)


def test_a_window_written_at_a_traced_position_equals_eager_at_every_trip_count():
    model = m.WindowWriteAtCounter()
    x = torch.rand(3, 2)
    exported = export_to_ort(model, (x, torch.tensor(2)), dynamic_shapes={"x": {0: "b"}, "steps": None})
    inputs = [(x, torch.tensor(0)), (x[:1], torch.tensor(1)), (x, torch.tensor(2)), (torch.rand(4, 2), torch.tensor(9))]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_branches_of_different_shapes_inside_a_loop_body_become_an_if():
    """k-means' empty-cluster fallback (``selected = points[:1]`` where the mask picked none)
    inside a while loop was refused ("torch.onnx cannot export If nested in Loop")."""
    model = m.NearestSelectedRows()
    pts = lambda n, seed: torch.rand(n, 2, generator=torch.Generator().manual_seed(seed))
    exported = export_to_ort(model, (pts(8, 0), pts(3, 1)), dynamic_shapes={"points": {0: "n"}, "centres": {0: "k"}})
    far = torch.tensor([[50.0, 50.0], [0.5, 0.5]])  # a centre no point is near: the fallback
    inputs = [(pts(8, 2), pts(3, 3)), (pts(1, 4), pts(1, 5)), (pts(20, 6), far), (pts(5, 7), pts(5, 7))]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs, atol=1e-4)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("header", ["for", "while"])
def test_a_leading_break_folds_into_the_loop_test(header):
    """``if finished.all(): break`` as the body's first statement, before a sequence and a mask
    grown by cat, was refused ("strategy='where' is impossible: 'mask' has shape (b, t + 1) in the
    true branch but (b, t)"): the rest of the body was guarded by an if whose sides differ in
    shape. The break is part of the loop's test now, asked before each iteration."""
    model = m.LeadingBreakGreedy(header)

    def ids(rows):
        return torch.tensor(rows, dtype=torch.long)

    exported = export_to_ort(model, (ids([[1, 4], [2, 5]]), torch.tensor(4)),
                             dynamic_shapes={"tokens": {0: "b", 1: "t"}, "n": None})
    inputs = [(ids([[1, 4], [2, 5]]), torch.tensor(4)), (ids([[1]]), torch.tensor(5)), (ids([[3, 2]]), torch.tensor(2)),
              (ids([[5, 5, 5], [2, 2, 2], [4, 1, 3]]), torch.tensor(9)), (ids([[2]]), torch.tensor(0)),
              (ids([[0, 1]]), torch.tensor(3)), (ids([[3, 4]]), torch.tensor(1))]
    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by a break"} <= exits and exits & {"left at its trip bound", "left by its test"}, exits
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_reversed_range_over_a_dynamic_length_counts_down():
    """``for j in reversed(range(t))`` fixed ``t`` to the example's value (reversed asks the
    range's length); it is a while_loop counter counting down."""
    model = m.ReversedRangeScan()
    exported = export_to_ort(model, (torch.rand(5, 3),), dynamic_shapes={"x": {0: "t"}})
    inputs = [(torch.rand(t, 3, generator=torch.Generator().manual_seed(t)),) for t in (0, 1, 2, 7)]
    assert {0, 1, 2, 7} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_an_equal_method_stop_and_a_counter_written_into_torch_tensor():
    model = m.EqualMethodStop()
    chain = torch.tensor([[1.0, 0.9, 0.0], [0.9, 1.0, 0.9], [0.0, 0.9, 1.0]])
    exported = export_to_ort(model, (chain,), dynamic_shapes={"iou": {0: "n", 1: "n"}})
    inputs = [(chain,), (torch.eye(4),), (torch.ones(1, 1),), (torch.full((3, 3), 0.9),)]
    assert {"left by a break"} <= set().union(*loop_exits(model, inputs).values())
    assert_matches_eager(model, exported, inputs)


def test_a_list_of_numbers_appended_per_step_is_a_row_and_equals_eager():
    """The BiLSTM-CRF tutorial's backpointers: it reached the user as ``torch.export failed:
    TypeError: full(): argument 'fill_value'``, then was refused; each step's list of arg-maxes is
    now a row of the grown list."""
    model = m.AppendsAListPerStep()
    result = fxport.convert(model, (torch.rand(4, 3), torch.rand(3, 3)),
                            dynamic_shapes={"feats": {0: "t"}, "transitions": None})
    assert result.verified and result.op_counts().get("Loop")
    from tests.conftest import assert_matches_eager as equals_eager

    for steps in (1, 2, 7):
        equals_eager(model, result.model, torch.rand(steps, 3), torch.rand(3, 3))


def test_a_list_of_vectors_appended_per_step_is_refused_in_one_line_with_what_to_do():
    model = m.AppendsAListOfVectorsPerStep()
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(model, (torch.rand(4, 3), torch.rand(3, 3)), dynamic_shapes={"feats": {0: "t"}, "transitions": None},
                       verify=False)
    message = str(info.value)
    assert "\n" not in message and "torch.export failed" not in message
    assert "list 'backpointers' grown in a data-dependent loop gets a list" in message and "torch.stack" in message
    assert "loop_class_models.py:" in message


def test_the_legacy_tensor_constructor_over_a_traced_counter():
    """``torch.Tensor([to, d[to]])`` read the traced values (an internal "data is not allocated")."""
    model = m.LegacyTensorOfCounter()
    exported = export_to_ort(model, (torch.rand(4),), dynamic_shapes={"d": {0: "n"}})
    inputs = [(torch.rand(n, generator=torch.Generator().manual_seed(n)),) for n in (0, 1, 2, 6)]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
