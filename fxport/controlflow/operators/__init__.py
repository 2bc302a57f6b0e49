"""Trace-time operators called by converted code (``_fx.if_stmt`` and friends).

Converted code refers to this package as ``_fx``: it is the one namespace generated code
needs. Dispatch happens when the code runs, not when it is converted: a predicate that is a
Python bool (or a tensor outside of export) runs as plain Python; a tensor or SymBool
predicate seen while exporting becomes ``torch.where`` / ``torch.cond`` / ``while_loop``.

Every module of the package is imported with it, so generated code may name a module's
function (``_fx.targets.load``, ``_fx.asserts.assert_stmt``) without the converter importing
that module for its side effect; the functions below are also exported by name.

The package imports nothing from the compiler side (analysis, canonicalisation, converters):
what it needs to know about a statement arrives as a :class:`StatementInfo`, and the
converter for call sites registers itself with :func:`use_converter`.

=================  ===============================================================
module             what it does
=================  ===============================================================
``state``          session (strategy, disabled rules, records), coverage, probing
``values``         value predicates (traced? symbolic?) and small tensor helpers
``failures``       refusals, also raised from inside bodies dynamo traces
``logical``        ``and_``/``or_``/``not_``/``in_``
``conditionals``   ``if_stmt``/``ifexp``: Python, ``where`` or ``cond``
``size_one``       ``if x.shape[1] == 1:``: that branch sees the size as a static 1
``loops/``         loops: ``statements`` (``while_stmt``/``for_stmt``/``range_``/``int_``),
                   ``while_loop`` (a data-dependent loop → ``while_loop``), ``growing`` (a
                   loop whose carried state grows → one ``fxport::grown_loop`` op call),
                   ``grown_inputs`` (what such a body reads), ``peeling`` (a first trip run
                   before the loop)
``lists/``         lists: ``appender`` (grown in a data-dependent loop; ``stack``/``cat``),
                   ``carried`` (how a loop carries each, what it is after), ``selected``
                   (appended under a tensor condition outside a converted loop)
``calls``          ``call``: the converted version of a user function
``indexing``       ``getitem``/``setitem`` with a traced index
``numbers``        ``float_``/``tolist``/``data_``/``numpy_``, ``min_``/``max_``/``math_``/...: numbers read
                   from tensors in converted code
``contexts``       ``context``: a context manager in a body that may be traced
``info``           :class:`StatementInfo`, what the converter says about a statement
``containers``     library objects (a model's cache) carried as their tensors; the hook for them
``asserts``        ``assert_stmt``: Python's assert, refused on a tensor being exported
``aliases``        ``same``/``follow``: two names for one tensor through converted statements
``sizes``          ``compare``: a size comparison torch decides for sizes ≥ 2 only → a tensor
``targets``        attributes, buffers, dict/list entries written in converted code
``rule_names``     :data:`CONVERSIONS`, the conversions by (construct, lowering)
=================  ===============================================================

Example::

    >>> from fxport.controlflow import operators as _fx
    >>> _fx.if_stmt(True, lambda x: (x + 1,), lambda x: (x - 1,), (1,), None)
    (2,)
"""

import importlib as _importlib
import pkgutil as _pkgutil

from fxport.controlflow.operators.lists.appender import Appender, cat, len_, stack
from fxport.controlflow.operators.calls import (
    CONVERTED,
    all_,
    allclose,
    allclose_method,
    any_,
    as_tensor_,
    call,
    equal,
    equal_method,
    new_full_,
    new_tensor_,
    print_,
    legacy_tensor_,
    tensor_,
    use_converter,
)
from fxport.controlflow.operators.conditionals import if_stmt, ifexp
from fxport.controlflow.operators.contexts import context
from fxport.controlflow.operators.failures import find_error
from fxport.controlflow.operators.indexing import getitem, narrow, setitem, slice_
from fxport.controlflow.operators.info import FunctionSource, StatementInfo, statement
from fxport.controlflow.operators.logical import and_, in_, not_, or_
from fxport.controlflow.operators.loops.statements import (
    TensorRange,
    for_stmt,
    int_,
    item_,
    range_,
    reversed_,
    reversed_range,
    trip_limit,
    while_stmt,
)
from fxport.controlflow.operators.numbers import (
    bool_,
    data_,
    divmod_,
    float_,
    math_,
    max_,
    min_,
    numpy_,
    round_,
    tolist,
    without_numpy,
)
from fxport.controlflow.operators.rule_names import CONTROL_FLOW_RULES, CONVERSIONS, rule_name
from fxport.controlflow.operators.state import coverage, probing, records_rolled_back_on_failure, session
from fxport.controlflow.operators.values import Undefined, undefined

#: every operator module, imported (those in ``loops/`` and ``lists/`` too): ``_fx.<module>.<function>``
#: resolves for each top-level one
MODULES = tuple(_importlib.import_module(_found.name)
                for _found in _pkgutil.walk_packages(__path__, prefix=f"{__name__}."))

__all__ = [
    "CONTROL_FLOW_RULES",
    "CONVERSIONS",
    "MODULES",
    "CONVERTED",
    "Appender",
    "FunctionSource",
    "StatementInfo",
    "TensorRange",
    "Undefined",
    "all_",
    "allclose",
    "allclose_method",
    "and_",
    "any_",
    "as_tensor_",
    "bool_",
    "call",
    "cat",
    "context",
    "coverage",
    "data_",
    "divmod_",
    "equal",
    "equal_method",
    "find_error",
    "float_",
    "for_stmt",
    "getitem",
    "narrow",
    "if_stmt",
    "ifexp",
    "int_",
    "item_",
    "len_",
    "math_",
    "max_",
    "min_",
    "new_full_",
    "new_tensor_",
    "in_",
    "not_",
    "numpy_",
    "or_",
    "print_",
    "probing",
    "range_",
    "reversed_",
    "reversed_range",
    "round_",
    "rule_name",
    "records_rolled_back_on_failure",
    "session",
    "setitem",
    "slice_",
    "legacy_tensor_",
    "tensor_",
    "stack",
    "statement",
    "tolist",
    "without_numpy",
    "trip_limit",
    "undefined",
    "use_converter",
    "while_stmt",
]
