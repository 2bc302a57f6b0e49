"""In-place writes inside converted branches and loop bodies are carried state (issue 13).

Before: ``y.mul_(3)`` in a branch was dropped from the ONNX graph (a single Identity) while
verification passed on inputs that never took the branch. Every case here is differential:
eager vs ONNX Runtime on inputs that take every branch and trip counts 0, 1, 2, N.
"""

import inspect

import pytest
import torch

import fxport
from tests.controlflow import mutation_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

BOTH_SIGNS = [(torch.rand(4, 3) + 0.6,), (-torch.rand(4, 3) - 0.6,), (torch.randn(1, 3) + 3,), (torch.randn(5, 3) - 3,)]


@pytest.mark.parametrize("make", [m.ScaleInPlace, m.AccumulateInto, m.SubscriptWrites, m.FunctionFormInPlace,
                                  m.IndexedUpdates])
def test_in_place_write_in_a_branch_is_carried(make):
    model = make()
    inputs = BOTH_SIGNS
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)},))
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1
    assert set(exported.ops) != {"Identity"}, "the write must not be dropped"
    assert_matches_eager(model, exported, inputs)


def test_write_at_loop_index_in_a_data_dependent_loop():
    model = m.WriteAtLoopIndex()
    x = torch.randn(5, 3)
    inputs = [(x, torch.tensor(n)) for n in (0, 1, 2, 5)]
    assert trip_counts(model, inputs) and {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (x, torch.tensor(3)))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_accumulating_in_place_in_a_while_loop():
    model = m.AccumulateInLoop()
    inputs = [(-torch.rand(6, 4),), (torch.tensor([[10.0] * 4] + [[-1.0] * 4] * 5),),
              (torch.tensor([[10.0] * 4] * 2 + [[-1.0] * 4] * 4),), (torch.rand(6, 4),)]
    assert {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (torch.rand(6, 4),))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_end_to_end_the_write_in_the_untaken_branch_is_verified_and_right():
    """fxport.convert from an example that never takes the branch: converted, searched, right."""
    example = (torch.rand(4, 3) - 5,)
    result = fxport.convert(m.ScaleInPlace(), example)
    assert any(row.name.startswith("search: ") and row.passed for row in result.verification)
    from tests.conftest import run_onnx

    x = torch.rand(4, 3) + 1
    torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), x * 3)


# --- buffers, attributes, dict/list entries, aliases and the caller's inputs (issue 13) ------

import copy

from torch.export.graph_signature import OutputKind

from fxport.verify.compare import Acceptance, compare
from fxport.errors import ControlFlowError
from fxport.engine.pipeline import run
from tests.controlflow._util import Exported, line_in_source, run_ort

BATCH = torch.export.Dim("b", min=1, max=64)


def export_keeping_program(model, args, dynamic_shapes=None):
    """export_to_ort that also returns the ExportedProgram (its mutation outputs)."""
    import onnxruntime as ort
    from fxport.report.result import count_ops

    job = run(model, args, dynamic_shapes=dynamic_shapes, until="lower", verify=False)
    session = ort.InferenceSession(job.onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(inspect.signature(model.forward).parameters)[: len(args)]
    return Exported(session, job.onnx_model, list(job.rewrites), count_ops(job.onnx_model.graph), names), job.program


def mutations(program) -> dict[str, set]:
    """``{"BUFFER": {"running"}, "USER_INPUT": {"state"}}``: what the program writes back into
    (torch 2.13 keeps a mutation as ``copy_`` into the placeholder, older versions as an output)."""
    kinds = {spec.arg.name: (spec.kind.name, spec.target or spec.arg.name) for spec in program.graph_signature.input_specs}
    found: dict[str, set] = {}
    for node in program.graph.nodes:
        if node.target is torch.ops.aten.copy_.default and node.args[0].op == "placeholder":
            kind, target = kinds[node.args[0].name]
            found.setdefault(kind, set()).add(target)
    for spec in program.graph_signature.output_specs:
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            found.setdefault(spec.kind.name.replace("_MUTATION", ""), set()).add(spec.target)
    return found


def assert_matches_fresh_eager(model, exported, inputs, atol=1e-5, rtol=1e-4):
    """Eager on a fresh deep copy of ``model`` per input set (its buffers change) vs ORT."""
    for args in inputs:
        fresh = copy.deepcopy(model)
        with torch.no_grad():
            expected = fresh(*[a.clone() for a in args])
        result = compare(expected, run_ort(exported, args), Acceptance(atol=atol, rtol=rtol))
        assert result.passed, f"{result.failure()} for inputs {[tuple(a.shape) for a in args]}"


def state_of(model) -> dict:
    return {k: v.clone() for k, v in list(model.state_dict().items()) + list(vars(model).items())
            if isinstance(v, torch.Tensor)}


def assert_state_equal(before: dict, model) -> None:
    after = state_of(model)
    assert before.keys() == after.keys()
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, msg=f"the module's {key} changed")


IF_STATE_MODELS = {
    m.BufferInPlace: {"BUFFER": {"running"}},
    m.BufferItemWrite: {"BUFFER": {"buf"}},
    m.BufferCounter: {"BUFFER": {"count"}},
    m.TensorAttributeCounter: {},  # a plain tensor attribute is a constant of the program
    m.AttributeAssigned: {"BUFFER": {"h"}},
    m.DictEntries: {},
    m.ListElementInPlace: {},
    m.WriteThroughAnAlias: {},
    m.WriteThroughAView: {},
    m.IndexChangedInBranch: {"BUFFER": {"bufs"}},
    m.SubmodulesWritingBuffers: {"BUFFER": {"blocks.0.seen", "blocks.1.seen", "inner.seen"}},
}


@pytest.mark.parametrize("make", list(IF_STATE_MODELS), ids=lambda c: c.__name__)
def test_state_outside_the_branch_is_carried_and_written_back(make):
    model = make()
    before = state_of(model)
    assert_every_branch_taken(copy.deepcopy(model), BOTH_SIGNS)
    exported, program = export_keeping_program(model, BOTH_SIGNS[0], dynamic_shapes=({0: BATCH},))
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1
    assert mutations(program) == IF_STATE_MODELS[make]
    assert_state_equal(before, model)  # converting leaves the module as it was
    assert_matches_fresh_eager(model, exported, BOTH_SIGNS)


def test_if_to_where_is_taken_only_for_branches_working_on_their_own_copies():
    """The cheap branches become a Where; each side wrote its own copy (a write into the real
    buffer on the untaken side would show on every input)."""
    exported, _ = export_keeping_program(m.BufferInPlace(), BOTH_SIGNS[0], dynamic_shapes=({0: BATCH},))
    assert [r.rule for r in exported.records if r.tier == "control-flow"] == ["if-to-where"]
    negative = (-torch.rand(4, 3) - 0.6,)
    torch.testing.assert_close(torch.from_numpy(run_ort(exported, negative)[0]), negative[0])


@pytest.mark.parametrize("make", [m.MutatesItsInput, m.MutatesAndReadsItsInput], ids=lambda c: c.__name__)
def test_a_write_into_the_callers_input_is_an_input_mutation(make):
    inputs = [(x, torch.rand(3)) for (x,) in BOTH_SIGNS]
    model = make()
    assert_every_branch_taken(model, [(x, s.clone()) for x, s in inputs])
    exported, program = export_keeping_program(model, inputs[0], dynamic_shapes=({0: BATCH}, None))
    assert mutations(program) == {"USER_INPUT": {"state"}}  # not dropped: the caller's tensor changes
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= (make is m.MutatesAndReadsItsInput)
    assert len(exported.session.get_outputs()) == 1  # the ONNX file returns what forward returns
    assert_matches_fresh_eager(model, exported, inputs)


def test_the_caller_sees_the_write_while_converted_code_runs_eagerly():
    from fxport.controlflow import convert_control_flow

    model, state = m.MutatesItsInput(), torch.zeros(3)
    x = torch.ones(2, 3)
    with convert_control_flow(model):
        model(x, state)
    torch.testing.assert_close(state, torch.full((3,), 2.0))


LOOP_STATE_MODELS = {
    m.BufferAccumulatedInLoop: (5, {"BUFFER": {"acc"}}),
    m.AttributeAssignedInLoop: (5, {"BUFFER": {"h"}}),
    m.BufferRowsWrittenInLoop: (6, {"BUFFER": {"buf"}}),
    m.BufferWrittenUnderAnIfInALoop: (5, {"BUFFER": {"acc"}}),
    m.BufferRowsUpdatedInPlaceInLoop: (6, {"BUFFER": {"buf"}}),
    m.BufferCountInLoopTest: (7, {"BUFFER": {"count"}}),
}


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("make", list(LOOP_STATE_MODELS), ids=lambda c: c.__name__)
def test_state_written_in_a_data_dependent_loop_is_carried(make):
    rows, expected_mutations = LOOP_STATE_MODELS[make]
    x = torch.randn(rows, 3)
    inputs = [(x, torch.tensor(n)) for n in (0, 1, 2, rows)]
    model = make()
    before = state_of(model)
    seen = set().union(*(next(iter(trip_counts(copy.deepcopy(model), [args]).values())) for args in inputs))
    assert {0, 1, 2, rows} <= seen  # each from the module's initial state, as the ONNX file runs
    exported, program = export_keeping_program(model, (x, torch.tensor(3)))
    assert exported.ops.get("Loop") == 1
    assert mutations(program) == expected_mutations
    assert_state_equal(before, model)
    assert_matches_fresh_eager(model, exported, inputs)


def test_a_python_float_attribute_changed_under_a_tensor_condition_is_refused():
    """(A Python int attribute converts since round thirteen: test_attribute_state_round13.py.)"""
    line = line_in_source(m.PythonFloatAttributeScale.forward, "if x.sum() > 0")
    with pytest.raises(ControlFlowError, match=rf"self.scale is a Python float changed under a tensor condition .*mutation_models.py:{line}"):
        export_to_ort(m.PythonFloatAttributeScale(), BOTH_SIGNS[0])


def test_end_to_end_a_buffer_written_in_the_untaken_branch_is_verified():
    model = m.BufferInPlace()
    result = fxport.convert(model, (-torch.rand(4, 3) - 1,))
    assert result.verified and any(row.name.startswith("search: ") and row.passed for row in result.verification)
    torch.testing.assert_close(model.running, torch.ones(3))


def test_two_views_of_one_tensor_written_on_either_side_are_refused():
    line = line_in_source(m.WritesThroughTwoViews.forward, "if y.mean() > 0")
    with pytest.raises(ControlFlowError, match=rf"row and y share memory .*mutation_models.py:{line}; write through one"):
        export_to_ort(m.WritesThroughTwoViews(), BOTH_SIGNS[0])


@pytest.mark.parametrize("make, message", [
    (m.DictReadWholeInBranch, r"side effect the converter cannot carry \(in-place write to d\['k'\] at line \d+\)"),
    (m.DictWrittenAtComputedKey, r"if on a tensor condition writes into the dict 'd'"),
], ids=["entry-and-whole-dict", "computed-key"])
def test_containers_the_branch_cannot_carry_are_refused(make, message):
    line = line_in_source(make.forward, "if x.sum() > 0")
    with pytest.raises(ControlFlowError, match=rf"{message} at .*mutation_models.py:{line};"):
        export_to_ort(make(), BOTH_SIGNS[0])


def test_a_method_reading_the_assigned_attribute_sees_the_new_value_on_either_side():
    """Python conditions run as written (the method sees the new value); under a tensor
    condition the method runs on an overlay of the carried attribute (method_state.py), so it
    reads the value the branch assigned there too."""
    from fxport.controlflow import convert_control_flow

    model, x = m.AttributeReadByAMethod(), -torch.ones(2, 3)
    with convert_control_flow(model), torch.no_grad():
        converted = model(x)
    torch.testing.assert_close(converted, m.AttributeReadByAMethod()(x))
    exported = export_to_ort(m.AttributeReadByAMethod(), (x,))
    assert_matches_fresh_eager(m.AttributeReadByAMethod(), exported, [(x,), (-x,), (torch.rand(2, 3) - 0.2,)])
    assert exported.ops.get("If") or exported.ops.get("Where")


@pytest.mark.slow
def test_from_the_cli_a_buffer_model_says_verified_and_a_python_float_is_refused(tmp_path):
    import onnx

    from tests.conftest import run_cli, run_onnx

    models = m.__file__
    out = tmp_path / "buffer.onnx"
    done = run_cli("convert", f"{models}:BufferInPlace", "-i", "x=4x3", "--dynamic", "x:0=batch", "-o", str(out))
    assert done.returncode == 0 and "verified; wrote" in done.stdout, done.stdout + done.stderr
    x = torch.rand(5, 3) + 0.5  # takes the branch that writes the buffer
    torch.testing.assert_close(torch.from_numpy(run_onnx(onnx.load(str(out)), x)[0]), m.BufferInPlace()(x))
    refused = run_cli("convert", f"{models}:PythonFloatAttributeScale", "-i", "x=4x3", "-o", str(tmp_path / "no.onnx"))
    line = line_in_source(m.PythonFloatAttributeScale.forward, "if x.sum() > 0")
    assert refused.returncode != 0 and not (tmp_path / "no.onnx").exists()
    assert "self.scale is a Python float changed under a tensor condition or in a data-dependent loop at " in refused.stderr + refused.stdout
    assert f"mutation_models.py:{line};" in refused.stderr + refused.stdout


def test_view_made_and_written_inside_a_loop_body_writes_its_base():
    """Found by the fuzzer: the view's base was not carried, and torch.export refused the body."""
    model = m.ViewWrittenInLoopBody()
    inputs = [(torch.randn(3, 4), torch.tensor(t)) for t in (0, 1, 2, 5)] + [(torch.randn(1, 4), torch.tensor(3))]
    assert {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (torch.randn(3, 4), torch.tensor(2)),
                             dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_view_written_in_a_branch_and_a_position_index_verified_at_batch_zero():
    """g[0] in a branch is not evaluated on the path that does not take it (an If, not a Where):
    at batch 0 the branch is not taken and ONNX Runtime must not index row 0."""
    model = m.ViewWrittenInBranch()
    inputs = BOTH_SIGNS + [(torch.zeros(0, 3),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: torch.export.Dim("b", min=0, max=64)},))
    assert exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)
    assert fxport.convert(model, inputs[0], dynamic_shapes={"x": {0: "batch"}}).verified


def test_write_through_a_view_made_in_the_branch_reaches_an_alias_of_its_base():
    """The base is copied back (not rebound), so ``alias = g`` sees the write."""
    model = m.ViewWriteSeenByAlias()
    inputs = BOTH_SIGNS
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)},))
    assert exported.ops.get("If") == 1  # an in-place write into a name made in the branch: not a where
    assert_matches_eager(model, exported, inputs)


def test_write_through_a_view_of_a_buffer_made_in_the_branch_updates_the_buffer():
    """g = self.buf; v = torch.narrow(g, ...); v.add_(1) under a tensor condition: each eager run
    starts from the buffer the file holds (a fresh module per input set)."""
    from tests.conftest import run_onnx

    result = fxport.convert(m.ViewWriteIntoBuffer(), BOTH_SIGNS[0], dynamic_shapes={"x": {0: "batch"}})
    assert result.verified
    for (x,) in BOTH_SIGNS:
        with torch.no_grad():
            expected = m.ViewWriteIntoBuffer()(x.clone())
        torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), expected)


def test_write_through_a_fresh_view_in_a_loop_reaches_a_view_made_before_it():
    model = m.ViewWriteInLoopSeenByEarlierView()
    inputs = [(torch.randn(3, 4), torch.tensor(t)) for t in (0, 1, 2, 5)]
    exported = export_to_ort(model, inputs[2], dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow
def test_buffer_write_on_the_untaken_side_of_a_where_never_indexes_past_the_buffer():
    """Trip count 9 returns early in eager; the where-lowered select also runs the buffer loop
    9 times, whose row index ONNX Runtime's ScatterND refused past row 5 (fuzz find)."""
    model = m.ReturnInLoopThenBufferWrite()
    high, low = torch.rand(3, 4) * 0.5 + 0.5, torch.rand(3, 4) * 0.1
    inputs = [(high, torch.tensor(n)) for n in (0, 1, 2, 9)] + [(low, torch.tensor(n)) for n in (0, 1, 2, 6)]
    inputs.append((torch.rand(1, 4) + 1.0, torch.tensor(9)))
    assert_every_branch_taken(model, inputs)
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (high, torch.tensor(3)), dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)}, None))
    assert exported.ops.get("If", 0) >= 1 and exported.ops.get("Loop", 0) >= 1
    assert_matches_eager(model, exported, inputs)
