"""if/elif/else → torch.where / torch.cond: eager vs ONNX Runtime on inputs taking every branch."""

import dataclasses
import inspect
import re
from typing import Callable

import pytest
import torch

from fxport.controlflow import convert_control_flow, converted_source
from fxport.errors import ControlFlowError
from tests.controlflow import if_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source

t, scaled, D = m.t, m.scaled, m.D


@dataclasses.dataclass
class Case:
    make: Callable[[], torch.nn.Module]
    example: tuple
    inputs: list
    expect: str  # "Where", "If" or "none" (no Where/If: plain Python)
    dynamic: object = None
    strategy: str = "auto"
    check_coverage: bool = True


def rows(*scales, n=3):
    return [(scaled(n, s),) for s in scales]


def sizes(*ns, scales=(1.0, -1.0)):
    return [(scaled(n, s),) for n in ns for s in scales]


BATCH = ({0: D},)
CASES = {
    "if_no_else": Case(m.IfNoElse, rows(1.0)[0], rows(1.0, -1.0) + sizes(1, 5), "Where", BATCH),
    "if_else": Case(m.IfElse, rows(1.0)[0], rows(1.0, 0.5, -1.0) + sizes(2, 7), "Where", BATCH),
    "elif_chain": Case(m.ElifChain, rows(1.0)[0], rows(10.0, 1.0, -1.0, -10.0), "Where", BATCH),
    "nested_if": Case(m.NestedIf, rows(1.0)[0], rows(10.0, 1.0, -1.0) + sizes(6), "If", BATCH),
    "several_variables": Case(m.SeveralVariables, rows(1.0)[0], rows(1.0, -1.0) + sizes(1, 4), "Where", BATCH),
    "early_return": Case(m.EarlyReturn, rows(1.0)[0], rows(1.0, -1.0) + sizes(2), "Where", BATCH),
    "several_returns": Case(m.SeveralReturns, rows(1.0)[0], rows(3.0, 1.0, -1.0) + sizes(5), "Where", BATCH),
    "and_predicate": Case(m.AndPredicate, rows(1.0)[0], rows(1.0, 10.0, -1.0), "Where", BATCH),
    "or_predicate": Case(m.OrPredicate, rows(1.0)[0], [(t([[0.6, 0.9]]),), (t([[-0.6, -0.9]]),), (t([[0.1, -0.9]]),)], "Where", ({0: D, 1: D},)),
    "not_predicate": Case(m.NotPredicate, rows(1.0)[0], rows(1.0, -1.0), "Where", BATCH),
    "if_expression": Case(m.IfExpression, rows(1.0)[0], rows(1.0, -1.0) + sizes(4), "Where", BATCH),
    "item_predicate": Case(m.ItemPredicate, rows(1.0)[0], rows(1.0, 0.01, -1.0), "Where", BATCH),
    "any_predicate": Case(m.AnyPredicate, rows(1.0)[0], rows(1.0, 5.0), "Where", BATCH),
    "all_predicate": Case(m.AllPredicate, rows(1.0)[0], rows(1.0, -1.0) + sizes(5), "Where", BATCH),
    "buffer_predicate": Case(m.BufferPredicate, rows(1.0)[0], rows(2.0, 0.2), "Where", BATCH),
    "parameter_predicate": Case(m.ParameterPredicate, rows(1.0)[0], rows(1.0, -1.0), "Where", BATCH),
    "dynamic_shape_predicate": Case(m.DynamicShapePredicate, rows(1.0)[0], sizes(1, 2, 3, 6), "Where", BATCH),
    "batch_size_choice": Case(m.BatchSizeChoice, (scaled(2, 1.0),), sizes(1, 3, 4, 9), "If", BATCH),
    "select_submodule": Case(m.SelectSubmodule, rows(1.0)[0], rows(1.0, 0.2) + sizes(6, scales=(1.0, 0.1)), "If", BATCH),
    "shapes_differ": Case(m.ShapesDiffer, rows(1.0)[0], rows(1.0, 0.1) + sizes(5, scales=(2.0, 0.1)), "If", BATCH),
    "data_dependent_index": Case(
        m.DataDependentIndex,
        (scaled(3, 1.0), torch.tensor(1)),
        [(scaled(3, 1.0), torch.tensor(2)), (scaled(3, 1.0), torch.tensor(5)), (scaled(6, 1.0), torch.tensor(5))],
        "If",
        ({0: D}, None),
    ),
    "calls_user_function": Case(m.CallsUserFunction, rows(1.0)[0], rows(2.0, 0.1) + sizes(2), "Where", BATCH),
    "calls_method": Case(m.CallsMethod, rows(1.0)[0], rows(1.0, 0.1) + sizes(5, scales=(1.0, 0.1)), "Where", BATCH),
    "python_condition": Case(lambda: m.PythonCondition(True), rows(1.0)[0], rows(1.0, -1.0) + sizes(5), "none", BATCH, check_coverage=False),
    "tuple_returns": Case(m.TupleReturns, rows(1.0)[0], rows(1.0, -1.0) + sizes(5), "Where", BATCH),
    "integer_truthiness": Case(m.IntegerTruthiness, rows(1.0)[0], rows(1.0, 0.1) + sizes(5, scales=(1.0, 0.1)), "Where", BATCH),
    "nested_return": Case(m.NestedReturn, rows(1.0)[0], [(t([[1.0, 0.95]]),), (t([[0.6, 0.8]]),), (t([[0.1, 0.2]]),)], "If", ({0: D, 1: D},)),
    "scalar_branches": Case(m.ScalarBranches, rows(1.0)[0], rows(1.0, 0.01) + sizes(6, scales=(1.0, 0.01)), "Where", BATCH),
    "temporary_in_branch": Case(m.TemporaryInBranch, rows(1.0)[0], rows(1.0, -1.0), "Where", BATCH),
    "pass_through_branch": Case(m.PassThroughBranch, rows(1.0)[0], rows(1.0, 0.01) + sizes(5, scales=(1.0, 0.01)), "If", BATCH),
    "chained_comparison": Case(m.ChainedComparison, rows(1.0)[0], rows(0.8, 0.1, 2.0), "Where", BATCH),
    "where_is_inf_safe": Case(m.InfSafeSelect, rows(1.0)[0], [(t([[0.0, 1.0]]),), (t([[2.0, 1.0]]),)], "Where", ({0: D, 1: D},)),
    "forced_cond": Case(m.IfElse, rows(1.0)[0], rows(1.0, -1.0) + sizes(5), "If", BATCH, strategy="cond"),
    "user_submodule_with_if": Case(m.UsesUserSubmodule, rows(1.0)[0], rows(2.0, 0.1) + sizes(5, scales=(2.0, 0.1)), "Where", BATCH),
    "calls_super": Case(m.CallsSuper, rows(1.0)[0], rows(1.0, -1.0) + sizes(5), "Where", BATCH),
    "decorated_with_helpers": Case(m.DecoratedWithHelpers, rows(1.0)[0], rows(2.0, 0.1) + sizes(5, scales=(2.0, 0.1)), "If", BATCH,
                                   check_coverage=False),
    "mixed_python_and_tensor_elif": Case(m.MixedElif, rows(1.0)[0], sizes(1, 3, 6, scales=(1.0, -1.0, 5.0)), "Where", BATCH,
                                         check_coverage=False),
    "forced_where": Case(m.SelectSubmodule, rows(1.0)[0], rows(1.0, 0.2) + sizes(6), "Where", BATCH, strategy="where"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_if_pattern_matches_eager(name):
    case = CASES[name]
    model = case.make()
    torch.manual_seed(0)
    if case.check_coverage:
        assert_every_branch_taken(model, case.inputs)
    exported = export_to_ort(model, case.example, case.dynamic, case.strategy)
    assert_matches_eager(model, exported, [case.example] + case.inputs)
    control_ops = {op for op in exported.ops if op in ("Where", "If")}
    if case.expect == "none":
        assert not control_ops, f"expected plain Python, got {control_ops}"
        assert not exported.records
    else:
        assert case.expect in control_ops, f"expected {case.expect} in the ONNX graph, got ops {exported.ops}"
        assert exported.records, "no AppliedRewrite recorded"
        suffixes = ("-to-where", "-in-traced-body") if case.expect == "Where" else ("-to-cond",)
        assert any(r.rule.endswith(suffixes) for r in exported.records), [r.rule for r in exported.records]


def test_dynamic_shape_predicate_is_not_specialised():
    model = m.DynamicShapePredicate()
    exported = export_to_ort(model, (scaled(3, 1.0),), BATCH)
    assert_matches_eager(model, exported, [(scaled(1, 1.0),), (scaled(2, 1.0),), (scaled(8, 1.0),)])
    assert "Where" in exported.ops or "If" in exported.ops


@pytest.mark.slow
def test_records_say_where_and_why():
    model = m.SelectSubmodule()
    exported = export_to_ort(model, (scaled(3, 1.0),), BATCH)
    (record,) = [r for r in exported.records if r.rule.startswith("if-to")]
    assert record.rule == "if-to-cond" and record.tier == "control-flow"
    assert "calls self.a" in record.detail
    assert record.location.lineno == line_in_source(m.SelectSubmodule.forward, "if x.mean() > 0.5")
    assert "def forward" in record.data["source_before"] and "_fx.if_stmt" in record.data["source_after"]
    cheap = export_to_ort(m.IfElse(), (scaled(3, 1.0),), BATCH)
    assert [r.detail for r in cheap.records] == ["where: pure cheap branches, same dtype and shape"]


def test_module_is_restored_even_on_error():
    model = m.DefinedInOneBranch()
    original = model.forward
    with pytest.raises(ControlFlowError):
        with convert_control_flow(model):
            assert "forward" in model.__dict__
            torch.export.export(model, (scaled(3, 1.0),), strict=False)
    assert "forward" not in model.__dict__ and model.forward == original


def test_converted_source_keeps_user_lines():
    source = converted_source(m.IfElse.forward)
    assert "_fx.if_stmt(x.mean() > 0.5" in source
    assert "def _fx_true_0(" in source and "def _fx_false_0(" in source


def test_error_points_at_user_line():
    """A runtime error inside converted code reports the user's own file and line."""
    model = m.IfElse()
    with convert_control_flow(model):
        try:
            model(torch.randn(3, 5), )
            model(torch.ones(2, 2), )
            model("not a tensor")
        except Exception as exc:  # noqa: BLE001 - we inspect the traceback
            frames = [f for f in inspect.getinnerframes(exc.__traceback__) if f.filename == m.__file__]
            assert frames and frames[-1].lineno == line_in_source(m.IfElse.forward, "if x.mean() > 0.5")
        else:
            pytest.fail("expected an error")


ERRORS = {
    "defined_in_one_branch": (m.DefinedInOneBranch, r"if: variable 'y' is defined only in the true branch and used afterwards at .*if_models.py:(\d+); give 'y' a value"),
    # y is None on one side: a value None on some paths, refused where the model returns it
    "none_in_one_branch": (m.NoneInOneBranch, r"the model returns a value that this statement leaves None on some inputs and a tensor on others at .*if_models.py:(\d+);"),
    "dtypes_differ": (m.DtypesDiffer, r"if: 'y' is int64 in the true branch but float32 in the false branch at .*if_models.py:(\d+); cast"),
    "refusal_inside_cond_branch": (m.RefusalInsideCondBranch, r"if: 'y' is int64 in the true branch but float32 in the false branch at .*if_models.py:(\d+); cast"),
    "mutates_self": (m.MutatesSelf, r"if on a tensor condition has a side effect the converter cannot carry \(assignment to self.seen at line \d+\) at .*if_models.py:(\d+);"),
    "raises": (m.RaisesOnTensorCondition, r"if on a tensor condition has a side effect the converter cannot carry \(raise at line \d+\) at .*if_models.py:(\d+); move"),
    "assigns_global": (m.AssignsGlobal, r"if assigns the global/nonlocal variable 'CALLS' at .*if_models.py:(\d+); return the value"),
    "returns_selected_list": (m.AppendsOuterList, r"the model returns list 'found', whose number of elements depends on the data at .*if_models.py:(\d+);"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_unconvertible_if_reports_line(name):
    cls, pattern = ERRORS[name]
    model = cls()
    with pytest.raises(ControlFlowError) as info:
        with convert_control_flow(model):
            torch.export.export(model, (scaled(3, 1.0),), strict=False)
    message = str(info.value)
    assert "\n" not in message
    match = re.search(pattern, message)
    assert match, message
    assert int(match.group(1)) == line_in_source(cls.forward, "# error-line")


def test_user_code_without_source_is_an_error(tmp_path):
    source = "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
    missing = tmp_path / "gone.py"
    namespace: dict = {}
    exec(compile(source, str(missing), "exec"), namespace)  # noqa: S102 - simulates a deleted file
    model = namespace["Net"]()
    with pytest.raises(ControlFlowError, match=r"cannot convert Net.forward: its source code is not available at .*gone.py:3; define it"):
        with convert_control_flow(model):
            pass
    assert "forward" not in model.__dict__


def test_library_modules_are_left_alone():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with convert_control_flow(model) as records:
        assert all("forward" not in sub.__dict__ for sub in model.modules())
        torch.export.export(model, (scaled(2, 1.0),), strict=False)
    assert records == []


def test_multi_element_predicate_is_an_error():
    model = m.MultiElementPredicate()
    with pytest.raises(ControlFlowError, match=r"if condition is a tensor of shape \(3, 4\), not a single value at .*if_models.py:\d+; reduce"):
        with convert_control_flow(model):
            torch.export.export(model, (scaled(3, 1.0),), strict=False)


def test_forced_where_with_different_shapes_is_an_error():
    model = m.ShapesDiffer()
    with pytest.raises(ControlFlowError, match=r"strategy='where' is impossible: 'y' has shape .* at .*if_models.py:\d+"):
        with convert_control_flow(model, strategy="where"):
            torch.export.export(model, (scaled(3, 1.0),), dynamic_shapes=BATCH, strict=False)


def test_unknown_strategy_is_a_usage_error():
    from fxport.errors import UsageError

    with pytest.raises(UsageError, match="unknown control-flow strategy 'fast'"):
        with convert_control_flow(m.IfElse(), strategy="fast"):
            pass


def test_eager_call_inside_block_keeps_python_semantics():
    model = m.ElifChain()
    x = scaled(3, -1.0)
    with convert_control_flow(model) as records:
        got = model(x)
    torch.testing.assert_close(got, m.ElifChain()(x))
    assert records == []


def test_node_stack_traces_point_at_user_lines():
    model = m.IfElse()
    with convert_control_flow(model):
        program = torch.export.export(model, (scaled(3, 1.0),), strict=False)
    muls = [n for n in program.graph.nodes if n.op == "call_function" and "mul" in str(n.target)]
    assert muls, program.graph
    trace = muls[0].meta.get("stack_trace", "")
    assert f'if_models.py", line {line_in_source(m.IfElse.forward, "y = x * 2")}' in trace, trace
