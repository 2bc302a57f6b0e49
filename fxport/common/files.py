"""Output files written the way any other tool writes them: atomically, with the umask's mode.

A failure leaves no partial file and never clobbers an existing one; an overwritten file keeps
its permission bits. The model, ``--report``, ``--html`` and the diff pages all go through here.

Example::

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "report.json")
    >>> write_text_atomically("{}", path) == path, open(path).read()
    (True, '{}')
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from typing import TYPE_CHECKING

from fxport.errors import OutputWriteError

if TYPE_CHECKING:
    import onnx

    from fxport.lower.serialized import ModelBytes


def write_atomically(model: onnx.ModelProto, path: str | os.PathLike, model_bytes: ModelBytes | None = None) -> str:
    """Write ``model`` to ``path`` through a temporary file and a rename.

    A failure leaves no partial file and never clobbers an existing one. ``model_bytes``: the
    pipeline's serialised graph (:mod:`fxport.lower.serialized`), written without serialising it again.
    """
    return write_bytes_atomically(model_bytes.pieces(model) if model_bytes is not None else model.SerializeToString(),
                                  path)


def write_text_atomically(text: str, path: str | os.PathLike) -> str:
    """Write ``text`` (UTF-8) to ``path`` atomically, like :func:`write_atomically`."""
    return write_bytes_atomically(text.encode("utf-8"), path)


def check_writable(path: str | os.PathLike) -> None:
    """Raise the :class:`OutputWriteError` a later write to ``path`` would raise, now (before
    minutes of conversion): it is no directory, and its directory exists and takes a new file.

    >>> check_writable("/nonexistent-dir/report.json")
    Traceback (most recent call last):
    fxport.errors.OutputWriteError: cannot write /nonexistent-dir/report.json: directory /nonexistent-dir does not exist; create the directory or choose another path
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise OutputWriteError(f"cannot write {path}: it is a directory", hint="give a file name")
    fd, temp_path = _temporary_beside(path)
    os.close(fd)
    os.unlink(temp_path)


def _temporary_beside(path: str) -> tuple[int, str]:
    """A new temporary file in ``path``'s directory (``(fd, its path)``), or the OutputWriteError
    that says why none can be made there."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputWriteError(f"cannot write {path}: directory {directory} does not exist",
                               hint="create the directory or choose another path")
    try:
        return tempfile.mkstemp(prefix=".fxport-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {path}: {exc.strerror}", hint="choose a writable path") from exc


def write_bytes_atomically(data: bytes | list[bytes], path: str | os.PathLike) -> str:
    """Write ``data`` (or its pieces, one after the other) to ``path`` through a temporary file
    in its directory and a rename."""
    path = os.fspath(path)
    fd, temp_path = _temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            for piece in [data] if isinstance(data, bytes) else data:
                handle.write(piece)
        os.chmod(temp_path, output_mode(path))
        os.replace(temp_path, path)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        raise OutputWriteError(f"cannot write {path}: {exc}", hint="choose a writable path") from exc
    return path


def output_mode(path: str | os.PathLike) -> int:
    """The permission bits a file written to ``path`` gets: an existing file's, else 0666 minus umask.

    ``mkstemp`` creates 0600 files; without this an output would be private whatever the umask,
    and overwriting a shared 0644 model would make it private.
    """
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


class EarlyFile:
    """A model file begun beside ``path`` on a thread while later stages run (verification).

    The thread writes every serialised piece but the last (:meth:`ModelBytes.pieces
    <fxport.lower.serialized.ModelBytes.pieces>`: the top-level fields after the graph, which
    verification still edits). :meth:`commit` writes that piece and renames the file into place
    when the model still serialises to the same leading pieces, and returns None otherwise (the
    caller writes the model anew); :meth:`discard` removes it, so a refused model leaves nothing.

    Example::

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "m.onnx")
        >>> early = EarlyFile([b"head", b"graph", b"tail"], path)
        >>> early.commit([b"head", b"graph", b"new tail"]) == path, open(path, "rb").read()
        (True, b'headgraphnew tail')
    """

    def __init__(self, pieces: list[bytes], path: str | os.PathLike):
        self.path = os.fspath(path)
        self._head = pieces[:-1]
        fd, self._temp = _temporary_beside(self.path)
        self._handle = os.fdopen(fd, "wb")
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write_head, name="fxport-write", daemon=True)
        self._thread.start()

    def _write_head(self) -> None:
        try:
            for piece in self._head:
                self._handle.write(piece)
            self._handle.flush()  # whole on disk for a reader that opens it by name (head_path)
        except BaseException as exc:  # noqa: BLE001 - raised by commit, on the caller's thread
            self._error = exc

    def commit(self, pieces: list[bytes]) -> str | None:
        """The file at ``path``, written from ``pieces`` (the model as it is now); None when its
        leading pieces changed since the file was begun (nothing is left behind)."""
        if not self._begun_with(pieces):
            self.discard()
            return None
        self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            self._handle.write(pieces[-1])
            self._handle.close()
            os.chmod(self._temp, output_mode(self.path))
            os.replace(self._temp, self.path)
        except (OSError, ValueError) as exc:
            self.discard()
            raise OutputWriteError(f"cannot write {self.path}: {exc}", hint="choose a writable path") from exc
        self._temp = None
        return self.path

    def head_path(self, pieces: list[bytes]) -> str | None:
        """The temporary file's path once it holds every piece but the last, when ``pieces`` (the
        model as it is now) begin with the pieces it was begun with; None otherwise, or when
        its write failed (:meth:`commit` raises that error)."""
        if self._temp is None or not self._begun_with(pieces):
            return None
        self._thread.join()
        return self._temp if self._error is None else None

    def _begun_with(self, pieces: list[bytes]) -> bool:
        return len(pieces) == len(self._head) + 1 and all(a is b or a == b for a, b in zip(pieces, self._head))

    def discard(self) -> None:
        """Stop using the file and remove it (once its thread is done)."""
        self._thread.join()
        with contextlib.suppress(OSError, ValueError):
            self._handle.close()
        if self._temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temp)
            self._temp = None
