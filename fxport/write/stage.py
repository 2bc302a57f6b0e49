"""The write stage: the model (and its external data) at the output path, atomically."""

from __future__ import annotations

import dataclasses

from fxport.engine.conversion import Conversion
from fxport.common.files import write_atomically
from fxport.lower.external import load_weights_into


def write_output(job: Conversion) -> None:
    """The model (and its external data) at the output path, atomically; without one, a staged
    model's weights read into its proto (the caller's ``result.model``)."""
    lowered = job.lowered
    if job.output is None:
        job.lowered = dataclasses.replace(lowered, proto=load_weights_into(lowered.proto, lowered.home), home=None)
    elif lowered.staged:
        job.output_path = job.staging.commit(lowered.proto, lowered.home)
    else:
        job.output_path = (job.staging.commit_file(lowered.proto, lowered.model_bytes)
                           or write_atomically(lowered.proto, job.output, lowered.model_bytes))


def writes(job: Conversion) -> bool:
    """Whether the write stage applies: an output path, or weights staged that the caller's model needs."""
    return job.output is not None or job.lowered.staged
