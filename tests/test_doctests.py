"""Every ``>>>`` example in fxport's docstrings runs and shows what it says (``python -m doctest``
semantics; examples that need a model file or a GPU are marked ``# doctest: +SKIP``)."""

import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module_names() -> list[str]:
    names = []
    for path in sorted((ROOT / "fxport").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [name for name in names if name != "fxport.__main__"]


def _examples(module_name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(module_name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module_name)
    return [test for test in tests if test.examples and (test.filename or "").startswith(str(ROOT))]


MODULES = _module_names()


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    for test in _examples(module_name):
        runner.run(test, out=failures.append)
    assert runner.failures == 0, "\n".join(failures)


def test_every_public_entry_point_module_has_an_example():
    """The modules users call first each show a runnable example."""
    for name in ("fxport", "fxport.engine.pipeline", "fxport.engine.options", "fxport.engine.conversion", "fxport.engine.stages",
                 "fxport.rules", "fxport.diff", "fxport.testing"):
        assert _examples(name), f"{name} has no docstring example"
