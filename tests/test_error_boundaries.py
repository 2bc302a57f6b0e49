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


def test_a_broken_op_rule_is_named_at_its_line(tmp_path):
    """A typo'd ONNX op in a rule body (issue 25 item 15): the error names the rule and its line."""
    from fxport.errors import LoweringError

    rules = tmp_path / "my_rules.py"
    rules.write_text("import fxport\nfrom onnxscript import opset18 as op\n\n\n"
                     "@fxport.onnx_op('aten::special_zeta')\ndef zeta(self, other):\n    return op.Abzz(self)\n")

    class Zeta(torch.nn.Module):
        def forward(self, x):
            return torch.special.zeta(x, x)

    with pytest.raises(LoweringError) as info:
        fxport.convert(Zeta(), (torch.rand(3) + 1,), rules=[str(rules)], verify=False)
    message = str(info.value)
    assert "the op rule 'zeta' for aten::special_zeta failed: SchemaError: No schema registered for 'Abzz'" in message
    assert "my_rules.py:7" in message and "fix the rule" in message


def test_unsupported_ops_json_has_the_line_its_message_names():
    from fxport.errors import SourceLocation, UnsupportedOpsError

    error = UnsupportedOpsError([("aten::i0", SourceLocation("/m/net.py", 12, "forward")), ("aten::zeta", None)])
    data = error.to_dict()
    assert data["where"] == SourceLocation("/m/net.py", 12, "forward").to_dict()
    assert [op["op"] for op in data["ops"]] == ["aten::i0", "aten::zeta"] and data["ops"][1]["where"] is None


def test_a_mismatch_after_a_users_rule_points_at_the_rule(tmp_path):
    """A rule with wrong maths (issue 25 item 15): the hint names the user's rule, not 'report the model' alone."""
    from fxport.errors import VerificationError

    rules = tmp_path / "my_rules.py"
    rules.write_text("import fxport\nfrom onnxscript import opset18 as op\n\n\n"
                     "@fxport.onnx_op('aten::special_zeta')\ndef zeta(self, other):\n    return op.Add(self, other)\n")

    class Zeta(torch.nn.Module):
        def forward(self, x):
            return torch.special.zeta(x, x)

    with pytest.raises(VerificationError) as info:
        fxport.convert(Zeta(), (torch.rand(3) + 2,), rules=[str(rules)])
    assert "your rule aten::special_zeta (" in str(info.value) and "my_rules.py:5) rewrote this model" in str(info.value)
