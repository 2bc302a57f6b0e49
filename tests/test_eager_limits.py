"""Eager runs on inputs fxport made up are bounded (issue 25 item 6): no hang, one warning
naming the loop."""

import time

import pytest
import torch

import fxport
from fxport.eager_limits import EagerRunStopped, time_limit
from tests.conftest import line_of


class Newton(torch.nn.Module):
    """sqrt by Newton's method: never converges on negative values (the search negates inputs)."""

    def forward(self, a):
        x = a.clone()
        err = (x * x - a).abs().max()
        while err > 1e-6:  # loop-line
            x = 0.5 * (x + a / x)
            err = (x * x - a).abs().max()
        return x


@pytest.mark.slow
def test_coverage_search_stops_a_loop_that_never_ends_and_names_it():
    a = torch.tensor([1.0, 2.0, 4.0, 9.0])
    start = time.monotonic()
    result = fxport.convert(Newton().eval(), (a,))
    assert time.monotonic() - start < 120
    stopped = [w for w in result.warnings if "ran past" in w]
    assert len(stopped) == 1, result.warnings
    assert "the while loop ran past 10000 iterations at" in stopped[0] and line_of(__file__, "while err > 1e-6") in stopped[0]
    assert "search: negated values" in stopped[0] and "\n" not in stopped[0]
    assert result.verification and all(row.passed for row in result.verification)


def test_time_limit_names_the_users_line():
    def spin():
        while True:
            pass

    start = time.monotonic()
    try:
        with time_limit(0.2):
            spin()
    except EagerRunStopped as stop:
        assert stop.where is not None and stop.where.function == "spin"
    else:
        raise AssertionError("not stopped")
    assert time.monotonic() - start < 5


class GrowsUntilLarge(torch.nn.Module):
    """Ends on every batch but 0, where the sum stays 0: eager never finishes there."""

    def forward(self, x):
        while x.sum() < 10:  # empty-line
            x = x * 2 + 1
        return x


def test_a_generated_size_on_which_the_loop_never_ends_is_skipped_not_hung(monkeypatch):
    """size[batch=0] never finishes in eager: verification stops it at its time limit and the
    coverage run at the iteration cap, each with one warning naming the loop; the file is written."""
    monkeypatch.setattr("fxport.eager_limits.SECONDS", 3.0)
    start = time.monotonic()
    result = fxport.convert(GrowsUntilLarge().eval(), (torch.rand(4, 3),),
                            dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert time.monotonic() - start < 100
    stopped = [w for w in result.warnings if "ran past" in w and "size[batch=0]" in w]
    assert len(stopped) == 2, result.warnings
    assert all(line_of(__file__, "empty-line") in w and "\n" not in w for w in stopped)
    assert any(w.startswith("coverage: the while loop ran past 10000 iterations") for w in stopped)
    assert result.model is not None and all(row.passed for row in result.verification if "batch=0" not in row.name)


def test_a_limit_inside_a_running_one_leaves_the_outer_timer_alone():
    """time_limit_unless_bounded sets no second timer under a running limit (which would cancel
    it): the outer limit still stops the block, and the caller is told it was not its own."""
    from fxport.eager_limits import time_limit_unless_bounded

    with time_limit_unless_bounded(5) as own:
        assert own is True
    with pytest.raises(EagerRunStopped), time_limit(0.3):
        with time_limit_unless_bounded(60) as own:
            assert own is False
        time.sleep(5)  # still bounded by the outer 0.3 s
