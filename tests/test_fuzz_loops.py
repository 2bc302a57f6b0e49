"""The decoding/search loop fuzzer (``benchmarks/fuzz/loops.py``, issue 47 item 4).

Fast tests: the grammar writes programs that run eagerly and whose held-out input sets take
each exit (0, 1, 2, N trips, a break, the bound, emptied state); the classifier sorts errors into
refusals and internal errors; a seeded wrong file is reported ``wrong``; a handful of programs
convert end to end. Slow (CI): the profile of 40 programs has no bug beyond the open ones listed
in ``KNOWN_OPEN``, and every kept program in ``tests/fuzz_regressions/loops/`` still behaves as
its header says.
"""

from __future__ import annotations

import glob
import itertools
import os

import pytest
import torch

import fxport
from benchmarks.fuzz import loops
from benchmarks.fuzz.runner import load_module
from fxport.common.frames import SourceLocation

REGRESSIONS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fuzz_regressions", "loops", "case_*.py")))

#: The CI profile: programs 0..39 of seed 0 (``python3 -m benchmarks.fuzz.loops --programs 40``).
CI_SEED, CI_PROGRAMS = 0, 40

#: CI-profile programs that find an open bug (each has a kept case under
#: tests/fuzz_regressions/loops/). The profile test fails on any other bug, and on one of these
#: once it no longer finds a bug: then take it off this list (and mark its case fixed).
KNOWN_OPEN: dict[str, str] = {}


def _write(tmp_path, program: loops.LoopProgram) -> str:
    path = tmp_path / f"loopfuzz_{program.digest}.py"
    path.write_text(program.source)
    return str(path)


def _decode(**overrides) -> loops.LoopProgram:
    choices = {"cache": "cat", "stop": "break_last", "counter": "int", "header": "for", "output": "cat",
               "stack": "stack", "nested": False, "score_out": True}
    choices.update(overrides)
    return loops.decode_program(choices)


def test_every_grammar_choice_writes_a_program_that_runs_eagerly_on_every_set(tmp_path):
    """Each value of each axis at least once (the axes cycled together, not their product)."""
    axes = [loops.CACHES, loops.STOPS, loops.COUNTERS, loops.OUTPUTS, ("stack", "cat"), (False, True)]
    programs = [_decode(cache=cache, stop=stop, counter=counter, output=output, stack=stack, nested=nested,
                        header="while" if stop == "while_test" or index % 2 else "for")
                for index, (cache, stop, counter, output, stack, nested)
                in enumerate(zip(*(itertools.islice(itertools.cycle(axis), 6) for axis in axes)))]
    programs += [loops.search_program({"stop": stop, "counter": counter, "output": output, "nested": nested})
                 for stop, counter, output, nested
                 in zip(loops.SEARCH_STOPS, itertools.cycle(loops.COUNTERS), itertools.cycle(loops.SEARCH_OUTPUTS),
                        itertools.cycle((False, True)))]
    for program in programs:
        module = load_module(_write(tmp_path, program))
        example, held = loops.input_sets(program.family)
        with torch.no_grad():
            for args in (example, *held):
                module(*args)
    assert len({p.digest for p in programs}) == len(programs)


def test_draws_are_reproducible_and_cover_both_families():
    assert loops.draw(3, 17).source == loops.draw(3, 17).source
    families = {loops.draw(0, i).family for i in range(40)}
    assert families == {"decode", "search"}


def test_decode_sets_take_zero_one_two_and_more_steps_by_break_and_by_bound(tmp_path):
    """Trip counts of a loop that breaks when every row finished, read from its grown output."""
    module = load_module(_write(tmp_path, _decode()))
    bounded = load_module(_write(tmp_path, _decode(stop="bound")))
    _, held = loops.input_sets("decode")
    trips, bound_trips, broke = set(), set(), False
    with torch.no_grad():
        for tokens, n in held:
            steps = module(tokens, n)[0].shape[1] - tokens.shape[1]
            trips.add(steps)
            bound_trips.add(bounded(tokens, n)[0].shape[1] - tokens.shape[1])
            broke |= steps < int(n)
    assert {0, 1, 2, 3, 5} <= trips and broke
    assert bound_trips == {int(n) for _, n in held} and 6 in bound_trips


def test_search_sets_empty_the_shrinking_state(tmp_path):
    program = loops.search_program({"stop": "counter_and_numel", "counter": "tensor", "output": "cat", "nested": False})
    module = load_module(_write(tmp_path, program))
    _, held = loops.input_sets("search")
    with torch.no_grad():
        outcomes = [(module(tokens, n)[0].numel(), module(tokens, n)[2].numel(), int(n)) for tokens, n in held]
    assert any(left == 0 and kept < n for kept, left, n in outcomes)      # emptied before the bound
    assert any(left > 0 and kept == n for kept, left, n in outcomes)      # the bound first
    assert any(kept == 0 for kept, _, _ in outcomes)                      # no step


def test_errors_are_classified(tmp_path):
    path = str(tmp_path / "model.py")
    where = SourceLocation(path, 3)
    refused = fxport.ControlFlowError("while: a value changes dtype", where=where)
    assert loops.classify_error(refused, path)[0] == "refused"
    leaked = fxport.CaptureError("torch.export failed: InternalTorchDynamoError: boom", where=where)
    verdict, kind, _ = loops.classify_error(leaked, path)
    assert verdict == "internal" and kind.startswith("CaptureError: torch.export failed: InternalTorchDynamoError")
    assert loops.classify_error(fxport.ControlFlowError("no location"), path)[0] == "internal"
    assert loops.classify_error(KeyError("x"), path)[:2] == ("internal", "KeyError (not a ConversionError)")
    verdict, kind, _ = loops.classify_error(fxport.VerificationError("ONNX Runtime differs from eager"), path)
    assert verdict == "refused" and kind.startswith("VerificationError (caught by verification)")


SEARCH = {"stop": "while_numel", "counter": "int", "output": "cat", "nested": False}


def test_a_seeded_wrong_file_is_reported_wrong(tmp_path, monkeypatch):
    """fxport converts a program that never suppresses anything in place of the real one: the
    held-out sets (where suppression happens) must show the difference."""
    program = loops.search_program(SEARCH)
    wrong = program.source.replace("order = rest[sim[i, rest] <= 0.5]", "order = rest")
    assert wrong != program.source
    wrong_path = tmp_path / "loopfuzz_seeded_wrong.py"
    wrong_path.write_text(wrong)
    real_convert = fxport.convert
    monkeypatch.setattr(fxport, "convert", lambda module, *a, **k: real_convert(load_module(str(wrong_path)), *a, **k))
    outcome = loops.run_loop_file(_write(tmp_path, program))
    assert (outcome.verdict, outcome.kind) == ("wrong", "differs from eager"), outcome.message


#: A handful of programs end to end (< 60 s together on the 2-core machine): search programs
#: whose state empties, and a greedy decoding loop with a cat-grown KV cache and a break.
FAST = [loops.search_program(SEARCH),
        loops.search_program({"stop": "counter_and_numel", "counter": "tensor", "output": "buffer", "nested": False}),
        _decode(stop="mask", counter="tensor", header="while", cache="none")]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("index", range(len(FAST)))
def test_a_handful_of_programs_convert_and_equal_eager_on_every_exit(tmp_path, index):
    outcome = loops.run_loop_file(_write(tmp_path, FAST[index]))
    assert outcome.verdict == "equal", f"{outcome.verdict} ({outcome.kind}): {outcome.message}\n{outcome.source}"


@pytest.mark.slow
@pytest.mark.parametrize("half", range(2))
def test_ci_loop_fuzz_profile_has_no_new_bug(half):
    """Programs 0..39 of seed 0, in two halves that xdist runs on two workers."""
    share = CI_PROGRAMS // 2
    summary = loops.campaign(CI_PROGRAMS, CI_SEED, only=list(range(half * share, (half + 1) * share)))
    found = {bug.name: f"{bug.verdict} ({bug.kind}): {bug.message}" for bug in summary.bugs}
    mine = {name for name in KNOWN_OPEN if half * share <= int(name.split(":")[1]) < (half + 1) * share}
    assert set(found) - mine == set(), loops.report(summary, 0.0) + "\n" + "\n".join(map(str, found.items()))
    assert mine - set(found) == set(), f"fixed? take {sorted(mine - set(found))} off KNOWN_OPEN"
    assert summary.counts["invalid"] == 0, loops.report(summary, 0.0)
    assert summary.counts["equal"] >= share // 2, loops.report(summary, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("path", REGRESSIONS, ids=[os.path.basename(p) for p in REGRESSIONS])
def test_kept_loop_programs(path):
    """A case marked ``# status: open`` still finds its bug — a wrong file, an internal error, or
    a wrong conversion that verification refused — (strict: once fixed, mark it ``# status:
    fixed``); any other case converts and equals eager, or is refused in one line."""
    with open(path) as handle:
        is_open = "# status: open" in handle.read()
    outcome = loops.run_loop_file(path)
    if is_open:
        caught = outcome.verdict == "refused" and outcome.kind.startswith("VerificationError")
        assert outcome.verdict in ("wrong", "internal") or caught, \
            f"now {outcome.verdict}: fixed? mark {os.path.basename(path)} '# status: fixed'"
    else:
        assert outcome.verdict in ("equal", "refused"), f"{outcome.verdict} ({outcome.kind}): {outcome.message}"
        assert not outcome.kind.startswith("VerificationError"), outcome.message
