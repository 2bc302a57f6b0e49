"""The state a converted loop carries, from the loop's facts (shared by ``while`` and ``for``).

Loop state = names assigned (or written in place) in the body that the loop test, the next
iteration or the code after the loop reads, plus lists appended to and the break flag.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def f(x, n):
    ...     i = 0
    ...     while i < n:
    ...         tmp = x * 2
    ...         x = tmp + 1
    ...         i = i + 1
    ...     return x
    >>> convert_function(f).infos[0].names         # tmp is not carried
    ('i', 'x')
"""

from __future__ import annotations

from fxport.controlflow import facts as facts_
from fxport.controlflow.context import Context, state_names
from fxport.controlflow.converters.return_statements import RETVAL
from fxport.controlflow.converters.state_targets import guarded_effects
from fxport.controlflow.operators.info import StatementInfo


def loop_info(ctx: Context, facts: facts_.LoopFacts, defined: set[str], *, target_bound: bool = False) -> StatementInfo:
    """The StatementInfo of a loop; ``target_bound``: the for target is loop state (its value
    after the loop is read), bound from ``_fx_item`` in the body."""
    node, kind = facts.node, facts.kind
    body_writes = set(facts.writes) | (set(facts.target_writes) if target_bound else set())
    modified = state_names(body_writes) - (set() if target_bound else set(facts.target_writes))
    ctx.check_no_outer_writes(kind, node, modified)
    appended = set(facts.appended) - modified
    needed = set(facts.head_reads) | set(facts.body_live_in) | set(facts.live_after)
    # a local written in place in the body (out[i] = h, out.index_add_(...)) is loop state
    written_in_place = (state_names(facts.written_in_place) & defined & ctx.local_names) - appended - {"self"}
    modified |= written_in_place & needed
    state = set(modified & needed) | appended
    if facts.break_flag:
        state.add(facts.break_flag)
    state = tuple(sorted(state))
    mutated = set(facts.written_in_place) & set(state)
    free = ctx.free_locals(set(facts.reads), body_writes | set(facts.head_writes), defined)
    free -= set(state) | set(facts.target_writes)
    effects_local = set(state) | body_writes
    guarded = guarded_effects(node.body)  # decided where they run (state_targets.py)
    return StatementInfo(
        kind,
        ctx.location(node),
        state,
        params=state + tuple(sorted(free)),
        mutated=tuple(sorted(mutated - appended)),
        appended=tuple(sorted(appended)),
        exact_appends=tuple(sorted(facts.exact_appends & appended)),
        side_effects=tuple(e.what for e in facts.side_effects
                          if e.applies(effects_local, allow_append=True) and e.what not in guarded),
        break_flag=facts.break_flag,
        retval=RETVAL if RETVAL in state else None,
        written_first=tuple(sorted(set(state) - set(facts.body_live_in) - set(facts.head_reads) - appended)),
    )
