"""ONNX outputs are named after what forward returns, where that is known (issue 25 item 16)."""

import onnxruntime as ort
import torch

import fxport
from fxport.lower.lowering import return_names


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(2, 2)

    def forward(self, x):
        hidden = x.sum(0)
        if x.mean() > 0:  # calls a submodule: an ONNX If, whose body reads names of the main graph
            logits = self.head(x)
        else:
            logits = x - 1
        return logits, hidden


def test_outputs_take_the_returned_names_and_the_file_still_matches_eager():
    model = TwoOutputs().eval()
    result = fxport.convert(model, (torch.rand(3, 2),), dynamic_shapes={"x": {0: "b"}})
    assert result.verified and "If" in result.op_counts()
    assert [o.name for o in result.model.graph.output] == ["logits", "hidden"]
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = -torch.rand(5, 2)
    logits, hidden = session.run(["logits", "hidden"], {"x": x.numpy()})
    expected = model(x)
    assert torch.allclose(torch.from_numpy(logits), expected[0]) and torch.allclose(torch.from_numpy(hidden), expected[1])


def test_names_only_where_every_return_gives_the_same_plain_names():
    def expression(self, x):
        return x * 2

    def two_paths(self, x):
        if x:
            return x
        y = x
        return y

    def nested(self, x):
        def helper():
            return 1 + 1
        out = helper()
        return out

    assert return_names(expression) is None and return_names(two_paths) is None
    assert return_names(nested) == ["out"]
