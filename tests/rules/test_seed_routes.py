"""The seed tutorial's three custom-op routes, as fxport rules."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import fxport
import fxport.testing
from fxport.rules import rule_of_node

CUSTOM_OPS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "custom_ops")


@pytest.fixture(autouse=True, scope="module")
def importable_examples():
    sys.path.insert(0, CUSTOM_OPS)
    yield
    sys.path.remove(CUSTOM_OPS)


def test_route_1_missing_aten_mapping_is_a_builtin_rule():
    """asinh is translated by the exporter today, so the route is shown with hypot."""
    class Net(torch.nn.Module):
        def forward(self, a, b):
            return torch.asinh(a) + torch.hypot(a, b)

    check = fxport.testing.assert_rule_converts(Net(), (torch.randn(5), torch.randn(5)),
                                                expect_fired=["aten::hypot"])
    assert check.max_abs_error < 1e-5


def test_route_2_custom_op_becomes_a_custom_domain_node_and_verification_says_why():
    from deform_conv import DeformNet

    rules = os.path.join(CUSTOM_OPS, "deform_conv_rules.py")
    x = torch.randn(1, 3, 10, 10)
    with pytest.raises(fxport.VerificationError, match="ONNX Runtime cannot load the model.*"
                                                       "custom:deform_conv2d"):
        fxport.convert(DeformNet(), (x,), rules=rules)
    result = fxport.convert(DeformNet(), (x,), rules=rules, verify=False)
    nodes = [n for n in result.model.graph.node if n.domain == "custom"]
    assert [n.op_type for n in nodes] == ["deform_conv2d"]
    assert rule_of_node(nodes[0]) == "fxport_examples::deform_conv2d"
    assert {a.name for a in nodes[0].attribute} == {"stride", "padding", "dilation"}


def test_route_3_opaque_autograd_function_patched_to_standard_ops():
    from my_add_model import MyAdd

    a, b = torch.randn(1, 3, 10, 10), torch.randn(1, 3, 10, 10)
    with pytest.raises(fxport.CaptureError):
        fxport.convert(MyAdd(), (a, b), verify=False)
    check = fxport.testing.assert_rule_converts(
        MyAdd(), (a, b), rules=os.path.join(CUSTOM_OPS, "my_add_rules.py"),
        expect_fired=["patch:my_lib.MyAddFunction.forward"])
    assert set(check.result.op_counts()) == {"Add", "Mul", "Sigmoid"}
