"""Dynamic dimensions are never silently specialised (issue 14).

Every pattern is checked at sizes 0 (where eager runs), 1, 2 and N: by fxport's own
verification (its generated ``size[...]`` sets) and independently here with ONNX Runtime.
"""

from __future__ import annotations

import inspect
import json
import os
import re

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim
from typer.testing import CliRunner

import fxport
from fxport.cli import app
from tests.models import dynamic_sizes as models

MODELS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "dynamic_sizes.py")
ANSI = re.compile(r"\x1b\[")


def run_onnx(model, inputs):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return session.run(None, feed)


def assert_equals_eager_at(module, onnx_model, make_inputs, sizes):
    """ONNX Runtime equals eager at every size where eager runs; returns the sizes compared."""
    compared = []
    for size in sizes:
        inputs = make_inputs(size)
        try:
            with torch.no_grad():
                expected = module(*inputs)
        except RuntimeError:
            continue
        expected = expected if isinstance(expected, (tuple, list)) else (expected,)
        actual = run_onnx(onnx_model, inputs)
        for e, a in zip(expected, actual):
            assert e.shape == a.shape, (size, e.shape, a.shape)
            np.testing.assert_allclose(a, e.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"size {size}")
        compared.append(size)
    return compared


# name, module factory, inputs at size n, dynamic shapes, the rewrite expected
CASES = {
    "if x.shape[0] > 1 (where)": (models.Center, lambda n: (torch.randn(n, 3),), {"x": {0: "batch"}}, "if-to-where"),
    "if x.size(1) == 1 (where)": (models.SingleColumn, lambda n: (torch.randn(2, n),), {"x": {1: "cols"}}, "if-to-where"),
    "if x.shape[0] > 1 (cond)": (models.MixBatch, lambda n: (torch.randn(n, 4),), {"x": {0: "batch"}}, "if-to-cond"),
    "while n > 1 on a size": (models.Halving, lambda n: (torch.randn(n, 2),), {"x": {0: "batch"}}, "while-to-while_loop"),
    "for row in x": (models.RowSum, lambda n: (torch.randn(n, 3),), {"x": {0: "rows"}}, "for-to-while_loop"),
    "functorch map": (models.MapRows, lambda n: (torch.randn(n, 3), torch.tensor(1.5)), {"x": {0: "rows"}}, None),
}


@pytest.mark.parametrize("example_size", [1, 4])
@pytest.mark.parametrize("case", list(CASES))
def test_size_dependent_model_equals_eager_at_sizes_0_1_2_and_n(case, example_size):
    factory, make_inputs, dynamic, rule = CASES[case]
    module = factory().eval()
    result = fxport.convert(module, make_inputs(example_size), dynamic_shapes=dynamic)
    assert result.verified
    if rule is not None:
        assert rule in {r.rule for r in result.rewrites}, [r.rule for r in result.rewrites]
    name = next(iter(next(iter(dynamic.values())).values()))
    verified_sizes = {row.input_shapes[0][list(next(iter(dynamic.values())))[0]]
                      for row in result.verification if not row.note}
    assert {1, 2} <= verified_sizes, (name, [row.name for row in result.verification])
    assert not any("outside exported" in row.name for row in result.verification), "the range was narrowed"
    compared = assert_equals_eager_at(module, result.model, make_inputs, [0, 1, 2, 3, 7])
    assert {1, 2, 3, 7} <= set(compared)
    ranges = json.loads(dict((p.key, p.value) for p in result.model.metadata_props)["fxport.dynamic_ranges"])
    assert ranges[name]["valid"] == [0, None] or ranges[name]["valid"][0] <= 1


def test_map_lowers_to_one_scan():
    module = models.MapRows().eval()
    result = fxport.convert(module, (torch.randn(4, 3), torch.tensor(2.0)), dynamic_shapes={"x": {0: "rows"}})
    assert result.op_counts().get("Scan") == 1 and "Loop" not in result.op_counts()
    zero = next(row for row in result.verification if row.name.startswith("size[rows=0]"))
    # map refuses an empty leading dimension in eager: 0 rows are not the model's range
    assert zero.note.startswith("skipped: excluded, rows narrowed to 1..inf at rows=0: eager rejects"), zero
    assert any("'rows' is narrowed to 1..inf" in w and "eager rejects" in w for w in result.warnings), result.warnings


class FlattensRows(torch.nn.Module):
    """``x.reshape(x.shape[0], -1)``: eager raises at 0 rows ("cannot reshape tensor of 0 elements")."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1).sum(1)


def test_a_made_up_size_eager_rejects_narrows_the_range_with_a_warning_and_the_metadata():
    result = fxport.convert(FlattensRows().eval(), (torch.randn(3, 2, 2),), dynamic_shapes={"x": {0: "b"}})
    assert result.verified
    assert any("'b' is narrowed to 1..inf" in w and "b=0" in w and "eager rejects" in w for w in result.warnings), \
        result.warnings
    ranges = json.loads(dict((p.key, p.value) for p in result.model.metadata_props)["fxport.dynamic_ranges"])
    assert ranges["b"]["valid"][0] == 1, ranges


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_from_the_cli_a_made_up_size_eager_rejects_is_one_warning(tmp_path):
    from tests.conftest import run_cli

    out = tmp_path / "flat.onnx"
    result = run_cli("convert", "tests/test_dynamic_sizes.py:FlattensRows", "-i", "x=3x2x2", "--dynamic", "x:0=b",
                     "-o", str(out))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("warning:")]
    assert any("'b' is narrowed to 1..inf" in w and "eager rejects" in w for w in warnings), warnings


def test_unconverted_size_branch_is_an_error_at_size_one_naming_the_line(tmp_path):
    """The headline bug without control-flow conversion: never a silently wrong file."""
    out = tmp_path / "center.onnx"
    with pytest.raises(fxport.VerificationError) as info:
        fxport.convert(models.Center().eval(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}},
                       control_flow=False, output=str(out))
    message = str(info.value)
    assert "size[batch=1] outside exported 2..inf" in message and "dynamic_sizes.py:12" in message, message
    assert "\n" not in message and not out.exists()
    failed = [row.name for row in info.value.report if not row.passed]
    assert failed == ["size[batch=1] outside exported 2..inf"], failed


def test_narrowed_range_is_a_one_line_warning_with_the_line_and_is_in_the_metadata():
    """The capture's note names the line that narrowed the range (the program's metadata)."""
    from fxport.capture.program import capture
    from fxport.eager.inputs import InputSet

    notes = []
    capture(models.SameEitherWay().eval(), InputSet((torch.randn(4, 3),)), {"x": {0: "batch"}}, notes=notes)
    (warning,) = [w for w in notes if "'batch'" in w]
    assert "dynamic_sizes.py:81" in warning and "2..inf" in warning and "\n" not in warning, warning


def test_a_range_narrowed_to_2_whose_sizes_0_and_1_verify_is_the_declared_one():
    """Issue 25 item 13: exported for 2..inf, the file passes at sizes 0 and 1 (the only sizes of
    the declared 0..inf below the bound): no narrowing warning, the metadata records 0..inf."""
    result = fxport.convert(models.SameEitherWay().eval(), (torch.randn(4, 3),),
                            dynamic_shapes={"x": {0: "batch"}}, control_flow=False)
    assert result.verified
    assert not [w for w in result.warnings if "'batch'" in w], result.warnings
    ranges = json.loads(dict((p.key, p.value) for p in result.model.metadata_props)["fxport.dynamic_ranges"])
    assert ranges["batch"] == {"valid": [0, None], "declared": [0, None], "narrowed": None}
    outside = {row.input_shapes[0][0] for row in result.verification if "outside exported" in row.name and row.passed}
    assert outside == {0, 1}


def test_batch_one_example_keeps_the_dimension_symbolic():
    module = models.Conv().eval()
    result = fxport.convert(module, (torch.randn(1, 3, 8, 8),), dynamic_shapes={"x": {0: "batch"}})
    assert result.verified and not [w for w in result.warnings if "dynamic dimension" in w], result.warnings
    names = [row.name for row in result.verification]
    assert {"larger[batch=3]", "size[batch=2]", "size[batch=0]"} <= set(names), names
    assert result.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert set(assert_equals_eager_at(module, result.model, lambda n: (torch.randn(n, 3, 8, 8),), [0, 1, 2, 5])) == {0, 1, 2, 5}


def test_sequence_one_example_of_a_model_torch_export_specialises_is_captured_from_a_copy():
    """nn.MultiheadAttention fails the size-oblivious capture; the classic capture from a
    sequence-2 copy works, the range says so, and the user's own sequence 1 is verified."""
    module = models.SelfAttention().eval()
    result = fxport.convert(module, (torch.randn(2, 1, 8),), dynamic_shapes={"x": {1: "seq"}})
    assert result.verified
    # exported for 2..inf (torch.export's 0/1 specialisation), verified at 0 and at the user's 1
    assert not [w for w in result.warnings if "'seq'" in w], result.warnings
    assert {row.input_shapes[0][1] for row in result.verification} >= {0, 1}
    assert result.verification[0].name == "example" and result.verification[0].input_shapes == [[2, 1, 8]]
    compared = assert_equals_eager_at(module, result.model, lambda n: (torch.randn(2, n, 8),), [1, 2, 5])
    assert compared == [1, 2, 5]


def test_declared_range_is_respected_and_its_ends_verified():
    result = fxport.convert(models.Center().eval(), (torch.randn(4, 3),),
                            dynamic_shapes={"x": {0: Dim("batch", min=2, max=9)}})
    sizes = sorted(row.input_shapes[0][0] for row in result.verification)
    assert result.verified and sizes[0] == 2 and sizes[-1] == 9, sizes
    assert "size[batch=9] max" in [row.name for row in result.verification]


@pytest.mark.parametrize("args, fragment", [
    (["-i", "x=4x3", "--dynamic", "x:5=batch"], "dynamic axis 5 of 'x' does not exist"),
    (["-i", "x=4x3", "--dynamic", "x:-3=batch"], "dynamic axis -3 of 'x' does not exist"),
    (["-i", "x=4x3", "--dynamic", "x:0="], "bad axis"),
    (["-i", "x=4x3", "--dynamic", "x:a=batch"], "bad axis"),
    (["-i", "x=4x3", "--dynamic", "x"], "is not NAME:AXIS=DIMNAME"),
    (["-i", "x=4x3", "--dynamic", "y:0=batch"], "forward does not take"),
    (["-i", "x=4xa"], "bad shape"),
    (["-i", "x=-4x3"], "bad shape"),
    (["-i", "x4x3"], "is not NAME=SHAPE"),
    (["-i", "x=100000x100000x100000"], "elements, more than an example input needs"),
    (["-i", "x=4x3", "--dynamic", "x:0=batch,0=rows"], "axis 0 is given twice"),
])
def test_malformed_or_out_of_range_specs_are_one_line_usage_errors(args, fragment):
    result = CliRunner().invoke(app, ["convert", f"{MODELS_FILE}:Center", *args])
    assert result.exit_code == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr and not ANSI.search(result.stderr) and " at 0x" not in result.stderr


def test_cli_headline_converts_correctly_and_verifies_batch_one(tmp_path):
    out = tmp_path / "center.onnx"
    result = CliRunner().invoke(app, ["convert", f"{MODELS_FILE}:Center", "-i", "x=4x3",
                                      "--dynamic", "x:0=batch", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert {"size[batch=1]", "size[batch=0]"} <= {row["name"] for row in data["verification"]}
    # the mean over the dynamic batch keeps torch's NaN on an empty batch (rewrites/empty_reductions.py)
    assert [r["rule"] for r in data["rewrites"]] == ["if-to-where", "aten::mean.dim"]
    import onnx

    model = onnx.load(str(out))
    x = torch.randn(1, 3)
    np.testing.assert_allclose(run_onnx(model, (x,))[0], (x * 2).numpy(), rtol=1e-6)


def test_dimension_pinned_by_the_model_is_a_clean_one_line_error():
    with pytest.raises(fxport.CaptureError) as info:
        fxport.convert(models.Pinned(), (torch.randn(2, 3, 2),), dynamic_shapes={"x": {0: "batch"}})
    message = str(info.value)
    assert "specialises dynamic dimension 'batch' to 2" in message, message
    assert "TORCH_LOGS" not in message and "\n" not in message
    assert "tests/models/dynamic_sizes.py:" in message, "the line of the reshape that pins it"


def test_an_op_without_translation_is_named_without_a_memory_address():
    """With the map rule switched off, the exporter's refusal names MapImpl, not its address."""
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(models.MapRows().eval(), (torch.randn(3, 3), torch.tensor(1.0)),
                       disable_rules=["map-to-scan"], verify=False)
    message = str(info.value)
    assert "MapImpl" in message and " at 0x" not in message and not ANSI.search(message), message


def test_size_condition_before_attention_converts_where_torch_leaves_the_guard_to_itself(tmp_path):
    """nn.MultiheadAttention makes the size-oblivious capture hit a guard torch cannot word a fix
    for; declared as torch.onnx.export declares dimensions (Dim.DYNAMIC), the capture keeps
    ``if x.shape[1] > 1`` symbolic: a where, right at sequence 1 and 0 as at N."""
    out = tmp_path / "m.onnx"
    model = models.ScaledAttention().eval()
    result = fxport.convert(model, (torch.randn(2, 4, 8),), dynamic_shapes={"x": {1: "seq"}}, output=str(out))
    assert "if-to-where" in [r.rule for r in result.rewrites]
    assert {"size[seq=1]", "size[seq=0]"} <= {row.name for row in result.verification}
    for seq in (1, 3, 7):
        x = torch.randn(2, seq, 8)
        np.testing.assert_allclose(run_onnx(result.model, (x,))[0], model(x).detach().numpy(), atol=1e-5)


class _PairedFrames(torch.nn.Module):
    def forward(self, first, second):
        return first.unflatten(0, (-1, 8)).sum(1) + second.unflatten(0, (-1, 8)).mean(1)


def test_derived_dimensions_keep_their_grid_and_vary_together_in_verification():
    """Two inputs declared ``8 * Dim("h8")``: every verified size is a multiple of 8 and both
    inputs change together (the model itself needs multiples of 8: eager would skip others)."""
    h8 = torch.export.Dim("h8", min=2, max=40)
    result = fxport.convert(_PairedFrames(), (torch.randn(64), torch.randn(64)),
                            dynamic_shapes={"first": {0: 8 * h8}, "second": {0: 8 * h8}})
    sizes = [tuple(shape[0] for shape in row.input_shapes) for row in result.verification]
    assert not [row.name for row in result.verification if row.note.startswith("skipped")]
    assert all(a == b and a % 8 == 0 for a, b in sizes), sizes
    assert {16, 96, 320} <= {a for a, _ in sizes}, sizes    # min, larger (64 → 96), max
    assert any("8*h8=" in row.name for row in result.verification)


class _Patches(torch.nn.Module):
    """vit in small: 4x4 patches embedded, attention over them (its fast path is batch 1's)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 8, 4, stride=4)
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        return self.attention(tokens, tokens, tokens, need_weights=False)[0]


def test_the_last_capture_takes_torchs_ranges_in_one_export(monkeypatch):
    """Batch 1 specialises the size-oblivious capture; the capture from batch 2 declares
    Dim.DYNAMIC hints, so torch narrows height and width to ≥ 4 itself: two exports where
    adopting the suggested fixes took three, and the same ranges and note."""
    import fxport.capture.program as capture_module

    exports = []
    original = capture_module._export
    monkeypatch.setattr(capture_module, "_export",
                        lambda *args, **kwargs: exports.append(args[2]) or original(*args, **kwargs))
    model = _Patches().eval()
    result = fxport.convert(model, (torch.randn(1, 3, 16, 16),),
                            dynamic_shapes=({0: "batch", 2: "height", 3: "width"},))
    assert len(exports) == 2, exports
    assert any("height', 'width' are narrowed by the model at" in w and "4..inf" in w for w in result.warnings)
    names = {row.name for row in result.verification}
    assert {"size[height=3] outside exported 4..inf", "size[height=4] min", "size[batch=2]"} <= names
    for shape in [(2, 3, 4, 8), (3, 3, 20, 12)]:
        x = torch.randn(*shape)
        np.testing.assert_allclose(run_onnx(result.model, (x,))[0], model(x).detach().numpy(), atol=1e-5)


class _PinnedPatches(_Patches):
    def forward(self, x):
        return super().forward(x.reshape(x.shape[0], 3, 16, 16))  # pins height and width to 16


_PINNING_LINE = inspect.getsourcelines(_PinnedPatches.forward)[1] + 1


def test_a_dimension_the_hints_specialise_is_refused_as_the_named_dims_word_it():
    """The hinted capture fails where the model pins a size; the named Dims' capture then words
    the error as before (the dimension and its value), not torch's DYNAMIC message."""
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(_PinnedPatches().eval(), (torch.randn(1, 3, 16, 16),),
                       dynamic_shapes=({0: "batch", 2: "height", 3: "width"},))
    message = str(info.value)
    assert "specialises dynamic dimension 'height' to 16, 'width' to 16" in message, message
    assert "DYNAMIC" not in message and "\n" not in message, message
    assert info.value.where is not None and info.value.where.lineno == _PINNING_LINE, message


class _TransposedProjection(torch.nn.Module):
    """nn.MultiheadAttention's input projection in small: a linear layer over a transposed
    ``(seq, batch, dim)`` view, which torch folds into one matrix product only at batch 1."""

    def __init__(self):
        super().__init__()
        self.projection = torch.nn.Linear(4, 4)
        self.after = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.after(self.projection(x.transpose(0, 1)))


def test_a_size_one_pin_stops_the_size_oblivious_capture_at_its_guard(monkeypatch):
    """The size-oblivious capture stops at the guard ``batch == 1`` (the layer after it is never
    traced: one trace less); the capture from batch 2 converts the model for every batch, and
    the user's batch 1 is verified."""
    import fxport.capture.program as capture_module
    from fxport.capture.failures import traced_location_from_exception

    model = _TransposedProjection().eval()
    traced_after, failures = [], []
    model.after.register_forward_pre_hook(lambda *args: traced_after.append(1))
    original = capture_module._export

    def export(module, inputs, spec, oblivious=False):
        calls_before = len(traced_after)
        try:
            return original(module, inputs, spec, oblivious)
        except Exception as exc:
            failures.append((oblivious, type(exc).__name__, str(exc), len(traced_after) - calls_before,
                             traced_location_from_exception(exc)))
            raise

    monkeypatch.setattr(capture_module, "_export", export)
    result = fxport.convert(model, (torch.randn(1, 5, 4),), dynamic_shapes=({0: "batch"},))
    assert [(oblivious, kind, traced) for oblivious, kind, _, traced, _ in failures] == [(True, "SizeOneGuard", 0)]
    assert "generated guard L['x'].size()[0] == 1." in failures[0][2], failures
    assert failures[0][4] is not None and failures[0][4].filename == __file__, failures  # the line that pins it
    assert result.verified and {row.input_shapes[0][0] for row in result.verification} >= {0, 1, 2}
    compared = assert_equals_eager_at(model, result.model, lambda n: (torch.randn(n, 5, 4),), [1, 2, 5])
    assert compared == [1, 2, 5]


def test_a_size_one_guard_under_a_dynamic_hint_is_left_to_torch():
    """Only named Dims stop at the guard: ``Dim.DYNAMIC`` lets torch specialise where it must."""
    from fxport.capture.program import _export
    from fxport.eager.inputs import InputSet
    from fxport.capture.size_one_stop import SizeOneGuard

    example = InputSet((torch.randn(1, 5, 4),))
    with pytest.raises(SizeOneGuard):
        _export(_TransposedProjection().eval(), example, ({0: Dim("batch")},), oblivious=True)
    program = _export(_TransposedProjection().eval(), example, ({0: Dim.DYNAMIC},), oblivious=True)
    assert program.graph_module is not None


class _ViewOrCopy(_TransposedProjection):
    """A view where the layout allows it, a copy where ``view`` raises: its ``except`` must not
    catch the capture's stop (torch keeps the guard and fails the capture at its end)."""

    def forward(self, x):
        try:
            rows = x.transpose(0, 1).view(-1, 4)
        except RuntimeError:
            rows = x.flatten(0, 1) * 2  # another path than batch 1's
        return self.after(rows)


def test_the_models_own_except_does_not_catch_the_stop():
    from fxport.capture.program import _export
    from fxport.eager.inputs import InputSet
    from fxport.capture.size_one_stop import SizeOneGuard

    with pytest.raises(SizeOneGuard):
        _export(_ViewOrCopy().eval(), InputSet((torch.randn(1, 5, 4),)), ({0: Dim("batch")},), oblivious=True)


_WINDOWS_BRANCH = inspect.getsourcelines(models.Windows.forward)[1] + 2


def test_a_guard_a_dynamic_hint_leaves_unchecked_refuses_the_capture_at_the_models_line():
    """Under ``Dim.DYNAMIC`` torch keeps the window branch's guard (rows ≥ 15) without checking it
    and reports rows 2..inf: the capture stage refuses it in one line, with the range that holds;
    declared with that range, it captures."""
    from fxport.capture.program import capture
    from fxport.eager.inputs import InputSet

    example = InputSet((torch.randn(2, 30, 4),))
    for spec in (({1: Dim.DYNAMIC},), ({1: Dim("rows")},)):
        with pytest.raises(fxport.CaptureError) as info:
            capture(models.Windows(), example, spec)
        message = str(info.value)
        assert "only for" in message and "15..inf" in message and "=14" in message and "min=15" in message, message
        assert "\n" not in message
        where = info.value.where
        assert where is not None and where.filename == MODELS_FILE and where.lineno == _WINDOWS_BRANCH, where
    program = capture(models.Windows(), example, ({1: Dim("rows", min=15)},))
    assert "aten.roll.default" in {str(node.target) for node in program.graph.nodes}


def test_the_same_branch_in_the_users_code_converts_for_every_size():
    """The user's own size condition becomes a where (control-flow conversion): no guard is
    left for the check above, and the file takes each path at its sizes, 0 rows included."""
    model = models.Windows()
    result = fxport.convert(model, (torch.randn(2, 30, 4),), dynamic_shapes=({1: "rows"},))
    assert result.verified and "ifexp-to-where" in [r.rule for r in result.rewrites]
    assert "Where" in {node.op_type for node in result.model.graph.node}
    for rows in (0, 1, 7, 14, 15, 22, 30):  # 0: the roll rule (rewrites/empty_reductions.py)
        x = torch.randn(2, rows, 4)
        np.testing.assert_allclose(run_onnx(result.model, (x,))[0], model(x).numpy(), atol=1e-6)
