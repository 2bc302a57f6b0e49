"""External data: models whose weights do not fit in one protobuf (2 GB).

A serialised protobuf message cannot exceed 2 GiB, so a larger ONNX model keeps its weights in
a second file, the ONNX external-data convention: ``model.onnx`` holds the graph and, for each
large initializer, a ``location`` (``model.onnx.data``, relative to the model file), ``offset``
and ``length``. fxport switches to it when the initializers exceed :data:`THRESHOLD_BYTES`
(torch.onnx's own threshold, so fxport and the stock exporter split the same models), or when
asked (``convert(external_data=True)``, ``--external-data``).

Weights are never held twice for it: the exporter's initializers still point at the module's
own tensors, and :meth:`Staging.externalize` streams them from there straight into the data
file; from then on the graph proto carries references only, and ONNX Runtime reads the data
file by path (memory-mapped), so verification adds no copy of its own.

**The write is atomic per file, and the pair is committed data first, model last.** Both files
are written into a private directory next to the target (``.fxport-XXXX/``, same filesystem),
verified from there, then committed by two renames: ``model.onnx.data`` first, ``model.onnx``
last. A failure before the commit (export, verification, a full disk) leaves the target
directory as it was; a failure of the second rename puts the old data file back (it was kept
through a hard link). What a concurrent reader can see: each file is always either wholly
old or wholly new; an ONNX Runtime session that already opened the old pair keeps reading the
old data (a rename does not touch an open or mapped file); only a reader that opens the old
``model.onnx`` in the instant between the two renames, or after a crash there, pairs it with the
new data. POSIX has no atomic rename of two files; a reader that needs more should read a
directory that is swapped as a whole.

Example::

    >>> external_data_wanted(None, 3 * 2**30), external_data_wanted(None, 2**20)
    (True, False)
    >>> data_file_name("out/net.onnx")
    'net.onnx.data'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

import onnx

from fxport.errors import OutputWriteError, UsageError
from fxport.common.files import EarlyFile, output_mode  # an overwritten file keeps its mode, a new one gets the umask's

#: Initializer bytes above which weights go to external data: torch.onnx's ``_LARGE_MODEL_THRESHOLD``
#: (1.5 GiB), leaving room under protobuf's 2 GiB for the graph and what precision steps add.
THRESHOLD_BYTES = 1536 * 2**20

#: protobuf's hard limit on one serialised message.
PROTOBUF_LIMIT = 2**31 - 1

#: Tensors smaller than this stay inside the model file (onnx.save's default).
SIZE_THRESHOLD_BYTES = 1024


def data_file_name(model_path: str | os.PathLike) -> str:
    """The external-data file that goes with ``model_path``: its base name plus ``.data``."""
    return os.path.basename(os.fspath(model_path)) + ".data"


def external_data_wanted(policy: bool | None, initializer_bytes: int) -> bool:
    """Whether weights of ``initializer_bytes`` go to external data under ``policy``.

    ``policy`` None decides by size; True always; False never, and a model that cannot be one
    file is then a usage error.
    """
    if policy is None:
        return initializer_bytes > THRESHOLD_BYTES
    if not policy and initializer_bytes >= PROTOBUF_LIMIT:
        raise UsageError(
            f"the model's weights take {initializer_bytes / 2**30:.2f} GiB, over protobuf's 2 GiB "
            "limit for a single ONNX file",
            hint="drop external_data=False (--no-external-data); fxport then writes MODEL.onnx + MODEL.onnx.data",
        )
    return bool(policy)


def ir_initializer_bytes(model) -> int:
    """Bytes of every initializer of an onnx_ir model, subgraphs included (nothing is read)."""
    total = 0
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is not None:
                total += tensor.nbytes
    return total


def uses_external_data(model: onnx.ModelProto) -> bool:
    """True when an initializer of ``model`` (subgraphs included) lives in an external file."""
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in _initializers(model.graph))


def _initializers(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    from fxport.report.result import iter_graphs

    for each in iter_graphs(graph):
        yield from each.initializer


class Staging:
    """A private directory where an external-data pair is written and checked before its commit.

    ``output`` None stages in the system's temporary directory (nothing is committed); otherwise
    next to ``output``, so the commit is a rename on one filesystem. The directory is made on
    first use and removed by :meth:`cleanup` (also after a successful commit).

    Example::

        >>> stage = Staging("out/model.onnx")                          # doctest: +SKIP
        >>> proto, home = stage.externalize(onnx_program.model)       # doctest: +SKIP
        >>> stage.commit(proto, home)                                  # doctest: +SKIP
        'out/model.onnx'

    Where a model's data lives travels with the model
    (:attr:`LoweredModel.home <fxport.lower.lowered.LoweredModel.home>`), not in the staging.
    """

    def __init__(self, output: str | os.PathLike | None = None):
        self.output = os.fspath(output) if output is not None else None
        self.model_name = os.path.basename(self.output) if self.output else "model.onnx"
        self.data_name = data_file_name(self.model_name)
        self._root: str | None = None
        self._count = 0
        self._early: EarlyFile | None = None

    @property
    def target_dir(self) -> str | None:
        return os.path.dirname(os.path.abspath(self.output)) if self.output else None

    def new_dir(self) -> str:
        """A fresh directory inside the stage (one per model: float32, int8, ...)."""
        if self._root is None:
            parent = self.target_dir
            if parent is not None and not os.path.isdir(parent):
                raise OutputWriteError(f"cannot write {self.output}: directory {parent} does not exist",
                                       hint="create the directory or choose another path")
            try:
                self._root = tempfile.mkdtemp(prefix=".fxport-", dir=parent)
            except OSError as exc:
                raise OutputWriteError(f"cannot write {self.output or 'a temporary model'}: {exc.strerror}",
                                       hint="choose a writable path") from exc
        self._count += 1
        path = os.path.join(self._root, str(self._count))
        os.mkdir(path)
        return path

    def externalize(self, ir_model) -> tuple[onnx.ModelProto, str]:
        """Stream ``ir_model``'s weights into a fresh staged data file; returns the graph proto
        and the directory holding that file.

        The initializers of ``ir_model`` become references to that file; the proto holds no
        weights.
        """
        import onnx_ir as ir

        directory = self.new_dir()
        try:
            ir.external_data.unload_from_model(ir_model, directory, self.data_name,
                                               size_threshold_bytes=SIZE_THRESHOLD_BYTES)
        except OSError as exc:
            raise OutputWriteError(f"cannot write the external data of {self.output or 'the model'}: {exc}",
                                   hint="free disk space or choose another path") from exc
        return ir.serde.serialize_model(ir_model), directory

    def model_path(self, model: onnx.ModelProto, directory: str) -> str:
        """Write ``model``'s graph next to its data staged in ``directory`` and return the path
        (what the checker and ONNX Runtime load)."""
        path = os.path.join(directory, self.model_name)
        try:
            with open(path, "wb") as handle:
                handle.write(model.SerializeToString())
        except (OSError, ValueError) as exc:
            raise OutputWriteError(f"cannot write {self.output or 'the model'}: {exc}",
                                   hint="free disk space or choose another path") from exc
        return path

    def commit(self, model: onnx.ModelProto, directory: str) -> str:
        """Move ``model``'s pair staged in ``directory`` to the output: data first, model last.

        A failure leaves the previous pair (or absence of one) in place.
        """
        assert self.output is not None, "nothing to commit to without an output path"
        staged_model = self.model_path(model, directory)
        data_target = os.path.join(self.target_dir, self.data_name)
        backup = os.path.join(directory, "previous.data")
        had_data = os.path.lexists(data_target)
        with contextlib.suppress(OSError):
            os.chmod(os.path.join(directory, self.data_name), output_mode(data_target))
            os.chmod(staged_model, output_mode(self.output))
        kept = False
        if had_data:
            with contextlib.suppress(OSError):  # a hard link keeps the old data for a rollback, free
                os.link(data_target, backup)
                kept = True
        try:
            os.replace(os.path.join(directory, self.data_name), data_target)
        except OSError as exc:
            raise OutputWriteError(f"cannot write {data_target}: {exc}", hint="choose a writable path") from exc
        try:
            os.replace(staged_model, self.output)
        except OSError as exc:
            with contextlib.suppress(OSError):
                if kept:
                    os.replace(backup, data_target)
                elif not had_data:
                    os.unlink(data_target)
            raise OutputWriteError(f"cannot write {self.output}: {exc}", hint="choose a writable path") from exc
        return self.output

    def begin_file(self, pieces: list[bytes]) -> None:
        """Start writing a self-contained model's file from its serialised ``pieces`` while the
        later stages run (:class:`~fxport.common.files.EarlyFile`); :meth:`commit_file` finishes it.
        Where no file can be begun, the write stage writes it (or says why it cannot)."""
        if self.output is not None and self._early is None:
            with contextlib.suppress(OutputWriteError):
                self._early = EarlyFile(pieces, self.output)

    def early_head(self, pieces: list[bytes]) -> str | None:
        """The path of the file :meth:`begin_file` started, once it holds ``pieces`` but the
        last (:meth:`EarlyFile.head_path <fxport.common.files.EarlyFile.head_path>`); None without one."""
        early = self._early
        return early.head_path(pieces) if early is not None else None

    def commit_file(self, model: onnx.ModelProto, model_bytes) -> str | None:
        """The output, finished from the file :meth:`begin_file` started, when ``model`` still
        serialises (through ``model_bytes``, the lower stage's) to what it began with; None otherwise."""
        early, self._early = self._early, None
        return early.commit(model_bytes.pieces(model)) if early is not None else None

    def cleanup(self) -> None:
        """Remove the staging directory (whatever was not committed)."""
        if self._early is not None:  # a conversion that stopped before its write stage
            self._early.discard()
            self._early = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    close = cleanup  # contextlib.closing(stage)


def load_weights_into(model: onnx.ModelProto, directory: str) -> onnx.ModelProto:
    """Read the external data of ``model`` (staged in ``directory``) into the proto, in memory.

    The result may exceed 2 GiB: it cannot be serialised as one message, but
    ``onnx.save(model, path, save_as_external_data=True)`` writes it.
    """
    from onnx.external_data_helper import load_external_data_for_model

    load_external_data_for_model(model, directory)
    return model
