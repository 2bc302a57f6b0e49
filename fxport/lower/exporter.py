"""The dynamo exporter's translation of an exported program, with its op registry built once.

``torch.onnx.export(program, dynamo=True)`` builds the registry of torchlib's ATen → ONNX
translations on every call: it re-reads and re-parses the source of some 500 onnxscript
functions (half a second a call on a 2-core machine, more on the first, which also imports
torchlib). fxport lowers once per conversion, and again for each grown loop's body: it builds
that registry once per process and opset, copies it per export (the exporter only reads it) and
puts the conversion's own translations on the copy. :func:`prepare` starts the first build on a
background thread, so a conversion's eager run and capture hide it.

:func:`export_program` is ``torch.onnx.export(program, dynamo=True, optimize=False)`` with that
registry: the same translation, the same opset rule (a registry at torchlib's opset where a lower
one is asked for, as ``torch.onnx.export`` does).

Example::

    >>> import torch
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2, 3),))
    >>> [node.op_type for node in export_program(program, opset=18).model.graph]
    ['Relu']
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable

import torch

from fxport.common.quiet import drop_record

_lock = threading.Lock()
#: The torchlib registry per registry opset: built (or being built) once per process.
_built: dict[int, Future] = {}


def registry_opset(opset: int | None) -> int:
    """The opset ``torch.onnx.export`` builds its registry at when asked for ``opset``."""
    from torch.onnx import _constants as onnx_constants
    from torch.onnx._internal.exporter import _constants

    opset = onnx_constants.ONNX_DEFAULT_OPSET if opset is None else opset
    return max(opset, _constants.TORCHLIB_OPSET)


def prepare(opset: int | None = None) -> Future:
    """Start building the registry for ``opset`` on a background thread (nothing when it is
    built or under way); the first :func:`export_program` then waits only for what is left.
    Returns the build's future.

    torch's side of the exporter is imported here, on the calling thread: the background thread
    imports only onnxscript's torchlib, which nothing else imports meanwhile.
    """
    import torch.onnx._internal.exporter._core  # noqa: F401
    import torch.onnx._internal.exporter._torchlib.ops  # noqa: F401

    return _torchlib_registry(registry_opset(opset), background=True)


def registry_with(translation_table: dict[Callable, Any] | None = None, opset: int | None = None):
    """A copy of the process's torchlib registry for ``opset`` with ``translation_table``'s
    translations registered first (a list value registers each of its functions)."""
    from torch.onnx._internal.exporter import _registration

    torchlib = _current_registry(registry_opset(opset))
    registry = _registration.ONNXRegistry()
    registry._opset_version = torchlib.opset_version
    registry.functions = {target: list(translations) for target, translations in torchlib.functions.items()}
    for target, function in (translation_table or {}).items():
        for one in function if isinstance(function, (list, tuple)) else [function]:
            registry.register_op(target, one)
    return registry


def export_program(program: torch.export.ExportedProgram, *, opset: int | None = None,
                   translation_table: dict[Callable, Callable] | None = None):
    """``torch.onnx.export(program, dynamo=True, opset_version=opset, custom_translation_table=
    translation_table, optimize=False)``: the ``ONNXProgram``, with the registry built once."""
    from torch.onnx import _constants as onnx_constants
    from torch.onnx._internal._lazy_import import onnxscript_apis
    from torch.onnx._internal.exporter import _core

    onnx_program = _core.export(program, registry=registry_with(translation_table, opset), optimize=False,
                                verbose=False, opset_version=None)
    one_version_for_local_functions(onnx_program.model)
    onnx_program.model = onnxscript_apis.convert_version(
        onnx_program.model, onnx_constants.ONNX_DEFAULT_OPSET if opset is None else opset)
    return onnx_program


def exporter_summary(exc: BaseException) -> str:
    """The innermost meaningful line of a torch.onnx exporter exception."""
    innermost = exc
    while innermost.__cause__ is not None:
        innermost = innermost.__cause__
    lines = [line.strip() for line in str(innermost).splitlines() if line.strip()]
    return f"{type(innermost).__name__}: {lines[0] if lines else ''}"[:300]


#: the domain torch.onnx writes a program's subgraphs (cond branches, while_loop bodies) into
LOCAL_FUNCTIONS = "pkg.torch.__subgraph__"


def one_version_for_local_functions(model) -> None:
    """Give the subgraph functions' domain one version in the model and in every function.

    torch.onnx (2.13) imports it at the main opset in the model (the call from the main graph
    carries that version) but at 1 in a function whose ``If`` calls branch functions, so inlining
    before the version conversion fails ("Opset mismatch when inlining function
    'while_loop_body_graph_0'"): a ``cond`` inside a ``while_loop`` body could not be written.
    The domain holds only these functions, so its version means nothing; 1 everywhere.
    """
    holders = [model] + list(model.functions.values())
    for holder in holders:
        if LOCAL_FUNCTIONS in holder.opset_imports:
            holder.opset_imports[LOCAL_FUNCTIONS] = 1
    graphs = [model.graph] + list(model.functions.values())
    for graph in graphs:
        for node in ir_nodes(graph):
            if node.domain == LOCAL_FUNCTIONS:
                node.version = 1


def ir_nodes(graph):
    """Every node of an onnx_ir graph or function, subgraphs included."""
    from onnx_ir import traversal

    return traversal.RecursiveGraphIterator(graph)


def _current_registry(opset: int):
    """The torchlib registry at ``opset``, built again when a failed background build left none
    or when an op namespace torchlib translates has loaded since it was built (``torchvision``
    imported after a first conversion: a registry built before has no translation for its ``nms``)."""
    future = _torchlib_registry(opset)
    try:
        built = future.result()
    except Exception:  # noqa: BLE001 - a failed background build: once more here, its error raised
        built = _torchlib_registry(opset).result()
    if _loaded_namespaces(built.wanted) != built.namespaces:
        with _lock:
            if _built.get(opset) is future:
                _built.pop(opset)
        built = _torchlib_registry(opset).result()
    return built.registry


@dataclasses.dataclass(frozen=True)
class _Built:
    """A torchlib registry and the op namespaces its translations target (``wanted``) that the
    dispatcher had when it was built (``namespaces``): an op not registered then got no translation."""

    registry: Any
    wanted: frozenset[str]
    namespaces: frozenset[str]


def _loaded_namespaces(wanted: frozenset[str]) -> frozenset[str]:
    return wanted & {name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()}


def _torchlib_registry(opset: int, background: bool = False) -> Future:
    """The future of the torchlib registry at ``opset``, its build started here when none is
    (on a daemon thread with ``background``); a failed build is not kept, the next call retries."""
    with _lock:
        future = _built.get(opset)
        started = future is None
        if started:
            future = _built[opset] = Future()
    if started:
        if background:
            threading.Thread(target=_build, args=(future, opset), name="fxport-registry", daemon=True).start()
        else:
            _build(future, opset)
    return future


def _build(future: Future, opset: int) -> None:
    """Build the registry into ``future``; its log lines (``torchvision is not installed``) are
    dropped, as ``quiet_torch`` drops them for the rest of the exporter."""
    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    logger.addFilter(drop_record)
    try:
        from onnxscript.function_libs.torch_lib import ops, registration  # noqa: F401 - registers the ops
        from torch.onnx._internal.exporter import _registration

        wanted = frozenset(name.split("::", 1)[0] for name in registration.default_registry) - {"_operator", "math"}
        namespaces = _loaded_namespaces(wanted)  # before the build: an op registered during it counts as new
        future.set_result(_Built(_registration.ONNXRegistry.from_torchlib(opset_version=opset), wanted, namespaces))
    except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
        with _lock:
            _built.pop(opset, None)
        future.set_exception(exc)
    finally:
        logger.removeFilter(drop_record)
