"""A value None on some paths appended under a tensor condition after the check that excludes
None (issue #47, met in google-research/bert's ``WordpieceTokenizer.tokenize``: ``cur_substr =
None``, an inner ``while`` that sets it and breaks, ``if cur_substr is None: is_bad = True;
break``, then ``sub_tokens.append(cur_substr)``).

The append runs only where the value is set, and the list is read back as tensors (``torch.stack``),
where None would raise: the list takes the value, as a list grown in a loop already did
(operators/lists/selected.py). Differential: eager vs ONNX Runtime on sequences cut into 1, 2 and
3 pieces, and on ones where a start finds no piece (the bad exit), of lengths 1 to 6.
"""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits


class Pieces(torch.nn.Module):
    """WordPiece's shape: from each start, the longest piece of at most two positions whose sum
    is positive (the vocabulary); a start with no such piece makes the whole sequence bad."""

    def forward(self, x):
        is_bad = False
        start = 0
        picked = []
        while start < len(x):
            end = len(x)
            found = None
            while start < end:
                if end - start <= 2 and x[start:end].sum() > 0:
                    found = x[start:end].sum()
                    break
                end -= 1
            if found is None:
                is_bad = True
                break
            picked.append(found)
            start = end
        if is_bad:
            return torch.tensor([-1.0])
        return torch.stack(picked)


@pytest.mark.slow  # nested data-dependent loops captured and exported: several seconds
def test_a_value_none_on_some_paths_appended_after_its_none_check_equals_eager():
    model = Pieces().eval()
    rows = ([1., -3., 2., 1.], [-1.], [2.], [1., 1.], [-1., 2., -5.], [3., -1., -1., 4., 1.], [2., -1., 3.],
            [1., -2., 1., -2., 1., 5.])
    sets = [(torch.tensor(r),) for r in rows]
    outputs = [model(*s) for s in sets]
    assert any(o.tolist() == [-1.0] for o in outputs) and any(len(o) >= 2 for o in outputs), outputs
    exits = set().union(*loop_exits(model, sets).values())
    assert "left by a break" in exits and len(exits) >= 2, exits
    exported = export_to_ort(model, sets[0], dynamic_shapes={"x": {0: "n"}})
    assert exported.ops.get("Loop", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, sets)
