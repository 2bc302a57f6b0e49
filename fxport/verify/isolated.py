"""ONNX Runtime in a child process: a crash on one input set is that set's failure, not fxport's.

ONNX Runtime is native code; on some graphs and sizes it aborts (``nn.GRU`` at batch 0:
"terminate called without an active exception", SIGABRT) or faults, and in-process that ends the
conversion with nothing said. Verification therefore runs its sessions in one child process,
reused across the input sets (the session is created there once): a set whose run kills the
child raises :class:`SessionCrashed` naming the signal, and the next set starts a fresh child.
On Linux a CPU session's child is forked: the model's bytes are already in its copy of this
process and nothing is imported (0.02 s beyond the session load); a CUDA session's child is a
fresh interpreter (CUDA does not survive a fork), which imports numpy and onnxruntime only (this
module imports nothing else at its top: 0.2 s) and receives the model's path or bytes. Each set's
inputs and outputs are pickled over a socket pair. A fork per set would load the session again
for every set (docs/reliability.md has the numbers).

Example::

    >>> import numpy as np, onnx
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    >>> with ChildSession([model.SerializeToString()], SessionSettings()) as session:
    ...     session.input_names, session.run({"x": np.array([-1.0, 2.0], "float32")})[0].tolist()
    (['x'], [0.0, 2.0])
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from typing import Any


class SessionCrashed(Exception):
    """The child process running ONNX Runtime died during a run (or a load): ``signal_name``
    (``"SIGABRT"``), or an exit status; ``stderr``: the last line it wrote (ORT's own words)."""

    def __init__(self, how: str, stderr: str = ""):
        super().__init__(how + (f": {stderr}" if stderr else ""))
        self.how, self.stderr = how, stderr


class SessionError(Exception):
    """ONNX Runtime raised in the child (the message is ORT's); ``terminated``: a run stopped
    after its time limit (``RunOptions.terminate``), ``limit`` the seconds it was given."""

    def __init__(self, message: str, terminated: bool = False, limit: float | None = None):
        super().__init__(message)
        self.terminated, self.limit = terminated, limit


@dataclasses.dataclass(frozen=True)
class SessionSettings:
    """What the child's session is created with (:class:`fxport.verify.onnx_runner.OnnxRunner` fills it)."""

    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    config: tuple[tuple[str, str], ...] = ()
    #: ``session.model_external_initializers_file_folder_path`` for sources that refer to weights
    #: in a file being written (the first source only; the others are whole models).
    external_folder: str | None = None
    profile_prefix: str | None = None
    log_severity_level: int = 3


#: Seconds the parent waits beyond a run's own limit before it kills a child that ignores
#: ``RunOptions.terminate`` (native code that never checks the flag).
KILL_GRACE = 10.0


class ChildSession:
    """An ONNX Runtime session living in a child process, reused across runs.

    ``sources``: ways to load the model, tried in order (a model file's path, its bytes, or a
    function returning its bytes, called only when that source is tried);
    the first that loads is kept for restarts. After a crash the next :meth:`run` starts a new
    child and loads the model again.
    """

    def __init__(self, sources: list[bytes | str], settings: SessionSettings, start_method: str | None = None):
        self._sources, self.settings = list(sources), settings
        #: ``"fork"`` (a copy of this process: the model's bytes are there already and nothing is
        #: imported; Linux, CPU) or ``"spawn"`` (a fresh interpreter: CUDA, which a forked child
        #: cannot use once the parent has touched it)
        self.start_method = start_method or default_start_method(settings.providers)
        self._process: subprocess.Popen | None = None
        self._connection: Connection | None = None
        self._stderr = None
        self._lock = threading.Lock()
        #: Filled by the first load: the session's inputs, their ORT types, its first provider.
        self.input_names: list[str] = []
        self.input_types: list[str] = []
        self.input_shapes: list[list] = []
        self.provider = settings.providers[0]
        #: Children started (1 + the crashes recovered from): tests and benchmarks read it.
        self.starts = 0
        self._start()

    # -- parent side -------------------------------------------------------------------------
    def _start(self) -> None:
        parent_end, child_end = _socket_pair()
        self._stderr = tempfile.TemporaryFile()
        if self.start_method == "fork":
            self._process = _fork(child_end, self._stderr, self._sources)
        else:
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            code = (f"import sys; sys.path[:1] = [{root!r}]; "
                    "from fxport.verify.isolated import serve; serve(int(sys.argv[1]))")
            self._process = subprocess.Popen([sys.executable, "-c", code, str(child_end.fileno())],
                                             pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=self._stderr)
        child_end.close()
        self._connection = parent_end
        self.starts += 1
        last_error: SessionError | None = None
        for index, source in enumerate(self._sources):
            folder = self.settings.external_folder if index == 0 else None
            settings = dataclasses.asdict(dataclasses.replace(self.settings, external_folder=folder))
            # a forked child has the sources already (its memory is a copy of this one's)
            sent = index if self.start_method == "fork" else source() if callable(source) else source
            reply = self._ask(("load", sent, settings), None)
            if reply[0] == "loaded":
                self._sources = [source]  # a restart loads what loaded
                self.settings = dataclasses.replace(self.settings, external_folder=folder)
                self.input_names, self.input_types, self.input_shapes, self.provider = reply[1:]
                return
            last_error = SessionError(reply[1])
        self.close()
        raise last_error or SessionError("no model source to load")

    def run(self, feed: dict[str, Any], limit: float | None = None) -> list:
        """ONNX Runtime's outputs on ``feed`` (name → numpy array); ``limit``: seconds after which
        the run is stopped (:class:`SessionError` with ``terminated``), narrowed to the run's
        budget proportional to the example's while a conversion measured one
        (:func:`fxport.eager.limits.onnx_runtime_limit`: a made-up set's run, as eager's)."""
        if limit is not None:
            from fxport.eager.limits import onnx_runtime_limit  # the parent's side: fxport is there

            limit = onnx_runtime_limit(limit, sum(int(getattr(v, "size", 1)) for v in feed.values()))
        with self._lock:
            if self._process is None:
                self._start()
            reply = self._ask(("run", feed, limit), None if limit is None else limit + KILL_GRACE)
        if reply[0] == "error":
            raise SessionError(f"ONNX Runtime ran past {limit:g} s" if reply[2] else reply[1], terminated=reply[2],
                               limit=limit)
        return reply[1]

    def end_profiling(self) -> list:
        """The profile's events of the runs so far (chrome-trace JSON), profiling then stopped."""
        with self._lock:
            if self._process is None:
                return []
            reply = self._ask(("profile",), None)
        return reply[1] if reply[0] == "profile" else []

    def _ask(self, message: tuple, timeout: float | None) -> tuple:
        try:
            self._connection.send(message)
            if self._connection.poll(timeout):
                return self._connection.recv()
        except (EOFError, OSError, BrokenPipeError):
            raise self._crashed() from None
        self._kill()  # past its limit and deaf to the terminate flag
        return ("error", f"ONNX Runtime ran past {timeout:g} s and was stopped", True)

    def _crashed(self) -> SessionCrashed:
        process, stderr = self._process, self._stderr
        code = process.wait() if process is not None else None
        last = _last_line(stderr)
        self._forget()
        if code is not None and code < 0:
            try:
                how = signal.Signals(-code).name
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit status {code}"
        return SessionCrashed(how, last)

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._forget()

    def _forget(self) -> None:
        for handle in (self._connection, self._stderr):
            if handle is not None:
                handle.close()
        self._process = self._connection = self._stderr = None

    def close(self) -> None:
        """End the child (it also ends by itself when this process goes: its socket closes)."""
        process = self._process
        if process is None:
            return
        try:
            self._connection.send(("exit",))
        except OSError:
            pass
        self._forget()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "ChildSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def default_start_method(providers) -> str:
    """``"fork"`` for CPU sessions on Linux, else ``"spawn"`` (docs/reliability.md: a forked
    child costs 0.02 s where a fresh interpreter costs 0.2 s before it loads anything)."""
    cpu_only = all(provider == "CPUExecutionProvider" for provider in providers)
    return "fork" if cpu_only and sys.platform.startswith("linux") and hasattr(os, "fork") else "spawn"


class _Forked:
    """A forked child, waited on like a :class:`subprocess.Popen` (``wait()`` → negative signal)."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def wait(self, timeout: float | None = None) -> int:
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            else:
                time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork(child_end: Connection, stderr, sources: list) -> _Forked:
    """Fork a child serving ``child_end``; its stderr goes to ``stderr`` (ORT's last words on an
    abort are read from there, not shown to the user), and it never returns into this program."""
    import warnings

    with warnings.catch_warnings():  # Python 3.12 warns about any fork of a threaded process:
        warnings.simplefilter("ignore", DeprecationWarning)  # the child runs ORT only, never torch
        pid = os.fork()
    if pid:
        return _Forked(pid)
    code = 0
    try:
        import faulthandler

        faulthandler.disable()  # a parent's (pytest's, PYTHONFAULTHANDLER) would print the abort to its stderr
        os.dup2(stderr.fileno(), 2)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it (Ctrl-C reaches both)
        serve(child_end.fileno(), inherited=sources)
    except BaseException:  # noqa: BLE001 - never back into the parent's program
        code = 1
    finally:
        os._exit(code)


def _socket_pair() -> tuple[Connection, Connection]:
    import socket

    left, right = socket.socketpair()
    right.set_inheritable(True)
    return Connection(left.detach()), Connection(right.detach())


def _last_line(handle) -> str:
    """The last non-blank line the child wrote to stderr (ORT's words on an abort)."""
    if handle is None:
        return ""
    try:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
        lines = [line.strip() for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


# -- child side -------------------------------------------------------------------------------
def serve(fd: int, inherited: list | None = None) -> None:
    """The child's loop: load, run, profile, exit; ends when the parent's end closes.
    ``inherited``: a forked child's model sources, which a load names by index."""
    import onnxruntime as ort

    connection = Connection(fd, readable=True, writable=True)
    session = None
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "exit":
            return
        if kind == "load":
            try:
                source = inherited[message[1]] if isinstance(message[1], int) else message[1]
                source = source() if callable(source) else source  # bytes made only when needed
                session = _load(ort, source, message[2])
            except Exception as exc:  # noqa: BLE001 - ORT's message goes back to the parent
                connection.send(("error", _first_line(exc)))
                continue
            inputs = session.get_inputs()
            connection.send(("loaded", [i.name for i in inputs], [i.type for i in inputs],
                             [list(i.shape) for i in inputs], session.get_providers()[0]))
        elif kind == "run":
            connection.send(_run(ort, session, message[1], message[2]))
        elif kind == "profile":
            connection.send(("profile", _profile(session)))


def _load(ort, source, settings: dict):
    """The session of ``source`` with :class:`SessionSettings` ``settings`` (sent as a dict)."""
    options = ort.SessionOptions()
    options.log_severity_level = settings["log_severity_level"]
    for key, value in settings["config"]:
        options.add_session_config_entry(key, value)
    if settings["external_folder"] is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                         settings["external_folder"])
    if settings["profile_prefix"] is not None:
        options.enable_profiling = True
        options.profile_file_prefix = settings["profile_prefix"]
    return ort.InferenceSession(source, options, providers=list(settings["providers"]))


def _run(ort, session, feed: dict, limit: float | None) -> tuple:
    options = ort.RunOptions()
    timer = None
    if limit is not None:
        options.log_severity_level = 4  # a stopped run's "Exiting due to terminate flag" is ours to report
        timer = threading.Timer(limit, setattr, (options, "terminate", True))
        timer.daemon = True
        timer.start()
    try:
        return ("outputs", session.run(None, feed, options))
    except Exception as exc:  # noqa: BLE001 - ORT's message goes back to the parent
        return ("error", _first_line(exc), bool(options.terminate))
    finally:
        if timer is not None:
            timer.cancel()


def _profile(session) -> list:
    import json

    path = session.end_profiling()
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return []
    finally:
        if path:
            try:
                os.remove(path)
            except OSError:
                pass


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__
