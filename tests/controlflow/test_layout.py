"""The control-flow package's layout: a runtime that imports nothing from the compiler, facts
computed from the statements as written, converters applied by an engine that names none of
them, and deterministic generated names."""

import ast
import pathlib
import textwrap

import pytest

import fxport.controlflow
from fxport.controlflow import CONTROL_FLOW_RULES, converted_source, facts
from fxport.controlflow.operators.rule_names import CONVERSIONS, rule_name
from fxport.controlflow.converters import CONVERTERS
from fxport.controlflow.converters.base import ExpressionConverter
from fxport.controlflow.engine import convert_function
from fxport.rules.controlflow import control_flow_names
from tests.controlflow import if_models, loop_models

PACKAGE = pathlib.Path(fxport.controlflow.__file__).parent


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_operators_import_nothing_from_the_compiler_side():
    for path in sorted((PACKAGE / "operators").glob("*.py")):
        compiler = {n for n in _imports(path)
                    if n.startswith("fxport.controlflow") and not n.startswith("fxport.controlflow.operators")}
        assert compiler == set(), f"{path.name} imports {sorted(compiler)}"


def test_operator_modules_use_no_private_names_of_each_other():
    for path in sorted((PACKAGE / "operators").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fxport.controlflow.operators"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def _break_continue(x, n):
    total = x
    for i in range(n):
        if i == 3:
            continue
        while total.sum() > 0:
            if total.max() > 5:
                break
            total = total - 1
        if i > 7:
            break
    return total


def test_converting_a_function_twice_gives_the_same_source():
    first = converted_source(_break_continue)
    converted_source(loop_models.BreakInWhile.forward)  # another function in between
    assert converted_source(_break_continue) == first
    assert "_fx_break_1" in first and "_fx_continue_" in first


def test_cost_facts_come_from_the_statement_as_written():
    """The reasons a branch is not cheap name the user's code, never the rewritten one."""
    for cls in (if_models.SelectSubmodule, if_models.BatchSizeChoice):
        reasons = [r for info in convert_function(cls.forward).infos for r in info.expensive]
        assert reasons and not any("_fx" in r for r in reasons), reasons
    fdef = ast.parse(textwrap.dedent("""
        def f(x, i):
            if x.sum() > 0:
                x[i] += x[i:]
            return x
        """)).body[0]
    (if_facts,) = facts.analyze(fdef).statements.values()
    assert not if_facts.cheap
    assert if_facts.expensive[0].startswith("indexing with i at line 4")
    assert if_facts.written_in_place == {"x"} and if_facts.live_after == {"x"}


def _augmented_item_in_branch(x, i):
    if x.sum() > 0:
        x[i] += 1
    return x


def test_augmented_item_assignment_in_a_branch_converts():
    (info,) = convert_function(_augmented_item_in_branch).infos
    assert info.names == ("x",) and "indexing with i" in info.expensive[0]


class _AbsToMethod(ExpressionConverter):
    """A newcomer's construct: ``abs(t)`` → ``t.abs()`` (one class, no engine change)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "abs" and len(node.args) == 1:
            method = ast.Attribute(value=node.args[0], attr="abs", ctx=ast.Load())
            return ast.copy_location(ast.Call(func=method, args=[], keywords=[]), node)
        return node


def _uses_abs(x):
    return abs(x) + 1


def test_a_construct_is_added_as_one_converter_without_touching_the_engine():
    at = next(i for i, c in enumerate(CONVERTERS) if c.stage == "statements")
    converters = CONVERTERS[:at] + [_AbsToMethod] + CONVERTERS[at:]
    assert "return x.abs() + 1" in convert_function(_uses_abs, converters).source.after
    assert "abs(x)" in convert_function(_uses_abs).source.after


def test_every_converter_is_a_known_kind_in_stage_order():
    stages = [c.stage for c in CONVERTERS]
    assert stages == sorted(stages, key=["canonicalize", "expressions", "statements", "finalize"].index)
    statement_types = [c.node_type for c in CONVERTERS if c.stage == "statements"]
    assert len(set(statement_types)) == len(statement_types), "one converter per statement type"
    # every statement construct of the conversion table has its converter (ifexp is an expression,
    # item a graph pass, raise a canonicalisation: RaisingBranches)
    constructs = {row.construct for row in CONVERSIONS} - {"ifexp", "item", "raise"}
    assert {t.__name__.lower() for t in statement_types} == constructs


def test_control_flow_rules_are_the_names_records_carry():
    assert list(CONTROL_FLOW_RULES) == [row.name for row in CONVERSIONS]
    assert len({(row.construct, row.lowering) for row in CONVERSIONS}) == len(CONVERSIONS), "one row per key"
    assert all(rule_name(row.construct, row.lowering) == row.name for row in CONVERSIONS)
    assert all(isinstance(doc, str) and doc and "\n" not in doc for doc in CONTROL_FLOW_RULES.values())
    assert control_flow_names() == CONTROL_FLOW_RULES
    with pytest.raises(KeyError, match="add a row to CONVERSIONS"):
        rule_name("if", "scan")


def test_every_operator_module_is_exported_and_generated_code_names_them_without_side_effect_imports():
    from fxport.controlflow import operators

    root = pathlib.Path(operators.__file__).parent  # loops/ and lists/ hold modules of their own
    files = sorted(".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
                   for path in root.rglob("*.py") if path != root / "__init__.py")
    assert sorted(module.__name__.removeprefix(operators.__name__ + ".") for module in operators.MODULES) == files
    assert all(hasattr(operators, name) for name in {name.split(".")[0] for name in files})
    converters = pathlib.Path(operators.__file__).parents[1] / "converters"
    assert not any("import targets" in path.read_text() for path in converters.glob("*.py"))
