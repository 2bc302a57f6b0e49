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
