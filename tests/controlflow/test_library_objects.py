"""A transformers cache updated in a branch on a tensor condition: carried through an ONNX
``If`` as its tensors (the branch that grows it and the one that does not give different
lengths), equal to eager on both branches, cache lengths 0, 1 and N and batch 1 and N; an
in-place update the if does not assign is refused at the user's line."""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from fxport.errors import ControlFlowError  # noqa: E402
from tests.controlflow import library_object_models as m  # noqa: E402
from tests.controlflow._util import export_to_ort, run_ort  # noqa: E402

B, S = torch.export.Dim("batch"), torch.export.Dim("seq")
DYNAMIC = ({0: B, 2: S}, {0: B, 2: S}, {0: B}, {0: B}, None)


def inputs(batch: int, seq: int, go: float, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    kv = [torch.randn(batch, 2, n, 4, generator=g) for n in (seq, seq, 1, 1)]
    return (*kv, torch.tensor([go]))


def test_a_cache_grown_in_one_branch_is_carried_through_an_if():
    model = m.GrowWhenAsked().eval()
    exported = export_to_ort(model, inputs(2, 5, 1.0), dynamic_shapes=DYNAMIC)
    assert exported.ops.get("If", 0) == 1, exported.ops
    for batch, seq, go in [(2, 5, 1.0), (2, 5, -1.0), (1, 1, 1.0), (1, 1, -1.0), (3, 7, -2.0), (3, 0, 1.0),
                           (2, 2, 0.0), (1, 9, 3.0)]:
        args = inputs(batch, seq, go, seed=batch * 10 + seq)
        with torch.no_grad():
            expected = [t.numpy() for t in model(*args)]
        got = run_ort(exported, args)
        for e, o in zip(expected, got):
            assert e.shape == o.shape, (batch, seq, go, e.shape, o.shape)
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6)


def test_a_cache_changed_in_place_in_a_branch_is_refused_at_its_line():
    with pytest.raises(ControlFlowError) as caught:
        export_to_ort(m.GrowInPlace().eval(), inputs(2, 5, 1.0), dynamic_shapes=DYNAMIC)
    message = str(caught.value)
    assert "changes the DynamicCache 'cache' in place" in message
    assert "library_object_models.py:38" in message and "\n" not in message
