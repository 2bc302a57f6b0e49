"""Op translation rules: an ONNX implementation for an aten op or a custom op.

An op rule is a Python function written with onnxscript ops (``from onnxscript import opset18
as op``). The dynamo exporter calls it while lowering each matching node: tensor arguments
arrive as symbolic ONNX values (with ``.shape`` and ``.dtype``), non-tensor arguments (``int``,
``float``, ``bool``, ``int[]``...) as plain Python values, so Python ``if`` on them is fine.
The function's parameters must be the op schema's arguments, same names, same order; fxport
checks that at registration. Registering an op also keeps the exporter from decomposing it
(``aten::erfinv`` would otherwise turn into ``prims::erf_inv`` first and never reach the rule).

Example::

    >>> import fxport
    >>> from onnxscript import opset18 as op
    >>> @fxport.onnx_op("aten::hypot")
    ... def hypot(self, other):
    ...     '''hypot(a, b) = sqrt(a^2 + b^2), scaled to avoid overflow.'''
    ...     return op.Sqrt(op.Add(op.Mul(self, self), op.Mul(other, other)))
    >>> [r.target for r in fxport.rules.rules_of(hypot)]
    ['aten::hypot']
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable, Optional, Sequence

import torch

from fxport.errors import RuleError
from fxport.rules.base import Rule, Scope, attach, definition_site, first_doc_line, make_scope


@dataclasses.dataclass
class OpRule(Rule):
    """Translate one op overload with an onnxscript function.

    Attributes:
        op: the ``torch._ops.OpOverload`` translated.
        function: the function handed to the exporter (parameters typed from the schema).
        user_function: the function as the user wrote it.
    """

    tier: typing.ClassVar[str] = "op"

    op: Any = None
    function: Callable | None = None
    user_function: Callable | None = None

    @property
    def fx_target(self) -> str:
        """How the op appears in an FX node's target, e.g. ``torch.ops.aten.erfinv.default``."""
        return f"torch.ops.{self.op.namespace}.{self.op._opname}.{self.op._overloadname}"


def onnx_op(
    target: str | Any,
    *,
    name: str | None = None,
    priority: int = 0,
    scope: Scope | None = None,
    opset: int | tuple[int | None, int | None] | None = None,
    devices: Sequence[str] | str | None = None,
    torch_version: str | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: translate ``target`` to ONNX with the decorated onnxscript function.

    Args:
        target: ``"aten::erfinv"``, ``"aten::median.dim"`` (an overload), ``"mylib::my_add"``,
            or an op object (``torch.ops.mylib.my_add.default``; a packet means ``.default``).
        name: the rule's name; defaults to the op's qualified name (``aten::median.dim``).
        priority: the higher wins when two enabled rules translate the same op.
        scope / opset / devices / torch_version: where the rule applies (see ``Scope``).

    Raises:
        RuleError: the op does not exist, or the function's parameters do not fit its schema.

    Example::

        @fxport.onnx_op("aten::erfinv", opset=18)
        def erfinv(self):
            '''Inverse error function.'''
            ...
    """

    def decorate(function: Callable) -> Callable:
        overload = resolve_op(target)
        check_signature(function, overload)
        rule = OpRule(
            name=name or op_display_name(overload),
            target=op_display_name(overload),
            doc=first_doc_line(function),
            scope=make_scope(scope, opset=opset, devices=devices, torch=torch_version),
            priority=priority,
            defined_at=definition_site(function),
            op=overload,
            function=typed_for_exporter(function, overload),
            user_function=function,
        )
        return attach(function, rule)

    return decorate


def op_display_name(overload: Any) -> str:
    """``aten::erfinv`` for a default overload, ``aten::median.dim`` otherwise."""
    base = f"{overload.namespace}::{overload._opname}"
    return base if overload._overloadname == "default" else f"{base}.{overload._overloadname}"


def resolve_op(target: str | Any) -> Any:
    """The ``OpOverload`` that ``target`` names; RuleError when there is none."""
    if isinstance(target, torch._ops.OpOverload):
        return target
    if isinstance(target, torch._ops.OpOverloadPacket):
        return _default_overload(target, str(target))
    if not isinstance(target, str):
        raise RuleError(
            f"onnx_op target {target!r} is neither an op name nor a torch op",
            hint="pass 'namespace::op[.overload]' or torch.ops.namespace.op.overload",
        )
    spelled = target.strip()
    if "::" not in spelled:  # also accept "aten.erfinv" / "aten.median.dim"
        spelled = spelled.replace(".", "::", 1)
    namespace, sep, rest = spelled.partition("::")
    if not sep or not rest:
        raise RuleError(f"onnx_op target {target!r} is not 'namespace::op[.overload]'")
    opname, _, overload_name = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), opname)
    except (AttributeError, RuntimeError):
        raise RuleError(
            f"onnx_op target {target!r}: no op {namespace}::{opname} is registered",
            hint="check the spelling, or import the library that defines the custom op first",
        ) from None
    if not overload_name:
        return _default_overload(packet, spelled)
    try:
        return getattr(packet, overload_name)
    except (AttributeError, RuntimeError):
        raise RuleError(
            f"onnx_op target {target!r}: {namespace}::{opname} has no overload "
            f"{overload_name!r}",
            hint="overloads: " + ", ".join(packet.overloads()),
        ) from None


def _default_overload(packet: Any, spelled: str) -> Any:
    if "default" in packet.overloads():
        return packet.default
    raise RuleError(
        f"onnx_op target {spelled!r} has no default overload",
        hint="name one: " + ", ".join(f"{spelled}.{o}" for o in packet.overloads()),
    )


def check_signature(function: Callable, overload: Any) -> None:
    """RuleError unless ``function``'s parameters are the schema's arguments, in order."""
    schema = overload._schema
    expected = [arg.name for arg in schema.arguments]
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        raise RuleError(f"onnx_op rule for {op_display_name(overload)}: not a function") from None
    got = [p.name for p in params]
    where = definition_site(function)
    if got == expected:
        return
    for index, (have, want) in enumerate(zip(got, expected)):
        if have != want:
            raise RuleError(
                f"onnx_op rule {function.__name__!r} for {op_display_name(overload)}: "
                f"parameter {index + 1} is {have!r} but the schema's is {want!r}",
                where=where,
                hint=f"use the schema's parameters: {schema}",
            )
    if len(got) < len(expected):
        missing = ", ".join(expected[len(got):])
        raise RuleError(
            f"onnx_op rule {function.__name__!r} for {op_display_name(overload)}: "
            f"missing parameter(s) {missing}",
            where=where,
            hint=f"use the schema's parameters: {schema}",
        )
    extra = ", ".join(got[len(expected):])
    raise RuleError(
        f"onnx_op rule {function.__name__!r} for {op_display_name(overload)}: "
        f"parameter(s) {extra} are not in the schema",
        where=where,
        hint=f"use the schema's parameters: {schema}",
    )


_SCALAR_TYPES = {"int": int, "SymInt": int, "float": float, "bool": bool, "str": str,
                 "ScalarType": int, "Layout": int, "MemoryFormat": int}


def python_type_of(schema_type: Any) -> Any | None:
    """The Python annotation the exporter needs to pass an argument as a Python value.

    None for tensors (and anything else that should arrive as an ONNX value).
    """
    text = str(schema_type)
    optional = text.endswith("?")
    text = text.rstrip("?")
    if text in _SCALAR_TYPES:
        found: Any = _SCALAR_TYPES[text]
    elif text.endswith("[]") and text[:-2] in ("int", "SymInt", "float", "bool"):
        found = Sequence[_SCALAR_TYPES[text[:-2]]]
    elif text.startswith("int[") or text.startswith("SymInt["):
        found = Sequence[int]
    else:
        return None
    return Optional[found] if optional else found


def typed_for_exporter(function: Callable, overload: Any) -> Callable:
    """Wrap ``function`` so non-tensor schema arguments arrive as Python values.

    The exporter treats unannotated parameters as ONNX inputs; annotating ``k: int`` makes it
    pass ``k`` as a Python int. Annotations the user wrote are kept.
    """
    hints = typing.get_type_hints(function)

    @functools.wraps(function)
    def translation(*args, **kwargs):
        return function(*args, **kwargs)

    annotations = {}
    for arg in overload._schema.arguments:
        wanted = hints.get(arg.name) or python_type_of(arg.type)
        if wanted is not None:
            annotations[arg.name] = wanted
    translation.__annotations__ = annotations
    del translation.__wrapped__  # the exporter must read our annotations, not the user's
    translation.__signature__ = inspect.signature(function).replace(
        parameters=[
            p.replace(annotation=annotations.get(p.name, inspect.Parameter.empty))
            for p in inspect.signature(function).parameters.values()
        ],
        return_annotation=inspect.Signature.empty,
    )
    return translation


def custom_node(domain: str, op_type: str, *inputs: Any, outputs: int = 1, version: int = 1,
                **attributes: Any) -> Any:
    """Emit one node of a custom ONNX domain from inside an op rule (no standard op matches).

    fxport registers a minimal schema for ``domain::op_type`` (so onnxscript and the ONNX
    checker accept it); a runtime must implement the op to run the model — stock ONNX Runtime
    cannot, and fxport's verification reports that.

    Example::

        @fxport.onnx_op("mylib::deform_conv2d")
        def deform_conv2d(input, weight, offset, bias, stride: int, padding: int, dilation: int):
            return fxport.rules.custom_node("custom", "deform_conv2d", input, weight, offset,
                                            bias, stride=stride, padding=padding,
                                            dilation=dilation)
    """
    from onnxscript import values

    schema = _custom_schema(domain, op_type, version, len(inputs), outputs, attributes)
    node = values.Op(values.Opset(domain, version), op_type, schema)
    return node(*inputs, **attributes)


def _custom_schema(domain: str, op_type: str, version: int, n_inputs: int, n_outputs: int,
                   attributes: dict[str, Any]):
    import onnx.defs as defs

    if defs.has(op_type, version, domain):
        return defs.get_schema(op_type, version, domain)
    Param = defs.OpSchema.FormalParameter
    kinds = {int: defs.OpSchema.AttrType.INT, float: defs.OpSchema.AttrType.FLOAT,
             str: defs.OpSchema.AttrType.STRING, bool: defs.OpSchema.AttrType.INT}
    schema = defs.OpSchema(
        op_type, domain, version,
        inputs=[Param(f"input_{i}", "T") for i in range(n_inputs)],
        outputs=[Param(f"output_{i}", "T") for i in range(n_outputs)],
        type_constraints=[("T", [f"tensor({t})" for t in ("float", "double", "float16",
                                                           "int64", "int32", "bool")], "")],
        attributes=[defs.OpSchema.Attribute(name, kinds.get(type(value),
                                                            defs.OpSchema.AttrType.INTS), "")
                    for name, value in attributes.items()],
    )
    defs.register_schema(schema)
    return schema
