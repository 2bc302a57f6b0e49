"""Static analysis and canonicalisation: the facts the converters rely on."""

import ast
import re
import textwrap

from fxport.controlflow import analysis
from fxport.controlflow.converters.loop_exits import canonicalize_loop_exits
from fxport.controlflow.converters.return_statements import canonicalize_returns, canonicalize_returns_in_loops


def _function(source: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


def test_reads_and_writes_ignore_nested_function_bodies_but_see_free_names():
    stmt = ast.parse("y = f(lambda t: t + z) + x[i]").body[0]
    assert analysis.writes(stmt) == {"y"}
    assert analysis.reads(stmt) == {"f", "z", "x", "i"}


def test_mutated_sees_item_assignment_inplace_calls_and_augmented_assignment():
    block = ast.parse("buf[i] = v\nh.add_(1)\nc += 1\nd.attr = 2\ne = e + 1").body
    assert analysis.mutated(block) == {"buf", "h", "c", "d"}


def test_liveness_excludes_temporaries_and_dead_values():
    fdef = _function(
        """
        def f(x):
            if x:
                tmp = x * 2
                y = tmp + 1
                dead = 3
            else:
                y = x
            return y
        """
    )
    assert analysis.liveness(fdef.body).live_out[fdef.body[0]] == {"y"}


def test_liveness_of_a_loop_includes_values_read_in_the_next_iteration():
    fdef = _function(
        """
        def f(x, n):
            h = x
            for i in range(n):
                t = h * 2
                h = t + i
            return x
        """
    )
    loop = fdef.body[1]
    body_live_in = analysis.liveness(fdef.body).body_live_in[loop]
    assert "h" in body_live_in and "t" not in body_live_in


def test_returns_in_ifs_become_a_single_tail_return():
    fdef = _function(
        """
        def f(x):
            if x > 0:
                return 1
            y = 2
            return y
        """
    )
    canonicalize_returns(fdef)
    assert ast.unparse(fdef) == textwrap.dedent(
        """\
        def f(x):
            if x > 0:
                _fx_retval = 1
            else:
                y = 2
                _fx_retval = y
            return _fx_retval"""
    )


def test_break_and_continue_become_flags_that_guard_the_rest_of_the_body():
    fdef = _function(
        """
        def f(x):
            while x > 0:
                if x == 3:
                    continue
                if x == 5:
                    break
                x = x - 1
            return x
        """
    )
    canonicalize_loop_exits(fdef)
    text = ast.unparse(fdef)
    assert "_fx_break_" in text and "_fx_continue_" in text
    assert "while not _fx_break_" in text
    assert "break" not in text.replace("_fx_break", "") and "continue" not in text.replace("_fx_continue", "")


def test_return_inside_a_loop_becomes_flags_and_a_return_after_the_loop():
    fdef = _function(
        """
        def f(xs):
            for x in xs:
                if x:
                    return x
            return None
        """
    )
    canonicalize_returns_in_loops(fdef)
    canonicalize_loop_exits(fdef)
    canonicalize_returns(fdef)
    text = ast.unparse(fdef)
    assert len(re.findall(r"\breturn\b", text)) == 1 and text.rstrip().endswith("return _fx_retval")
    assert "_fx_do_return = True" in text


def test_canonical_functions_behave_like_the_original():
    source = """
        def f(xs, limit):
            total = 0
            for x in xs:
                if x < 0:
                    continue
                if total + x > limit:
                    return -total
                total += x
            return total
        """
    fdef = _function(source)
    canonicalize_returns_in_loops(fdef)
    canonicalize_loop_exits(fdef)
    canonicalize_returns(fdef)
    original, rewritten = {}, {}
    exec(textwrap.dedent(source), original)  # noqa: S102
    exec(ast.unparse(fdef), rewritten)  # noqa: S102
    for xs in ([], [1, 2, 3], [1, -4, 5, 9], [10], [-1, -2]):
        for limit in (0, 4, 100):
            assert rewritten["f"](xs, limit) == original["f"](xs, limit)


def test_comprehension_targets_are_local_to_the_comprehension():
    """``[float(i) for i in range(3)]`` inside a loop body neither writes nor reads ``i`` in the
    function's scope (it once refused such a loop: "'i' is first defined inside a loop");
    the first iterable and a walrus are the enclosing scope's."""
    import ast

    from fxport.controlflow.analysis import reads, writes

    body = ast.parse("y = [float(i) + q for i in range(3)]\nz = [k for k in k]\nw = {(j := a): b for a, b in p}").body
    assert writes(body) == {"y", "z", "w", "j"}
    assert reads(body) == {"float", "q", "range", "k", "p"}
