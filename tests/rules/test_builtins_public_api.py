"""The built-in rules (rewrites/, installed as fxport.rewrites) are written like a user's rule
file: they reach fxport only through its public API, so they stay the examples to copy."""

from __future__ import annotations

import ast
import pathlib

import fxport
import fxport.generation.generate
import fxport.rules

REWRITES = pathlib.Path(__file__).resolve().parents[2] / "rewrites"
PUBLIC = {"fxport": set(fxport.__all__) | {"rules", "BUILTIN_PRIORITY"}, "fxport.rules": set(fxport.rules.__all__),
          # the task models are public: docs/generation.md shows them (the generate() rule calls one)
          "fxport.generation.generate": set(fxport.generation.generate.__all__)}
OWN_PACKAGE = "fxport.rewrites"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _private_uses(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fxport.") and not alias.name.startswith(OWN_PACKAGE):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fxport"):
            module = node.module
            if module.startswith(OWN_PACKAGE):
                continue
            for alias in node.names:
                if alias.name not in PUBLIC.get(module, set()):
                    found.append(f"line {node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and not isinstance(node.value, ast.Attribute):
            dotted = _dotted(node)
            if dotted and dotted.startswith("fxport.") and node.attr not in PUBLIC["fxport"]:
                found.append(f"line {node.lineno}: {dotted}")
        elif isinstance(node, ast.Attribute) and _dotted(node.value) == "fxport.rules":
            if node.attr not in PUBLIC["fxport.rules"]:
                found.append(f"line {node.lineno}: fxport.rules.{node.attr}")
    return found


def test_builtin_rules_use_only_the_public_api():
    files = sorted(REWRITES.glob("*.py"))
    assert len(files) > 10
    private = {path.name: uses for path in files if (uses := _private_uses(path))}
    assert private == {}


def test_the_checker_catches_private_imports(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import fxport\nfrom fxport.rules.graph import location_from_stack_trace\n"
                    "from fxport.rewrites._helpers import ints\nx = fxport.rules.registry.builtin_rules\n"
                    "y = fxport.engine.pipeline.run\nz = fxport.rules.graph_pass\n")
    assert _private_uses(path) == [
        "line 2: from fxport.rules.graph import location_from_stack_trace",
        "line 4: fxport.rules.registry",
        "line 5: fxport.engine",
    ]
