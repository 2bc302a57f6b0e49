"""Errors belong to the call that raised them (issue 25 item 5)."""

import pytest
import torch

import fxport
from fxport.errors import CaptureError, ConversionError


class UsesNumpy(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(x.numpy() * 2)


def test_convert_inside_an_except_block_reports_its_own_failure():
    """A sweep retrying inside ``except ConversionError:``: the caller's error is every new
    exception's ``__context__``; capture's classification must not pick it up."""
    earlier = ConversionError("an earlier model failed")
    try:
        raise earlier
    except ConversionError:
        with pytest.raises(CaptureError) as info:
            fxport.convert(UsesNumpy(), (torch.ones(3),), verify=False)
    assert info.value is not earlier
    assert ".numpy()" in str(info.value) and "test_error_boundaries.py:12" in str(info.value)


def test_a_model_defined_by_exec_gets_a_located_error_not_a_generic_one():
    """REPL, stdin and exec models have no source file: their control flow cannot be converted
    (issue 25 item 10); the error says so at the forward's line."""
    from fxport.errors import ControlFlowError

    namespace: dict = {}
    exec(  # noqa: S102 - what a REPL or `python -` does
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.sum() > 0:\n            return x * 2\n        return x - 1\n", namespace)
    with pytest.raises(ControlFlowError) as info:
        fxport.convert(namespace["Net"](), (torch.randn(3),), verify=False)
    message = str(info.value)
    assert "cannot convert Net.forward: its source code is not available" in message
    assert "at <string>:3" in message and "define the model in a .py file" in message and "\n" not in message
