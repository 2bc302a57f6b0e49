"""ONNX Runtime sessions fed with fxport input sets (what verification runs the file in).

Example::

    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    >>> runner = OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    >>> runner.run(InputSet((torch.tensor([-1.0, 2.0]),)))[0].tolist()
    [0.0, 2.0]
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile

import numpy as np
import onnx
import torch

from fxport.verify.compare import to_numpy as _to_numpy
from fxport.eager.limits import terminated_after
from fxport.errors import VerificationError
from fxport.errors import first_line as _first_line
from fxport.eager.inputs import InputSet
from fxport.verify.providers import describe_placement, node_placement, select_providers
from fxport.report.result import iter_nodes
from fxport.lower.serialized import ModelBytes, serialize


class OnnxRunner:
    """An onnxruntime session fed with fxport input sets.

    With ``isolated`` the session lives in a child process reused across runs
    (:mod:`fxport.verify.isolated`): a run that aborts or faults in ONNX Runtime raises
    :class:`~fxport.errors.VerificationError` naming the signal (``ONNX Runtime crashed (SIGABRT)
    on the size[b=0] inputs``) instead of ending this process, and the next run starts a new
    child. Verification runs every set that way; :meth:`close` ends the child.

    Example::

        >>> runner = OnnxRunner(onnx_model, device="cpu")        # doctest: +SKIP
        >>> outputs = runner.run(InputSet((x,)))                 # doctest: +SKIP
    """

    def __init__(self, model: "onnx.ModelProto | str | os.PathLike", device: str = "cpu", *,
                 profile_placement: bool | None = None, model_bytes: ModelBytes | None = None,
                 isolated: bool = False):
        """``model``: a proto (serialised by ``model_bytes``, if given), or a model file's path (external data)."""
        import onnxruntime as ort

        self.providers = select_providers(device)
        self.session = self._child = None
        config = [
            # Verification runs each set once: threads that spin between runs only take CPU from
            # the eager reference (and from other processes) without making a run faster.
            ("session.intra_op.allow_spinning", "0")]
        if isinstance(model, onnx.ModelProto) and not _has_loops(model) and not _has_blockwise_weights(model):
            # Prepacking reorders every constant weight at load for repeated products; outside a
            # Loop each set uses a weight once (VGG's 500 MB: a third of a 1.4 s load, no run slower)
            config.append(("session.disable_prepacking", "1"))
        #: Where each node ran, from a profile of the first run (on by default for CUDA, where ORT
        #: silently places nodes without a CUDA kernel on CPU): provider → ["OpType(name)", ...].
        self.placement: dict[str, list[str]] | None = None
        self._profiling = device == "cuda" if profile_placement is None else profile_placement
        profile_prefix = None
        if self._profiling:
            self._profile_dir = tempfile.mkdtemp(prefix="fxport-ort-profile-")
            profile_prefix = os.path.join(self._profile_dir, "run")
        try:
            if isolated:
                inputs = self._start_child(model, model_bytes, config, profile_prefix)
            else:
                options = ort.SessionOptions()
                options.log_severity_level = 3
                for key, value in config:
                    options.add_session_config_entry(key, value)
                if profile_prefix is not None:
                    options.enable_profiling = True
                    options.profile_file_prefix = profile_prefix
                self.session = _session(model, model_bytes, options, self.providers)
                inputs = [(i.name, i.type, i.shape) for i in self.session.get_inputs()]
                self.provider = self.session.get_providers()[0]
        except Exception as exc:
            if self._profiling:
                shutil.rmtree(self._profile_dir, ignore_errors=True)
            raise VerificationError(
                f"ONNX Runtime cannot load the model: {_first_line(exc)}",
                hint="the model uses an op or domain ONNX Runtime lacks; register its custom-op "
                "library or convert with --no-verify",
            ) from exc
        self.input_names = [name for name, _, _ in inputs]
        self.input_dtypes = [_ORT_FLOAT_TYPES.get(kind) for _, kind, _ in inputs]
        self._input_shapes = [list(shape) for _, _, shape in inputs]

    def _start_child(self, model, model_bytes: ModelBytes | None, config, profile_prefix) -> list[tuple]:
        """The session in a child process (:class:`~fxport.verify.isolated.ChildSession`): the
        model's path; or its bytes with the weights referred to in the file being written, then
        (should that not load) its whole bytes, serialised only when asked for."""
        from fxport.verify.isolated import ChildSession, SessionSettings

        folder = None
        if isinstance(model, (str, os.PathLike)):
            sources = [os.fspath(model)]
        else:
            referred = model_bytes.by_reference(model) if model_bytes is not None else None
            whole = _Serialized(model, model_bytes)
            sources = [referred[0], whole] if referred is not None else [whole]
            folder = referred[1] if referred is not None else None
        self._child = ChildSession(sources, SessionSettings(
            providers=tuple(self.providers), config=tuple(config), external_folder=folder,
            profile_prefix=profile_prefix))
        self.provider = self._child.provider
        return list(zip(self._child.input_names, self._child.input_types, self._child.input_shapes))

    def run(self, inputs: InputSet, limit: float | None = None) -> list[np.ndarray]:
        """ONNX Runtime's outputs; ``limit``: seconds after which the run is stopped (an error)."""
        tensors = [t.detach().cpu() for t in inputs.tensors()]
        if len(tensors) != len(self.input_names):
            raise VerificationError(
                f"the ONNX model takes {len(self.input_names)} inputs but {len(tensors)} tensors were given",
                hint="non-tensor inputs are baked into the model as constants; pass tensors for values that vary",
            )
        for name, shape, tensor in zip(self.input_names, self._input_shapes, tensors):
            fixed = [(axis, size) for axis, size in enumerate(shape) if isinstance(size, int)]
            if len(shape) != tensor.dim() or any(tensor.shape[axis] != size for axis, size in fixed):
                raise VerificationError(
                    f"the {inputs.name} inputs give {name} shape {list(tensor.shape)} but the model "
                    f"was exported with {list(shape)}",
                    hint="declare the varying axes dynamic (--dynamic NAME:AXIS=DIM or dynamic_shapes)",
                )
        feed = {name: _to_numpy(_as_input_dtype(t, dtype))
                for name, t, dtype in zip(self.input_names, tensors, self.input_dtypes)}
        outputs = self._run_in_child(inputs, feed, limit) if self._child is not None else \
            self._run_here(inputs, feed, limit)
        if self._profiling and self.placement is None:
            self._read_placement()
        return outputs

    def _run_here(self, inputs: InputSet, feed: dict, limit: float | None) -> list[np.ndarray]:
        import onnxruntime as ort

        options = ort.RunOptions()
        if limit is not None:
            options.log_severity_level = 4  # a stopped run's "Exiting due to terminate flag" is ours to report
        try:
            with terminated_after(options, limit):
                return self.session.run(None, feed, options)
        except Exception as exc:
            if options.terminate:
                raise _ran_past(limit, inputs) from exc
            raise _failed(inputs, _first_line(exc)) from exc

    def _run_in_child(self, inputs: InputSet, feed: dict, limit: float | None) -> list[np.ndarray]:
        from fxport.verify.isolated import SessionCrashed, SessionError

        try:
            return self._child.run(feed, limit)
        except SessionError as exc:
            ran_past = exc.terminated and _ran_past(exc.limit if exc.limit is not None else limit, inputs)
            raise (ran_past or _failed(inputs, str(exc))) from None
        except SessionCrashed as exc:
            said = f" ({exc.stderr})" if exc.stderr else ""
            raise VerificationError(f"ONNX Runtime crashed ({exc.how}) on {inputs.name}{said}",
                                    hint="run with --debug; the exported graph may not support these sizes"
                                    ) from None

    def close(self) -> None:
        """End the child process of an ``isolated`` runner (nothing otherwise)."""
        if self._child is not None:
            self._child.close()

    def _read_placement(self) -> None:
        """End profiling after the first run and record where its nodes ran."""
        try:
            if self._child is not None:
                events = self._child.end_profiling()
            else:
                with open(self.session.end_profiling()) as handle:
                    events = json.load(handle)
            self.placement = node_placement(events)
        finally:
            shutil.rmtree(self._profile_dir, ignore_errors=True)
        self.provider = describe_placement(self.placement, self.providers[0])


class _Serialized:
    """``serialize(model, model_bytes)`` when called: a source a child process loads only when
    the one before it failed (a forked child calls it in its own copy of this process)."""

    def __init__(self, model: onnx.ModelProto, model_bytes: ModelBytes | None):
        self.model, self.model_bytes = model, model_bytes

    def __call__(self) -> bytes:
        return serialize(self.model, self.model_bytes)


def _ran_past(limit: float, inputs: InputSet) -> VerificationError:
    return VerificationError(f"ONNX Runtime ran past {limit:g} s on the {inputs.name} inputs, "
                             "where eager PyTorch finished", hint="check the model's loops on these values")


def _failed(inputs: InputSet, message: str) -> VerificationError:
    return VerificationError(f"ONNX Runtime failed on the {inputs.name} inputs: {message}",
                             hint="run with --debug; the exported graph may not support these sizes")


def _session(model: onnx.ModelProto | str | os.PathLike, model_bytes: ModelBytes | None, options, providers):
    """The session of a model file, or of a proto: with its weights referred to in the output
    file being written where there is one (mapped, not copied: :meth:`ModelBytes.by_reference`),
    else from its bytes."""
    import onnxruntime as ort

    if isinstance(model, (str, os.PathLike)):
        return ort.InferenceSession(os.fspath(model), options, providers=providers)
    referred = model_bytes.by_reference(model) if model_bytes is not None else None
    if referred is not None:
        source, directory = referred
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", directory)
        with contextlib.suppress(Exception):  # a file it cannot map (no mmap there): the bytes, as without one
            return ort.InferenceSession(source, options, providers=providers)
    return ort.InferenceSession(serialize(model, model_bytes), options, providers=providers)


#: onnxruntime input type strings → the torch dtype to feed.
_ORT_FLOAT_TYPES = {
    "tensor(float16)": torch.float16,
    "tensor(float)": torch.float32,
    "tensor(double)": torch.float64,
    "tensor(bfloat16)": torch.bfloat16,
}


def _as_input_dtype(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """Cast a float tensor to the float type the session declares (e.g. fp32 → fp16 models)."""
    if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
        return tensor.to(dtype)
    return tensor


def _has_blockwise_weights(model: onnx.ModelProto) -> bool:
    """Whether ``model`` holds weight-only quantised MatMuls: with prepacking ONNX Runtime fuses
    DequantizeLinear → MatMul into MatMulNBits with int8 activations (its default
    ``session.qdq_matmulnbits_accuracy_level``), without it computes in float32 — verification
    runs them as a default session does."""
    return any(node.op_type in ("MatMulNBits", "DequantizeLinear") for node in iter_nodes(model.graph))


def _has_loops(model: onnx.ModelProto) -> bool:
    """Whether ``model`` repeats a body (Loop, Scan), whose products reuse their weights each step."""
    return any(node.op_type in ("Loop", "Scan") for node in iter_nodes(model.graph))
