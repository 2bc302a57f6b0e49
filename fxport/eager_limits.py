"""Bounds on the eager runs fxport starts on inputs it made up itself.

Verification's generated input sets and the coverage search's variations are fxport's own
inputs: on them a model's loop may never end (a ``while err > 1e-6:`` Newton iteration on
negated values). Each such run is bounded in time (:func:`time_limit`, the main thread only:
it uses ``SIGALRM``) and, for converted loops run by the coverage search, in iterations
(:data:`SEARCH_TRIPS`, enforced by the loop operators). A run that hits a bound raises
:class:`EagerRunStopped` naming the user's file:line; the caller skips that input set with a
one-line warning. The user's own inputs are never bounded.

Example::

    >>> import time
    >>> try:
    ...     with time_limit(0.05):
    ...         while True:
    ...             time.sleep(0.01)
    ... except EagerRunStopped as stop:
    ...     print(stop.what)
    eager PyTorch ran past 0.05 s
"""

from __future__ import annotations

import contextlib
import signal
import threading
import traceback

from fxport.frames import SourceLocation, user_location_from_stack

#: Seconds an eager run on a generated or searched input set may take.
SECONDS = 60.0
#: Iterations a converted loop may run on an input set the coverage search made up.
SEARCH_TRIPS = 10_000


class EagerRunStopped(BaseException):
    """An eager run on fxport's own inputs hit a bound (a BaseException, so neither the model's
    ``except Exception`` nor fxport's eager-failure handling swallows it)."""

    def __init__(self, what: str, where: SourceLocation | None):
        super().__init__(what)
        self.what, self.where = what, where

    def describe(self) -> str:
        """``"the while loop ran past 10000 iterations at net.py:6"``."""
        return f"{self.what}{f' at {self.where}' if self.where else ''}"


@contextlib.contextmanager
def time_limit(seconds: float | None = None):
    """Raise :class:`EagerRunStopped` in the body after ``seconds`` (default :data:`SECONDS`, read
    when called; no bound off the main thread)."""
    seconds = SECONDS if seconds is None else seconds
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(signum, frame):
        raise EagerRunStopped(f"eager PyTorch ran past {seconds:g} s",
                              user_location_from_stack(traceback.extract_stack(frame)))

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def time_limit_unless_bounded(seconds: float | None = None):
    """:func:`time_limit` where no limit is running yet (the block gets True); under one already
    running, that one bounds the block and none is set (False): a second timer would cancel the
    first, and the caller tells whose stop it caught by the value."""
    running = (threading.current_thread() is threading.main_thread() and hasattr(signal, "getitimer")
               and signal.getitimer(signal.ITIMER_REAL)[0] > 0)
    if running:
        yield False
        return
    with time_limit(seconds):
        yield True


@contextlib.contextmanager
def terminated_after(run_options, seconds: float | None):
    """Set ONNX Runtime's ``run_options.terminate`` after ``seconds`` (None: never) while the
    body runs: the same bound for ONNX Runtime's run of those inputs (a signal cannot stop
    native code)."""
    if seconds is None:
        yield
        return
    timer = threading.Timer(seconds, setattr, (run_options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
