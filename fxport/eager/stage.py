"""The eager stage: the model run on the example, its outputs kept as verification's reference."""

from __future__ import annotations

import time

import torch
from torch.utils import _pytree as pytree

from fxport.eager import limits as eager_limits
from fxport.eager.calls import register_output_dataclasses, run_eager


def run_eager_reference(job) -> None:
    """The eager stage (``job``: the :class:`~fxport.engine.conversion.Conversion`): the model runs
    eagerly on the example (a failure here is the model's, not the export's);
    its outputs, copied, are verification's reference for the example. The run is timed: eager
    runs on inputs fxport makes up later are budgeted from it (:class:`~fxport.eager.limits.ExampleCost`;
    a first run is cold, up to 3× a warm one for a tiny model, which errs towards longer budgets
    and smaller made-up sizes)."""
    started = time.perf_counter()
    outputs = run_eager(job.model, job.example)
    job.example_cost = eager_limits.ExampleCost.of(job.model, job.example, time.perf_counter() - started,
                                                   rewrites=job.rewrites, notes=job.warnings)
    register_output_dataclasses(outputs)
    job.example_outputs = pytree.tree_map(lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, outputs)
