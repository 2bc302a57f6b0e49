"""Calling the user's model: its forward's signature, an eager run, its outputs made exportable.

The engine's one door to the model's code (capture, domain, verify and coverage call the model
through it); :mod:`fxport.load.targets` only loads user code for the CLI. :class:`Signature` is computed
once per conversion (``Conversion.signature``) and carried to the stages that bind inputs to
parameter names.

Example::

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> signature = Signature.of(torch.nn.Bilinear(2, 2, 1))
    >>> signature.names, signature.bound_names(InputSet((torch.ones(1, 2),), {"input2": torch.ones(1, 2)}))
    (['input1', 'input2'], ['input1', 'input2'])
    >>> run_eager(torch.nn.Tanh(), InputSet((torch.zeros(2),))).tolist()
    [0.0, 0.0]
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any

import torch

from fxport.eager import limits as eager_limits
from fxport.errors import EagerRunError, SourceLocation, UsageError
from fxport.common.frames import user_location_from_exception
from fxport.eager.inputs import InputSet


@dataclasses.dataclass(frozen=True)
class Signature:
    """The named parameters of a model's ``forward`` (no ``self``, ``*args`` or ``**kwargs``)."""

    parameters: dict[str, inspect.Parameter]

    @classmethod
    def of(cls, model: "torch.nn.Module | Signature") -> "Signature":
        """``model``'s signature (a Signature passes through): see :func:`forward_parameters`."""
        return model if isinstance(model, Signature) else cls(forward_parameters(model))

    @property
    def names(self) -> list[str]:
        return list(self.parameters)

    def bound_names(self, inputs: InputSet) -> list[str]:
        """The names of the parameters that ``inputs`` binds, in signature order."""
        names = self.names
        return names[: len(inputs.args)] + [n for n in names[len(inputs.args):] if n in inputs.kwargs]

    def bind(self, inputs: InputSet) -> dict[str, Any]:
        """Parameter name → the value ``inputs`` passes for it."""
        return {**dict(zip(self.names, inputs.args)), **inputs.kwargs}


def forward_parameters(module: torch.nn.Module) -> dict[str, inspect.Parameter]:
    """The named parameters of ``module.forward`` (no ``self``, no ``*args``/``**kwargs``).

    A forward without a Python signature (a builtin or C function assigned as ``forward``) is a
    one-line UsageError at the class: export and conversion both need the parameters.
    """
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        cls = type(module)
        raise UsageError(
            f"{cls.__qualname__}.forward is the builtin {getattr(module.forward, '__name__', '?')!r}, "
            "which has no Python signature",
            where=_class_location(cls),
            hint="define forward as a method: def forward(self, x): return the_function(x)",
        ) from None
    return {
        name: p for name, p in signature.parameters.items()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _class_location(cls: type) -> SourceLocation | None:
    try:
        lines, first = inspect.getsourcelines(cls)
        return SourceLocation(inspect.getsourcefile(cls), first, cls.__qualname__)
    except (OSError, TypeError):
        return None


@contextlib.contextmanager
def buffers_restored(module: torch.nn.Module):
    """Put every buffer and tensor attribute of ``module`` back when the block ends: the same
    object (a forward may rebind ``self.h = ...``) holding its current value."""
    saved = [(owner, name, tensor, tensor.detach().clone())
             for owner in module.modules() for name, tensor in _tensor_state(owner)]
    try:
        yield
    finally:
        with torch.no_grad():
            for owner, name, tensor, value in saved:
                if getattr(owner, name, None) is not tensor:
                    setattr(owner, name, tensor)
                if tensor.shape == value.shape:
                    tensor.copy_(value)


def _tensor_state(owner: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The buffers and plain tensor attributes of one module (not its submodules')."""
    state = [(name, t) for name, t in owner._buffers.items() if t is not None]
    state += [(name, t) for name, t in vars(owner).items()
              if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter)]
    return state


def register_output_dataclasses(outputs: Any) -> None:
    """Register dataclass types found in ``outputs`` with torch's pytree so export can flatten them.

    torch.export refuses outputs of unregistered classes; dataclasses of tensors are a common
    model output, and registering them changes nothing else.
    """
    pending = [outputs]
    while pending:
        value = pending.pop()
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            cls = type(value)
            if cls not in torch.utils._pytree.SUPPORTED_NODES:
                torch.export.register_dataclass(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
            pending.extend(getattr(value, f.name) for f in dataclasses.fields(value))
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())


@contextlib.contextmanager
def half_the_threads(wanted: bool = True):
    """Eager runs on half of torch's CPU threads while the block runs (when ``wanted`` and there
    are two or more), the count put back after. Verification's eager runs beside ONNX Runtime
    and the coverage pass of a model with converted loops use it (their modules say why)."""
    threads = torch.get_num_threads()
    if not wanted or threads < 2:
        yield
        return
    torch.set_num_threads(threads // 2)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_eager(module: torch.nn.Module, inputs: InputSet) -> Any:
    """Run the model eagerly; a failure is the user's bug and is reported at their file:line.

    Buffers the forward mutates (counters, running statistics) are restored afterwards, so every
    run starts from the state the ONNX model bakes in and the user's module is left unchanged.
    The model runs on a copy of ``inputs``: a forward that writes into its inputs leaves the
    caller's tensors (and the next run's) as they were. Under a time limit on inputs fxport made
    up, the run is bounded by its budget (:func:`fxport.eager.limits.budgeted`).
    """
    inputs = inputs.copy()
    try:
        with torch.no_grad(), buffers_restored(module), \
                eager_limits.budgeted(module, sum(t.numel() for t in inputs.tensors())):
            return module(*inputs.args, **inputs.kwargs)
    except Exception as exc:
        raise EagerRunError(
            f"the model raised {type(exc).__name__} on the {inputs.name} inputs: {exc}",
            where=user_location_from_exception(exc),
            hint="check the input shapes and dtypes against what forward expects",
        ) from exc
