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
from fxport.eager_limits import terminated_after
from fxport.errors import VerificationError
from fxport.errors import first_line as _first_line
from fxport.inputs import InputSet
from fxport.verify.providers import describe_placement, node_placement, select_providers
from fxport.report import iter_nodes
from fxport.lower.serialized import ModelBytes, serialize


class OnnxRunner:
    """An onnxruntime session fed with fxport input sets.

    Example::

        >>> runner = OnnxRunner(onnx_model, device="cpu")        # doctest: +SKIP
        >>> outputs = runner.run(InputSet((x,)))                 # doctest: +SKIP
    """

    def __init__(self, model: "onnx.ModelProto | str | os.PathLike", device: str = "cpu", *,
                 profile_placement: bool | None = None, model_bytes: ModelBytes | None = None):
        """``model``: a proto (serialised by ``model_bytes``, if given), or a model file's path (external data)."""
        import onnxruntime as ort

        self.providers = select_providers(device)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        # Verification runs each set once: threads that spin between runs only take CPU from
        # the eager reference (and from other processes) without making a run faster.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if isinstance(model, onnx.ModelProto) and not _has_loops(model):
            # Prepacking reorders every constant weight at load for repeated products; outside a
            # Loop each set uses a weight once (VGG's 500 MB: a third of a 1.4 s load, no run slower)
            options.add_session_config_entry("session.disable_prepacking", "1")
        #: Where each node ran, from a profile of the first run (on by default for CUDA, where ORT
        #: silently places nodes without a CUDA kernel on CPU): provider → ["OpType(name)", ...].
        self.placement: dict[str, list[str]] | None = None
        self._profiling = device == "cuda" if profile_placement is None else profile_placement
        if self._profiling:
            self._profile_dir = tempfile.mkdtemp(prefix="fxport-ort-profile-")
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(self._profile_dir, "run")
        try:
            self.session = _session(model, model_bytes, options, self.providers)
        except Exception as exc:
            raise VerificationError(
                f"ONNX Runtime cannot load the model: {_first_line(exc)}",
                hint="the model uses an op or domain ONNX Runtime lacks; register its custom-op "
                "library or convert with --no-verify",
            ) from exc
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.input_dtypes = [_ORT_FLOAT_TYPES.get(i.type) for i in self.session.get_inputs()]
        self.provider = self.session.get_providers()[0]

    def run(self, inputs: InputSet, limit: float | None = None) -> list[np.ndarray]:
        """ONNX Runtime's outputs; ``limit``: seconds after which the run is stopped (an error)."""
        tensors = [t.detach().cpu() for t in inputs.tensors()]
        if len(tensors) != len(self.input_names):
            raise VerificationError(
                f"the ONNX model takes {len(self.input_names)} inputs but {len(tensors)} tensors were given",
                hint="non-tensor inputs are baked into the model as constants; pass tensors for values that vary",
            )
        for spec, tensor in zip(self.session.get_inputs(), tensors):
            fixed = [(axis, size) for axis, size in enumerate(spec.shape) if isinstance(size, int)]
            if len(spec.shape) != tensor.dim() or any(tensor.shape[axis] != size for axis, size in fixed):
                raise VerificationError(
                    f"the {inputs.name} inputs give {spec.name} shape {list(tensor.shape)} but the model "
                    f"was exported with {list(spec.shape)}",
                    hint="declare the varying axes dynamic (--dynamic NAME:AXIS=DIM or dynamic_shapes)",
                )
        feed = {name: _to_numpy(_as_input_dtype(t, dtype))
                for name, t, dtype in zip(self.input_names, tensors, self.input_dtypes)}
        import onnxruntime as ort

        options = ort.RunOptions()
        if limit is not None:
            options.log_severity_level = 4  # a stopped run's "Exiting due to terminate flag" is ours to report
        try:
            with terminated_after(options, limit):
                outputs = self.session.run(None, feed, options)
        except Exception as exc:
            if options.terminate:
                raise VerificationError(f"ONNX Runtime ran past {limit:g} s on the {inputs.name} inputs, "
                                        "where eager PyTorch finished",
                                        hint="check the model's loops on these values") from exc
            raise VerificationError(
                f"ONNX Runtime failed on the {inputs.name} inputs: {_first_line(exc)}",
                hint="run with --debug; the exported graph may not support these sizes",
            ) from exc
        if self._profiling and self.placement is None:
            self._read_placement()
        return outputs

    def _read_placement(self) -> None:
        """End profiling after the first run and record where its nodes ran."""
        path = self.session.end_profiling()
        try:
            with open(path) as handle:
                self.placement = node_placement(json.load(handle))
        finally:
            shutil.rmtree(self._profile_dir, ignore_errors=True)
        self.provider = describe_placement(self.placement, self.providers[0])


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


def _has_loops(model: onnx.ModelProto) -> bool:
    """Whether ``model`` repeats a body (Loop, Scan), whose products reuse their weights each step."""
    return any(node.op_type in ("Loop", "Scan") for node in iter_nodes(model.graph))
