"""The converters, one per construct, in the order the engine applies them.

To add a construct: write a module here with a subclass of one of the three kinds in
:mod:`~fxport.controlflow.converters.base` (canonicalisation, expression, statement), add it to
:data:`CONVERTERS` at the place its stage and order want, and add one test. The engine
(:mod:`fxport.controlflow.engine`) needs no change: it applies the canonicalisations in list
order, computes the facts, applies the expression converters in list order, refreshes the
facts, then walks the statements dispatching each to the statement converter of its type.

Example::

    >>> [(c.__name__, c.stage) for c in CONVERTERS][:3]
    [('OutArguments', 'canonicalize'), ('RaisingBranches', 'canonicalize'), ('ReturnsInLoops', 'canonicalize')]
"""

from fxport.controlflow.converters.aliases import Aliases
from fxport.controlflow.converters.assert_statements import AssertConverter
from fxport.controlflow.converters.call_trees import CallConverter
from fxport.controlflow.converters.conditional_expressions import IfExpConverter
from fxport.controlflow.converters.deferred_appends import AppendsAfterWrites
from fxport.controlflow.converters.delete_statements import DeletedInBlocks
from fxport.controlflow.converters.for_statements import ForConverter
from fxport.controlflow.converters.if_statements import IfConverter
from fxport.controlflow.converters.list_extensions import ListExtensions
from fxport.controlflow.converters.list_stacks import ListStacks
from fxport.controlflow.converters.logical_expressions import LogicalConverter
from fxport.controlflow.converters.loop_exits import BreakTails, LoopExits
from fxport.controlflow.converters.none_checks import NoneChecks
from fxport.controlflow.converters.number_lists import NumberLists
from fxport.controlflow.converters.out_arguments import OutArguments
from fxport.controlflow.converters.raising_branches import RaisingBranches
from fxport.controlflow.converters.repeated_lists import RepeatedLists
from fxport.controlflow.converters.return_statements import ReturnsInIfs, ReturnsInLoops
from fxport.controlflow.converters.set_loops import SetLoops
from fxport.controlflow.converters.size_comparisons import SizeComparisons
from fxport.controlflow.converters.slices import SliceConverter
from fxport.controlflow.converters.try_statements import TryStatements
from fxport.controlflow.converters.state_targets import NestedFunctionCalls, StateTargets
from fxport.controlflow.converters.while_statements import WhileConverter
from fxport.controlflow.converters.with_statements import WithStatements

#: every converter, in order
CONVERTERS: list[type] = [
    OutArguments,  # f(..., out=t) / a dead t.resize_as_(u) on a local nothing else holds → t = f(...) (first: others see assignments)
    RaisingBranches,  # if c: raise E → _fx.asserts.raise_if (a check, not a side effect; before the exits)
    ReturnsInLoops,  # return in a loop → flags + break (so before break/continue)
    BreakTails,  # a while True's break path rebinding a list it grows → after the loop (before +=[..] → append)
    ListExtensions,  # xs += [a] on a list → xs.append(a) (before the exits: the appends sit where += sat)
    AppendsAfterWrites,  # xs.append(v); v[m] = inf in a loop body → the append after the write (before the exits)
    ListStacks,  # a list only pushed, popped, measured and tested → _fx.lists.stacks (a tensor of its scalars; after the moved appends)
    SetLoops,  # for v in set(xs) whose body cannot tell the order → _fx.lists.distinct.iterated (before the exits)
    LoopExits,  # break/continue → flags
    TryStatements,  # try/finally in converted code → inlined (after the exit flags); except → refused
    WithStatements,  # harmless with around control flow → inlined; others refused / checked when traced
    ReturnsInIfs,  # return in an if → one tail return (copies flagged loops with their flags)
    NestedFunctionCalls,  # a nested function used in an if/while/for → bound to the construct's locals
    NumberLists,  # xs = [0] * n used only by item reads/writes and len() → _fx.lists.number_lists (a tensor at a dynamic n)
    Aliases,  # x = y, then a statement rebinding one on some paths, then an in-place write → a carried flag
    StateTargets,  # writes into attributes, entries and locals written in place → carried locals, written back
    NoneChecks,  # x is None → _fx.optional.is_none(x), a tensor for a value None on some paths
    IfExpConverter,  # a if c else b → _fx.ifexp
    LogicalConverter,  # and/or/not, chained comparisons → _fx.and_/or_/not_
    SizeComparisons,  # x.shape[0] > 0 in an if/while test → _fx.sizes.compare (open over the range: a tensor)
    SliceConverter,  # x[i] / x[i] = v with a computed index → _fx.getitem/setitem
    RepeatedLists,  # torch.stack([e] * n) → _fx.lists.repeated.repeat (tiled at a dynamic n; before the calls)
    CallConverter,  # f(x) → _fx.call(f)(x); torch.stack/cat, int()
    IfConverter,  # if → _fx.if_stmt
    WhileConverter,  # while → _fx.while_stmt
    ForConverter,  # for → _fx.for_stmt
    AssertConverter,  # assert → _fx.asserts.assert_stmt (a tensor condition is refused)
    DeletedInBlocks,  # del x of a name only an outlined block binds → x left out (after the outlining)
]

__all__ = ["CONVERTERS"]
