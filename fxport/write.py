"""The write stage: the model (and its external data) at the output path, atomically."""

from __future__ import annotations

from fxport.conversion import Conversion
from fxport.files import write_atomically
from fxport.lower.external import load_weights_into


def write_output(job: Conversion) -> None:
    """The model (and its external data) at the output path, atomically; in memory without one."""
    home = job.staging.home(job.onnx_model)
    if job.output is None:
        job.onnx_model = load_weights_into(job.onnx_model, home)
    else:
        job.output_path = (job.staging.commit(job.onnx_model) if home
                           else job.staging.commit_file(job.onnx_model, job.model_bytes)
                           or write_atomically(job.onnx_model, job.output, job.model_bytes))
