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
    """A Python list written by position inside a data-dependent loop (found porting r9y9's Tacotron).
    A list bound to a list display converts since round nine (its entries are carried,
    ``_fx.targets.entry_written``); one built by ``list(...)`` is not known to be a list when the
    converter reads the source, so its write is still refused."""

    def forward(self, x):
        hs = list(torch.zeros(1, 1, 4).unbind(0))
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


class EnclosingVariableReplacedInABranch(torch.nn.Module):
    """A converted statement's write-back into a variable of the enclosing function
    (``_fx.targets.into_enclosing``, what the converter emits for a nested function's write) run
    inside a ``torch.cond`` branch, with a value of another shape, which it refuses."""

    def forward(self, x):
        from fxport.controlflow.operators.targets import into_enclosing

        def grown(x):
            into_enclosing(x, torch.cat([x, x]), "x")
            return x + 1

        return torch.cond(x.sum() > 0, grown, lambda x: x - 1, (x,))


def test_a_write_back_refused_inside_a_cond_branch_is_fxports_own_line():
    """targets.py's refusals read the stack only outside a traced body (``refuse_here``): raised
    inside the branch dynamo traces, it is read back from torch's error (``find_error``, as the
    operators that call ``torch.cond`` read it) as the refusal itself, at the user's line, not as
    torch's complaint about ``sys._getframe``. (Exported directly: an eager run of ``torch.cond``
    traces the branch too, where the model's own eager check would stop.)"""
    from fxport.controlflow.operators.failures import find_error

    model = EnclosingVariableReplacedInABranch()
    with pytest.raises(Exception) as caught:
        torch.export.export(model, (torch.ones(2, 3),), strict=False)
    error = find_error(caught.value)
    message = str(error)
    assert isinstance(error, fxport.ConversionError) and "\n" not in message.strip(), message
    assert "'x', a variable of the enclosing function, is replaced by a converted statement" in message, message
    assert "_getframe" not in message and "could not trace" not in message, message
    assert f":{line_in_source(type(model).forward, 'into_enclosing(x, torch.cat')};" in message, message
