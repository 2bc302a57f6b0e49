"""fxport's own refusals raised while torch traces a converted loop body or branch reach the user as
themselves — one line at the user's line — not as torch's complaint about tracing fxport's
error reporting (``sys._getframe``), which is what a refusal raised with the stack read in the
body used to become."""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import line_in_source


class ListWrittenByIndexInALoop(torch.nn.Module):
    """A Python list written by position inside a data-dependent loop (found porting r9y9's Tacotron)."""

    def forward(self, x):
        hs = [torch.zeros(1, 4)]
        while True:
            for idx in range(len(hs)):
                hs[idx] = hs[idx] + x
            if (hs[0] > 3).all():
                break
        return hs[0]


@pytest.mark.parametrize("model, line_texts, words", [
    # located at the write or at the Python loop around it that the traced body unrolls
    (ListWrittenByIndexInALoop(), ("hs[idx] = hs[idx] + x", "for idx in range(len(hs)):"),
     "a list is changed with [...] = inside a data-dependent loop"),
])
def test_a_refusal_inside_a_traced_body_is_fxports_own_line(model, line_texts, words):
    with pytest.raises(fxport.ConversionError) as caught:
        fxport.convert(model, (torch.ones(1, 4),), verify=False)
    message = str(caught.value)
    assert "\n" not in message.strip() and words in message, message
    assert "_getframe" not in message and "could not trace" not in message, message
    assert any(f":{line_in_source(type(model).forward, text)};" in message for text in line_texts), message
