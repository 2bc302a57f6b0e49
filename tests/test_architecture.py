"""The architecture the docs describe holds in the code: no import circle anywhere in fxport,
built-in rules use only fxport's public API, modules stay small unless they say why."""

import ast
import re
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES = 400


def _modules(package: str) -> dict[str, pathlib.Path]:
    modules = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported_names(module: str, path: pathlib.Path) -> set[str]:
    """Every module name ``module`` imports, at module level or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(package: str = "fxport") -> dict[str, set[str]]:
    """module → the package's modules it imports (a submodule import counts, not its parents)."""
    modules = _modules(package)
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in _imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                targets.add(name)
        graph[module] = targets - {package}  # `from fxport import X` names X, handled above
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_circle_in_fxport():
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_modules_over_the_size_limit_say_why():
    """A module over 400 lines carries a sentence starting "Size:" in its docstring."""
    too_long = []
    for module, path in _modules("fxport").items():
        lines = path.read_text().count("\n")
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and "Size:" not in docstring:
            too_long.append(f"{module} ({lines} lines)")
    assert too_long == []


def documented_modules(text: str) -> set[str]:
    """The files the package tree of docs/architecture.md lists, as paths under fxport/.

    A line starting with a folder name (``controlflow/``) opens that folder; its files are the
    ``*.py`` names on the lines indented deeper below it, before the two spaces of a description.
    """
    block = text.split("## Packages", 1)[1].split("```", 2)[1]
    folders: list[tuple[int, str]] = []
    listed = set()
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        folders = [(depth, name) for depth, name in folders if depth < indent]
        first = line.split()[0]
        if first.endswith("/"):
            folders.append((indent, first))
            continue
        prefix = "".join(name for _, name in folders)
        names = re.split(r"\s{2,}", line.strip())[0]  # a description follows two spaces
        listed.update(prefix + name for name in re.findall(r"\w+\.py\b", names))
    return listed


def test_architecture_md_lists_every_module_under_fxport():
    actual = {path.relative_to(ROOT).as_posix() for path in (ROOT / "fxport").rglob("*.py")
              if path.name != "__init__.py"}
    listed = documented_modules((ROOT / "docs" / "architecture.md").read_text())
    assert sorted(actual - listed) == [], "modules missing from docs/architecture.md's package tree"
    assert sorted(listed - actual) == [], "docs/architecture.md lists modules that do not exist"


def test_architecture_md_stage_table_is_generated_from_stages():
    """The table between the markers is ``stage_table()``; ``FXPORT_WRITE_DOCS=1`` rewrites it."""
    import os

    from fxport.engine.stages import stage_table

    path = ROOT / "docs" / "architecture.md"
    text = path.read_text()
    start, end = "<!-- stage table: generated from fxport.engine.stages.STAGES -->\n", "<!-- end of stage table -->"
    before, rest = text.split(start, 1)
    table, after = rest.split(end, 1)
    if os.environ.get("FXPORT_WRITE_DOCS") == "1":
        path.write_text(before + start + stage_table() + "\n" + end + after)
        table = stage_table() + "\n"
    assert table == stage_table() + "\n", "run FXPORT_WRITE_DOCS=1 pytest tests/test_architecture.py"


def test_no_engine_module_imports_the_loader():
    """fxport.load.targets loads user code for the CLI; the engine calls the model through fxport.eager.calls and
    takes input sets from fxport.eager.inputs. Only the entry points that accept user-code specs import it."""
    entry_points = {"fxport.cli", "fxport.engine.pipeline", "fxport.diff.command"}  # targets, FILE.py:FUNC calibration

    def in_load(module: str) -> bool:
        return module == "fxport.load" or module.startswith("fxport.load.")

    importers = {module for module, targets in import_graph().items()
                 if not in_load(module) and any(in_load(target) for target in targets)}
    assert importers <= entry_points, sorted(importers - entry_points)


#: The stage packages in pipeline order; ``controlflow`` is capture's (source-level conversion).
STAGE_PACKAGES = (("fxport.eager",), ("fxport.capture", "fxport.controlflow"), ("fxport.rules",), ("fxport.lower",),
                  ("fxport.verify",), ("fxport.write",))


def _stage_of(module: str) -> int | None:
    for order, packages in enumerate(STAGE_PACKAGES):
        if any(module == package or module.startswith(package + ".") for package in packages):
            return order
    return None


def later_stage_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a stage package into the package of a later stage."""
    found = []
    for module, targets in graph.items():
        stage = _stage_of(module)
        for target in targets:
            target_stage = _stage_of(target)
            if stage is not None and target_stage is not None and target_stage > stage:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_a_stage_package_imports_no_package_of_a_later_stage():
    assert later_stage_imports(import_graph()) == []


def test_the_later_stage_check_finds_a_backwards_import():
    graph = {"fxport.capture.program": {"fxport.verify.compare"}, "fxport.verify.stage": {"fxport.capture.program"}}
    assert later_stage_imports(graph) == ["fxport.capture.program -> fxport.verify.compare"]


def test_the_stages_are_folders_and_few_modules_stay_at_the_top():
    """Each stage function lives in its stage's package; only the user-facing surface (the command
    line, the errors, fxport.testing) sits loose in fxport/: everything else is in a folder."""
    from fxport.engine.stages import STAGES

    homes = {stage.name: stage.run.__module__ for stage in STAGES}
    assert homes["eager"] == "fxport.eager.stage" and homes["write"] == "fxport.write.stage"
    assert homes["capture"] == "fxport.capture.stage" and homes["rewrite"] == "fxport.rules.stage"
    assert homes["lower"] == homes["precision"] == "fxport.lower.stage"
    assert homes["verify"] == homes["coverage"] == "fxport.verify.stage"
    top_level = sorted(path.name for path in (ROOT / "fxport").glob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    assert top_level == ["cli.py", "errors.py", "testing.py"], top_level


def test_every_loop_operator_lives_in_the_loops_package():
    """The trace-time work on loops has one home, fxport/controlflow/operators/loops/ (lists grown in
    them: operators/lists/); no operator module at the top of operators/ is named after loops."""
    top = [path.name for path in (ROOT / "fxport/controlflow/operators").glob("*.py")]
    assert [name for name in top if "loop" in name or "grow" in name or "list" in name] == [], top


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_the_control_flow_runtime_names_no_library():
    """fxport/controlflow imports no transformers, and the runtime (operators/) names it in no
    code: a library's objects come in through the containers hook (register_container,
    container_registrar), transformers' caches from fxport/generation/caches.py."""
    importing, naming = [], []
    for module, path in _modules("fxport/controlflow").items():
        tree = ast.parse(path.read_text())
        if any(name == "transformers" or name.startswith("transformers.") for name in _imported_names(module, path)):
            importing.append(module)
        if ".operators" in module:
            docstrings = _docstrings(tree)
            naming += [f"{module}:{node.lineno}" for node in ast.walk(tree)
                       if isinstance(node, ast.Constant) and isinstance(node.value, str)
                       and "transformers" in node.value and id(node) not in docstrings]
    assert importing == [] and naming == [], (importing, naming)


#: Functions may be at most this long (lines from ``def`` to the end of the body).
MAX_FUNCTION_LINES = 80


def long_functions(package: str = "fxport", limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module:line name (lines)`` of every function of ``package`` longer than ``limit`` lines."""
    found = []
    for module, path in _modules(package).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{module}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_fxport_is_over_80_lines():
    """A function that grew past 80 lines does several things: split it by concern (the stage
    functions, ``capture``'s attempts, ``verify_model``'s plan show how)."""
    assert long_functions() == []
