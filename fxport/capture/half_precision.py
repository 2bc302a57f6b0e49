"""Capture at reduced precision: ``--precision fp16`` exports a float16 *copy* of the module.

The user's module is never converted; inputs are cast to half where they are float.

Example::

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    >>> half = half_copy(net)
    >>> half[0].weight.dtype, net[0].weight.dtype
    (torch.float16, torch.float32)
"""

from __future__ import annotations

import copy

import torch

from fxport.eager.inputs import InputSet


def half_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A float16 deep copy of ``module`` (integer buffers untouched); ``module`` is not changed."""
    return copy.deepcopy(module).half()


def half_inputs(inputs: InputSet) -> InputSet:
    """``inputs`` with every float32/float64 tensor cast to float16 (others untouched).

    Example::

        >>> half_inputs(InputSet((torch.ones(2), torch.ones(2, dtype=torch.int64)))).args[0].dtype
        torch.float16
    """
    return inputs.map_tensors(lambda _, t: t.half() if t.dtype in (torch.float32, torch.float64) else t)


def exported_at_precision(module: torch.nn.Module, example: InputSet, precision: str) -> tuple[torch.nn.Module, InputSet]:
    """The module and example inputs to capture: a float16 copy for fp16, the originals otherwise."""
    if precision == "fp16":
        return half_copy(module), half_inputs(example)
    return module, example
