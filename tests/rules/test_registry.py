"""Loading rules: built-ins, rule files, entry points, name clashes."""

from __future__ import annotations

import importlib.metadata
import textwrap

import pytest

import fxport
from fxport.rules import registry

REQUIRED_BUILTINS = {
    "aten::erfinv", "aten::lgamma", "aten::digamma", "aten::cummax", "aten::cummin",
    "aten::median", "aten::median.dim", "aten::kthvalue", "aten::mode", "aten::searchsorted",
    "aten::cdist", "aten::linalg_inv", "aten::linalg_solve", "aten::hypot",
}


def test_builtins_are_always_available_and_documented():
    rules = {rule.name: rule for rule in fxport.rules.builtin_rules()}
    assert REQUIRED_BUILTINS <= set(rules)
    for rule in rules.values():
        assert rule.doc, f"{rule.name} has no one-line doc"
        assert rule.priority == fxport.BUILTIN_PRIORITY


def test_rule_file_is_loaded_and_its_rules_collected(tmp_path):
    path = tmp_path / "my_rules.py"
    path.write_text(textwrap.dedent('''
        from onnxscript import opset18 as op
        import fxport

        @fxport.onnx_op("aten::i0")
        def i0(self):
            """Not really i0."""
            return op.Abs(self)
    '''))
    ruleset = fxport.rules.resolve(str(path))
    assert ruleset.get("aten::i0").defined_at.filename == str(path)


def test_broken_rule_file_names_its_line(tmp_path):
    path = tmp_path / "broken_rules.py"
    path.write_text("import fxport\n\nundefined_name + 1\n")
    with pytest.raises(fxport.RuleError, match=r"broken_rules.py failed to load: NameError.* at "
                                               r".*broken_rules.py:3"):
        fxport.rules.resolve(str(path))


def test_missing_rule_file_is_a_usage_error():
    with pytest.raises(fxport.RuleError, match="does not exist"):
        fxport.rules.resolve("/no/such/rules.py")


def test_two_rules_with_one_name_are_an_error(tmp_path):
    from onnxscript import opset18 as op

    @fxport.onnx_op("aten::i0", name="aten::erfinv")
    def clash(self):
        return op.Abs(self)

    with pytest.raises(fxport.RuleError, match="two rules are named 'aten::erfinv'"):
        fxport.rules.resolve([clash])


def test_entry_point_rules_are_loaded(monkeypatch):
    entry = importlib.metadata.EntryPoint(
        name="fixture", value="tests.rules.entry_point_rules", group=registry.ENTRY_POINT_GROUP)

    def fake_entry_points(group):
        return [entry] if group == registry.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", fake_entry_points)
    assert "entry-point-i0" in fxport.rules.resolve().names()
    assert "entry-point-i0" not in fxport.rules.resolve(entry_points=False).names()


def test_broken_entry_point_is_a_rule_error(monkeypatch):
    entry = importlib.metadata.EntryPoint(name="broken", value="no_such_module_xyz",
                                          group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: [entry])
    with pytest.raises(fxport.RuleError, match="entry point 'broken'"):
        fxport.rules.resolve()
