"""The load stage: from a target string and input options to a module and example inputs.

A target is ``path/to/file.py:Name`` or ``package.module:Name`` where ``Name`` is an
``nn.Module`` subclass (built with no arguments), a factory function returning a module, or a
module instance. A module may carry its own example inputs so that no ``-i`` is needed:

- ``example_inputs()`` method or ``example_args`` attribute: a tuple of positional inputs, a
  dict of keyword inputs, or a list of such input sets (the first is exported, all are verified);
- ``example_dynamic_shapes`` attribute: dynamic axes in the simple form
  ``{"x": {0: "batch"}}``.

Example::

    >>> loaded = load_model("examples/gated_mlp.py:GatedMLP")
    >>> type(loaded.module).__name__, [s.shapes() for s in loaded.input_sets][:2], loaded.dynamic_shapes
    ('GatedMLP', [[[3, 8]], [[2, 8]]], {'x': {0: 'batch'}})
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import sys
from typing import Any, Callable

import torch

from fxport.errors import InputSpecError, ModelLoadError, SourceLocation
from fxport.common.frames import user_location_from_exception
from fxport.eager.calls import forward_parameters
from fxport.eager.inputs import InputSet, TensorSpec, make_tensor, parse_dynamic_spec, parse_input_spec, to_input_sets


@dataclasses.dataclass
class LoadedModel:
    """A model and the inputs to export and verify it with."""

    module: torch.nn.Module
    input_sets: list[InputSet]
    dynamic_shapes: Any = None
    source: str = ""
    #: what a task built, for the CLI's output (``--task text-generation``: the generation settings)
    description: str = ""


# --- targets ------------------------------------------------------------------------------

def resolve_target(target: str) -> Any:
    """Import ``file.py:Name`` or ``pkg.module:Name`` and return the named object."""
    location, sep, name = target.rpartition(":")
    if not sep or not location or not name:
        raise ModelLoadError(
            f"target {target!r} is not of the form path/to/file.py:Name or package.module:Name",
            hint="name the module class, factory or instance after a colon",
        )
    module = _import_location(location)
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            available = sorted(n for n, v in vars(module).items() if _is_model_like(v))
            raise ModelLoadError(
                f"{location} has no attribute {name!r}",
                hint=f"models found there: {', '.join(available) or 'none'}",
            )
        obj = getattr(obj, part)
    return obj


def _import_location(location: str):
    if location.endswith(".py") or os.sep in location or "/" in location:
        return import_file(location)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as exc:
        raise ModelLoadError(
            f"module {location} cannot be imported ({exc})",
            hint="check the module path, or give a file path ending in .py",
        ) from exc
    except Exception as exc:
        raise ModelLoadError(
            f"importing {location} raised {type(exc).__name__}: {exc}",
            where=user_location_from_exception(exc),
            hint="fix the error in the module",
        ) from exc


#: path → module, while one :func:`load_model` runs: a target and ``--inputs-fn`` naming the same
#: file share one module (the one patch rules reach); each load executes the file afresh
_SHARED_IN_LOAD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("shared_in_load", default=None)


def import_file(location: str):
    """The module of the Python file ``location``, reachable as ``sys.modules[STEM]``.

    Patch rules name the model's functions by the file's stem (``mymodel.f`` for ``mymodel.py``,
    docs/rules.md), and a rule file's ``import mymodel`` must give the module the model runs in,
    not a second copy. So the file is executed under a private name (one per path) and its stem
    names that module too, unless the stem already names another module (a file called
    ``json.py``). A file imported already under its stem (``PYTHONPATH=.``) is that module.
    """
    path = os.path.abspath(location)
    if not os.path.isfile(path):
        raise ModelLoadError(f"file {location} does not exist", hint="check the path")
    stem = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(stem)
    if existing is not None and _is_file(existing, path) and not _executed_by_fxport(existing):
        return existing
    shared = _SHARED_IN_LOAD.get()
    module = shared.get(path) if shared is not None else None
    if module is None:
        module = _execute_file(location, path)
        if shared is not None:
            shared[path] = module
    if stem.isidentifier() and (existing is None or _executed_by_fxport(existing)):
        sys.modules[stem] = module
    return module


@contextlib.contextmanager
def _one_module_per_file():
    """Within the block, a file named twice (target and ``--inputs-fn``) is executed once."""
    token = _SHARED_IN_LOAD.set({})
    try:
        yield
    finally:
        _SHARED_IN_LOAD.reset(token)


def _execute_file(location: str, path: str):
    """Execute the file under a private module name."""
    module_name = _PRIVATE_PREFIX + re.sub(r"\W", "_", os.path.splitext(path)[0])
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file failed to import
        sys.modules.pop(module_name, None)
        raise ModelLoadError(
            f"importing {location} raised {type(exc).__name__}: {_exception_text(exc)}",
            where=_error_location(exc),
            hint="fix the error in the file",
        ) from exc
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


_PRIVATE_PREFIX = "_fxport_target_"


def _executed_by_fxport(module) -> bool:
    return getattr(module, "__name__", "").startswith(_PRIVATE_PREFIX)


def _is_file(module, path: str) -> bool:
    file = getattr(module, "__file__", None)
    return bool(file) and os.path.realpath(file) == os.path.realpath(path)


def _exception_text(exc: BaseException) -> str:
    return exc.msg if isinstance(exc, SyntaxError) else str(exc)


def _error_location(exc: BaseException) -> SourceLocation | None:
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return SourceLocation(exc.filename, exc.lineno)
    return user_location_from_exception(exc)


def _is_model_like(value: Any) -> bool:
    return isinstance(value, torch.nn.Module) or (
        isinstance(value, type) and issubclass(value, torch.nn.Module)
    )


def instantiate(obj: Any, target: str) -> torch.nn.Module:
    """Turn a module class, factory function or instance into a module instance."""
    if isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, type) and not issubclass(obj, torch.nn.Module):
        raise ModelLoadError(f"{target} is a class but not a torch.nn.Module subclass",
                             hint="point the target at an nn.Module")
    if not callable(obj):
        raise ModelLoadError(f"{target} is a {type(obj).__name__}, not a module, class or factory",
                             hint="point the target at an nn.Module")
    required = _required_parameters(obj)
    if required:
        raise ModelLoadError(
            f"{target} needs constructor arguments ({', '.join(required)})",
            hint="give defaults, or point the target at a no-argument factory function",
        )
    module = call_user_code(obj, ModelLoadError, f"building {target}", "fix the constructor")
    if not isinstance(module, torch.nn.Module):
        raise ModelLoadError(
            f"{target}() returned a {type(module).__name__}, not a torch.nn.Module",
            hint="the factory must return a module",
        )
    return module


def call_user_code(fn: Callable[[], Any], error: type, what: str, hint: str) -> Any:
    """Call ``fn()``; an exception becomes ``error`` naming ``what`` and the user's file:line."""
    try:
        return fn()
    except Exception as exc:
        raise error(f"{what} raised {type(exc).__name__}: {exc}",
                    where=user_location_from_exception(exc), hint=hint) from exc


def _required_parameters(fn: Callable) -> list[str]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        name for name, p in signature.parameters.items()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def inputs_from_specs(module: torch.nn.Module, specs: list[TensorSpec], seed: int = 0) -> InputSet:
    """Build example inputs for ``module.forward`` from command-line specs, matched by name."""
    parameters = forward_parameters(module)
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputSpecError(f"-i gives input {', '.join(repeated)} more than once",
                             hint="give each input once; verify other shapes with --inputs-fn or --dynamic")
    by_name = {spec.name: spec for spec in specs}
    unknown = [name for name in by_name if name not in parameters]
    if unknown:
        raise InputSpecError(
            f"input(s) {', '.join(unknown)} are not parameters of {type(module).__name__}.forward",
            hint=f"its parameters are: {', '.join(parameters) or 'none'}",
        )
    generator = torch.Generator().manual_seed(seed)
    args = []
    for name in parameters:
        spec = by_name.get(name)
        if spec is None:
            if parameters[name].default is inspect.Parameter.empty:
                raise InputSpecError(f"no input given for parameter {name!r} of forward",
                                     hint=f"add -i {name}=SHAPE[:DTYPE]")
            break
        args.append(make_tensor(spec.shape, spec.dtype, generator))
    return InputSet(tuple(args))


def load_inputs_fn(spec: str) -> list[InputSet]:
    """Call ``FILE.py:FUNC`` (``--inputs-fn``) and normalise its result."""
    fn = resolve_target(spec)
    if not callable(fn):
        raise InputSpecError(f"{spec} is not callable", hint="point --inputs-fn at a function")
    value = call_user_code(fn, InputSpecError, spec, "fix the inputs function")
    return to_input_sets(value, spec)


def load_calibration(spec_or_value: Any) -> list[InputSet]:
    """Calibration input sets from ``FILE.py:FUNC`` (``--calibrate``) or a list of input sets."""
    if isinstance(spec_or_value, str):
        sets = load_inputs_fn(spec_or_value)
    else:
        sets = to_input_sets(list(spec_or_value), "calibration inputs")
    return sets


def inputs_carried_by(module: torch.nn.Module) -> list[InputSet] | None:
    """Example inputs the module carries (``example_inputs()`` or ``example_args``), if any."""
    if callable(getattr(module, "example_inputs", None)):
        origin = f"{type(module).__name__}.example_inputs()"
        value = call_user_code(module.example_inputs, InputSpecError, origin, "fix example_inputs()")
        return to_input_sets(value, origin)
    if hasattr(module, "example_args"):
        return to_input_sets(module.example_args, f"{type(module).__name__}.example_args")
    return None


def load_model(
    target: str,
    *,
    input_specs: list[str] = (),
    dynamic_specs: list[str] = (),
    inputs_fn: str | None = None,
) -> LoadedModel:
    """Resolve a CLI target and its input options into a :class:`LoadedModel` (in eval mode).

    Precedence for inputs: ``--inputs-fn``, then ``-i`` specs, then what the module carries.
    """
    with _one_module_per_file():  # --inputs-fn naming the model's file: the model's module
        module = instantiate(resolve_target(target), target)
        from_inputs_fn = load_inputs_fn(inputs_fn) if inputs_fn else None
    module.eval()
    specs = [parse_input_spec(s) for s in input_specs]
    if from_inputs_fn is not None:
        input_sets = from_inputs_fn
    elif specs:
        input_sets = [inputs_from_specs(module, specs)]
    else:
        input_sets = inputs_carried_by(module)
        if input_sets is None:
            names = " ".join(f"-i {n}=SHAPE" for n in forward_parameters(module))
            raise InputSpecError(
                f"no example inputs for {target}",
                hint=f"pass {names or '-i NAME=SHAPE'}, --inputs-fn FILE.py:FUNC, "
                "or give the module an example_inputs() method",
            )
    for index, input_set in enumerate(input_sets[1:], start=1):  # the rest are verified as user-1, user-2, ...
        if input_set.name == "example":
            input_set.name = f"user-{index}"
    dynamic = {}
    for text in dynamic_specs:
        for name, axes in parse_dynamic_spec(text).items():
            dynamic.setdefault(name, {}).update(axes)
    if not dynamic:
        dynamic = getattr(module, "example_dynamic_shapes", None) or {}
    return LoadedModel(module, input_sets, dynamic or None, source=target)
