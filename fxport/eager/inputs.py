"""Model inputs: :class:`InputSet` (one set of positional and keyword inputs) and what builds
one: a call's arguments (:meth:`InputSet.of`), what an inputs function returned
(:func:`to_input_sets`), and the command line's ``-i NAME=SHAPE[:DTYPE]`` / ``--dynamic
NAME:AXIS=DIM`` specs. The one owner of input sets; :mod:`fxport.load.targets` re-exports these names,
:mod:`fxport.verify.inputs.generated` draws the verification sets. Shapes are spelled as :mod:`fxport.common.shapes` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from fxport.errors import InputSpecError
from fxport.common.shapes import parse_shape

@dataclasses.dataclass
class InputSet:
    """One set of model inputs: positional ``args`` and keyword ``kwargs``."""

    args: tuple
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = "example"

    @classmethod
    def of(cls, args: Any = (), kwargs: dict[str, Any] | None = None, name: str = "example") -> "InputSet":
        """The input set of a call ``model(*args, **kwargs)``; a single non-tuple ``args`` is one input.

        >>> InputSet.of(torch.ones(2)).args[0].shape
        torch.Size([2])
        """
        return cls(tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(kwargs or {}), name)

    def tensors(self) -> list[torch.Tensor]:
        """The tensors in the order the exported ONNX model takes them (flattened, no None)."""
        flat, _ = torch.utils._pytree.tree_flatten((self.args, self.kwargs))
        return [t for t in flat if isinstance(t, torch.Tensor)]

    def shapes(self) -> list[list[int]]:
        """The shape of each of :meth:`tensors` (a verification row's ``input_shapes``)."""
        return [list(t.shape) for t in self.tensors()]

    def map_tensors(self, fn: Callable[[int, torch.Tensor], torch.Tensor], name: str | None = None) -> "InputSet":
        """A new input set with ``fn(index, tensor)`` in place of each tensor (index as in
        :meth:`tensors`); other values kept, the name kept unless ``name`` is given.

        >>> InputSet((torch.ones(2), 3)).map_tensors(lambda i, t: t * 2).args
        (tensor([2., 2.]), 3)
        """
        flat, spec = torch.utils._pytree.tree_flatten((self.args, self.kwargs))
        index, new_flat = 0, []
        for value in flat:
            if isinstance(value, torch.Tensor):
                value = fn(index, value)
                index += 1
            new_flat.append(value)
        args, kwargs = torch.utils._pytree.tree_unflatten(new_flat, spec)
        return InputSet(args, kwargs, self.name if name is None else name)

    def copy(self) -> "InputSet":
        """The same inputs with every tensor cloned: a model writing into its inputs changes the copy."""
        return self.map_tensors(lambda _, tensor: tensor.clone())

    def to(self, device: str) -> "InputSet":
        return self.map_tensors(lambda _, tensor: tensor.to(device))


_DTYPES = {
    "float32": torch.float32, "float": torch.float32, "f32": torch.float32,
    "float16": torch.float16, "half": torch.float16, "f16": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "double": torch.float64, "f64": torch.float64,
    "int64": torch.int64, "long": torch.int64, "i64": torch.int64,
    "int32": torch.int32, "int": torch.int32, "i32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """``NAME=SHAPE[:DTYPE]`` from the command line."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


def parse_input_spec(text: str) -> TensorSpec:
    """Parse ``x=1x3x224x224``, ``ids=2x8:int64`` or ``n=scalar:int64``.

    >>> parse_input_spec("x=2x3:float16")
    TensorSpec(name='x', shape=(2, 3), dtype=torch.float16)
    """
    name, sep, rest = text.partition("=")
    if not sep or not name.isidentifier():
        raise InputSpecError(f"input spec {text!r} is not NAME=SHAPE[:DTYPE]",
                             hint="e.g. -i x=1x3x224x224 or -i ids=2x8:int64")
    shape_text, _, dtype_text = rest.partition(":")
    dtype = torch.float32
    if dtype_text:
        if dtype_text.lower() not in _DTYPES:
            raise InputSpecError(f"unknown dtype {dtype_text!r} in input spec {text!r}",
                                 hint=f"use one of {', '.join(sorted(set(_DTYPES)))}")
        dtype = _DTYPES[dtype_text.lower()]
    try:
        shape = parse_shape(shape_text)
    except ValueError:
        raise InputSpecError(f"bad shape {shape_text!r} in input spec {text!r}",
                             hint="write dimensions as non-negative integers joined by x, e.g. 1x3x32x32") from None
    if not shape:
        return TensorSpec(name, (), dtype)
    elements = 1
    for size in shape:
        elements *= size
    if elements > MAX_INPUT_ELEMENTS:
        raise InputSpecError(f"input spec {text!r} asks for {elements:,} elements, more than an example "
                             f"input needs ({MAX_INPUT_ELEMENTS:,} at most)",
                             hint="give a small example and declare the large axes dynamic (--dynamic)")
    return TensorSpec(name, shape, dtype)


#: The most elements an example input built from ``-i`` may have (4 Gi: 16 GiB of float32).
MAX_INPUT_ELEMENTS = 1 << 32


def parse_dynamic_spec(text: str) -> dict[str, dict[int, str]]:
    """Parse ``x:0=batch,2=height`` into ``{"x": {0: "batch", 2: "height"}}``.

    >>> parse_dynamic_spec("x:0=batch,2=h")
    {'x': {0: 'batch', 2: 'h'}}
    """
    name, sep, axes_text = text.partition(":")
    if not sep or not name.isidentifier() or not axes_text:
        raise InputSpecError(f"dynamic spec {text!r} is not NAME:AXIS=DIMNAME[,AXIS=DIMNAME...]",
                             hint="e.g. --dynamic x:0=batch,2=height")
    axes: dict[int, str] = {}
    for item in axes_text.split(","):
        axis_text, eq, dim_name = item.partition("=")
        if not eq or not dim_name.isidentifier() or not axis_text.lstrip("-").isdigit():
            raise InputSpecError(f"bad axis {item!r} in dynamic spec {text!r}",
                                 hint="write AXIS=DIMNAME, e.g. 0=batch")
        if int(axis_text) in axes:
            raise InputSpecError(f"axis {int(axis_text)} is given twice in dynamic spec {text!r}",
                                 hint="name each axis once, e.g. --dynamic x:0=batch,1=seq")
        axes[int(axis_text)] = dim_name
    return {name: axes}


def make_tensor(shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """A random tensor with values in a sensible range for ``dtype``."""
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(0, 8, shape, generator=generator).to(dtype)


def to_input_sets(value: Any, origin: str) -> list[InputSet]:
    """Normalise what an inputs function or ``example_inputs()`` returned into input sets.

    Accepted: a tensor, a tuple of positional inputs, a dict of keyword inputs, an
    :class:`InputSet` (it keeps its name), or a list of those (several input sets; the first is
    the export example).
    """
    if isinstance(value, list):
        if not value:
            raise InputSpecError(f"{origin} returned an empty list", hint="return at least one input set")
        return [_one_input_set(v, origin) for v in value]  # the conversion names the unnamed extra sets user-N
    return [_one_input_set(value, origin)]


def _one_input_set(value: Any, origin: str) -> InputSet:
    if isinstance(value, InputSet):
        return dataclasses.replace(value, kwargs=dict(value.kwargs))
    if isinstance(value, torch.Tensor):
        return InputSet((value,))
    if isinstance(value, tuple):
        return InputSet(value)
    if isinstance(value, dict):
        return InputSet((), dict(value))
    raise InputSpecError(
        f"{origin} returned a {type(value).__name__}",
        hint="return a tuple of inputs, a dict of keyword inputs, or a list of those",
    )


def number_as_tensor(value: bool | int | float) -> torch.Tensor:
    """A Python number as the 0-d tensor an exported model returns for it (int64, float32, bool).

    Example::

        >>> number_as_tensor(3).dtype, number_as_tensor(2.5).dtype, number_as_tensor(True).dtype
        (torch.int64, torch.float32, torch.bool)
    """
    dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.float32
    return torch.tensor(value, dtype=dtype)
