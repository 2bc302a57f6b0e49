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
