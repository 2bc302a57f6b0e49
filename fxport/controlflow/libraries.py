"""Library code converted for one capture: a function of an installed package (transformers'
modeling code, say) where torch.export stopped on data-dependent control flow.

fxport converts the user's own files ahead of capture. When capture still stops inside an
installed package, the capture stage hands the failing frame to :class:`LibraryConversions`:
it finds the function running there, converts it like user code (the same converters, the
library's file and line numbers), and installs the converted function where calls look it up
— the module global, the class attribute, or the closure cell of a wrapper that calls it
(transformers' ``@use_experts_implementation`` keeps the experts' ``forward`` in one) — until
the block ends. Then capture is retried. Everything is put back on exit, also on error.

Example::

    >>> records = []
    >>> with converting_libraries(records) as libraries:
    ...     libraries.count
    0
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import types
from typing import Any, Callable, Iterable, Iterator, NoReturn

from fxport.controlflow import operators
from fxport.controlflow.install import _build
from fxport.errors import CaptureError, ControlFlowError, SourceLocation
from fxport.common.frames import package_relative
from fxport.report.result import AppliedRewrite

#: the most library functions one capture converts (each costs one more export)
MAX_LIBRARY_FUNCTIONS = 8

#: the rewrites table's name for a converted library function
RULE = "library-function"


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a call finds a function: a module global, a class attribute or a closure cell.

    ``wrap`` re-applies ``staticmethod``/``classmethod`` around a class attribute's function.
    """

    kind: str  # "global", "attribute" or "cell"
    owner: Any  # the module's dict, the class, or the cell
    name: str
    wrap: Callable | None = None

    def get(self) -> Any:
        if self.kind == "global":
            return self.owner[self.name]
        if self.kind == "attribute":
            return vars(self.owner)[self.name]
        return self.owner.cell_contents

    def set(self, value: Any) -> None:
        if self.kind == "global":
            self.owner[self.name] = value
        elif self.kind == "attribute":
            setattr(self.owner, self.name, value)
        else:
            self.owner.cell_contents = value

    def describe(self) -> str:
        if self.kind == "global":
            return f"global {self.owner.get('__name__', '?')}.{self.name}"
        if self.kind == "attribute":
            return f"attribute {self.owner.__qualname__}.{self.name}"
        return f"closure cell of {self.name}"


@dataclasses.dataclass
class LibraryFunction:
    """A converted library function and the places it is installed at."""

    function: types.FunctionType
    converted: Callable
    places: list[Place]

    @property
    def key(self) -> tuple[str, str, int]:
        code = self.function.__code__
        return (self.function.__module__, self.function.__qualname__, code.co_firstlineno)


#: (module, qualname, first line) → what a capture of this process converted; the coverage stage
#: installs the same functions again to observe their statements (:func:`installed_for`)
_KNOWN: dict[tuple[str, str, int], LibraryFunction] = {}
#: library function → its converted version, so a second capture does not convert it again
_CONVERTED_LIBRARY: dict[types.FunctionType, Callable] = {}


@contextlib.contextmanager
def installed(functions: Iterable[LibraryFunction]) -> Iterator[None]:
    """Install each converted function at its places (and for ``_fx.call`` sites) while the block
    runs; every place holds its original object again afterwards, also on error.

    Example::

        >>> with installed([]):
        ...     pass
    """
    undo: list[Callable[[], None]] = []
    try:
        for library in functions:
            for place in library.places:
                original = place.get()
                place.set(place.wrap(library.converted) if place.wrap else library.converted)
                undo.append(lambda place=place, original=original: place.set(original))
            undo.append(_replace_call_target(library.function, library.converted))
        yield
    finally:
        for step in reversed(undo):
            step()


def _replace_call_target(function: Callable, converted: Callable) -> Callable[[], None]:
    """Converted user code calls ``function`` through ``_fx.call``: make that find ``converted``."""
    missing = object()
    previous = operators.CONVERTED.get(function, missing)
    operators.CONVERTED[function] = converted

    def restore() -> None:
        if previous is missing:
            operators.CONVERTED.pop(function, None)
        else:
            operators.CONVERTED[function] = previous

    return restore


@contextlib.contextmanager
def installed_for(records: Iterable[AppliedRewrite]) -> Iterator[None]:
    """Install again the library functions that ``records`` say a capture converted (the
    coverage stage runs the model's converted code eagerly and needs them too)."""
    wanted = [_KNOWN.get(_record_key(record)) for record in records if record.rule == RULE]
    with installed([library for library in wanted if library is not None]):
        yield


def _record_key(record: AppliedRewrite) -> tuple[str, str, int]:
    data = record.data
    return (data.get("module", ""), data.get("function", ""), data.get("first_line", 0))


class LibraryConversions:
    """The library functions converted during one capture (see :func:`converting_libraries`)."""

    def __init__(self, records: list[AppliedRewrite], stack: contextlib.ExitStack, limit: int):
        self.records, self.stack, self.limit = records, stack, limit
        self.functions: list[LibraryFunction] = []
        self.codes: set[types.CodeType] = set()  # code objects of converted functions, nested ones too

    @property
    def count(self) -> int:
        return len(self.functions)

    def convert(self, frame: types.FrameType, lineno: int, user_where: SourceLocation | None) -> None:
        """Convert and install the function running in ``frame`` (where capture stopped at
        ``lineno``) and record it; a one-line CaptureError when that cannot help."""
        at = f"{package_relative(frame.f_code.co_filename) or frame.f_code.co_filename}:{lineno}"
        function, places = (None, []) if frame.f_code in self.codes else find_function(frame)
        why = self._why_not(frame, function, places, at)
        if why is not None:
            _refuse(why, user_where)
        try:
            self._install(function, places)
        except ControlFlowError as error:  # the converter's refusal, said as a library's
            _refuse(f"at {at} cannot be converted: {error.what}", user_where)
        location = SourceLocation(frame.f_code.co_filename, lineno, function.__qualname__)
        self.records.append(AppliedRewrite(
            rule=RULE, tier="control-flow", location=location,
            detail=f"converted library code: {function.__qualname__} at {location}",
            data={"function": function.__qualname__, "module": function.__module__,
                  "first_line": function.__code__.co_firstlineno,
                  "installed_at": [place.describe() for place in places]}))

    def _why_not(self, frame: types.FrameType, function: types.FunctionType | None, places: list[Place],
                 at: str) -> str | None:
        """Why converting ``function`` cannot get capture past ``frame``; None when it may."""
        if frame.f_code in self.codes:
            return (f"remains in {frame.f_code.co_name} after fxport converted that library function at {at} "
                    "(a construct the conversion does not cover, e.g. a number read from a tensor used as a "
                    "Python number)")
        if function is None or not _convertible(function):
            return (f"is in {frame.f_code.co_name} at {at}, which fxport cannot convert (not a function it can "
                    "find: a lambda, comprehension or generator)")
        if any(library.function is function for library in self.functions) or not places:
            return (f"is in {function.__qualname__} at {at}, which is called through a reference fxport cannot "
                    "replace (not a module global, class attribute or wrapper's closure)")
        if self.count >= self.limit:
            return (f"is in {function.__qualname__} at {at}, one library function more than the {self.limit} "
                    "fxport converts for one capture")
        return None

    def _install(self, function: types.FunctionType, places: list[Place]) -> None:
        converted = _CONVERTED_LIBRARY.get(function)
        if converted is None:
            converted = _CONVERTED_LIBRARY[function] = _build(function)
        library = LibraryFunction(function, converted, places)
        self.stack.enter_context(installed([library]))
        self.functions.append(library)
        self.codes.update(_nested_codes(converted.__code__))
        _KNOWN[library.key] = library


@contextlib.contextmanager
def converting_libraries(records: list[AppliedRewrite], limit: int | None = None) -> Iterator[LibraryConversions]:
    """Library functions converted while the block runs (:meth:`LibraryConversions.convert`),
    at most ``limit`` (:data:`MAX_LIBRARY_FUNCTIONS`); ``records`` receives one
    ``library-function`` record per function. Everything is restored on exit."""
    with contextlib.ExitStack() as stack:
        yield LibraryConversions(records, stack, MAX_LIBRARY_FUNCTIONS if limit is None else limit)


def _refuse(why: str, user_where: SourceLocation | None) -> NoReturn:
    raise CaptureError(
        f"data-dependent control flow in library code {why}",
        where=user_where,
        hint="pick an implementation of the library without it (transformers: config "
        "experts_implementation / attn_implementation), or patch that function with a rule (docs/rules.md)",
    )


def find_function(frame: types.FrameType) -> tuple[types.FunctionType | None, list[Place]]:
    """The function whose code runs in ``frame`` and the places calls find it at.

    Looked for in the module globals of ``frame`` and of the frames that called it, the classes
    those modules define, the classes of ``self``/``cls`` there, and the closures of the
    functions found (one wrapper level at a time, a few deep).
    """
    candidates = list(_candidates(frame))
    found = next((value for value, _ in candidates if value.__code__ is frame.f_code), None)
    places: dict[tuple, Place] = {}
    for value, place in candidates:
        if found is not None and value is found:
            places.setdefault((place.kind, id(place.owner), place.name), place)
    return found, list(places.values())


def _candidates(frame: types.FrameType) -> Iterator[tuple[types.FunctionType, Place]]:
    modules, classes = _roots(frame)
    seen: set[int] = set()
    for namespace in modules:
        for name, value in list(namespace.items()):
            yield from _functions_in(value, Place("global", namespace, name), seen)
    for cls in classes:
        for name, value in list(vars(cls).items()):
            wrap = type(value) if isinstance(value, (staticmethod, classmethod)) else None
            yield from _functions_in(value.__func__ if wrap else value, Place("attribute", cls, name, wrap), seen)


def _roots(frame: types.FrameType) -> tuple[list[dict], list[type]]:
    """Module namespaces and classes to search, innermost frame first."""
    modules: dict[int, dict] = {}
    classes: dict[int, type] = {}
    current: types.FrameType | None = frame
    while current is not None:
        namespace = current.f_globals
        if id(namespace) not in modules:
            modules[id(namespace)] = namespace
            for value in list(namespace.values()):
                if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
                    classes.setdefault(id(value), value)
        for name in ("self", "cls"):
            owner = current.f_locals.get(name) if name in current.f_code.co_varnames else None
            owner_type = owner if isinstance(owner, type) else type(owner) if owner is not None else None
            for cls in getattr(owner_type, "__mro__", ()):
                if cls is not object:
                    classes.setdefault(id(cls), cls)
        current = current.f_back
    return list(modules.values()), list(classes.values())


def _functions_in(value: Any, place: Place, seen: set[int], depth: int = 0) -> Iterator[tuple[types.FunctionType, Place]]:
    """``value`` when it is a function, then the functions its closure holds (wrappers)."""
    if not isinstance(value, types.FunctionType):
        return
    yield value, place
    if depth >= 4 or id(value) in seen:
        return
    seen.add(id(value))
    for cell in value.__closure__ or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        yield from _functions_in(inner, Place("cell", cell, value.__qualname__), seen, depth + 1)


def _convertible(function: types.FunctionType) -> bool:
    """A def function: not a lambda, generator or coroutine."""
    flags = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
    return function.__name__ != "<lambda>" and not function.__code__.co_flags & flags


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)
