"""Capture refusals say where the data-dependent code is and what to do — never a wrong hint."""

import os

import pytest
import torch

import fxport
from tests.conftest import line_of

transformers = pytest.importorskip("transformers")


class ItemAsNumber(torch.nn.Module):
    """A number read from a tensor that the code needs as a Python number (a format): ``x * f`` alone
    converts (the number stays symbolic, tests/controlflow/test_numbers_in_bodies.py)."""

    def forward(self, x, s):
        f = float(s.item())
        return x * float("%.2f" % f) + 1


class EagerExpertsMixtral(torch.nn.Module):
    """transformers' eager experts loop (`for expert_idx in expert_hit:` in the modeling file)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        config = transformers.MixtralConfig(num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                                            num_attention_heads=2, num_key_value_heads=2, num_local_experts=4,
                                            num_experts_per_tok=2, vocab_size=100, max_position_embeddings=64)
        config._experts_implementation = "eager"
        self.model = transformers.MixtralModel(config)

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def test_a_number_read_from_a_tensor_is_named_without_a_wrong_hint():
    with pytest.raises(fxport.CaptureError) as info:
        fxport.convert(ItemAsNumber(), (torch.randn(2, 3), torch.tensor(2.0)))
    message = str(info.value)
    assert line_of(__file__, 'return x * float("%.2f" % f) + 1') in message.replace(os.sep, "/").split(" at ")[-1]
    assert ".item()" in message and "leave control-flow conversion on (the default)" not in message


def test_library_control_flow_names_the_library_line_and_the_users():
    with pytest.raises(fxport.CaptureError) as info:  # converted by default (tests/test_library_conversion.py)
        fxport.convert(EagerExpertsMixtral(), (torch.randint(0, 100, (2, 8)),), convert_libraries=False)
    message = str(info.value)
    assert "library code at transformers/models/mixtral/modeling_mixtral.py:" in message
    assert "library code conversion is off" in message and "--no-convert-libraries" in message
    assert line_of(__file__, "return self.model(input_ids=input_ids") in message
    assert "experts_implementation" in message and "\n" not in message
