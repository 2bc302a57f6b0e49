"""Classes of loops from public code that fxport refused or lowered wrongly (issue #47): each
converts, equals eager on inputs that take every exit, and holds the Loop it was converted to."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import fxport
from tests.controlflow import loop_class_models as m
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


def _positive(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) + 0.1


def test_sinkhorn_with_an_item_error_equals_eager_at_every_exit():
    model = m.SinkhornItemError()
    exported = export_to_ort(model, (_positive(4, 3),), dynamic_shapes={"cost": {0: "n", 1: "m"}})
    square = torch.full((3, 3), 1 / 3)  # doubly stochastic: converged after the first trip
    inputs = [(_positive(4, 3, seed=1),), (_positive(1, 5, seed=2),), (_positive(6, 2, seed=3),), (square,)]
    assert {1, 40} <= set().union(*trip_counts(model, inputs).values())  # error below tol at once; the trip bound
    assert_matches_eager(model, exported, inputs, atol=1e-4, rtol=1e-3)
    assert exported.ops.get("Loop")


def test_a_python_int_level_written_into_a_float_buffer_loads_and_equals_eager():
    model = m.BfsLevels()
    chain = torch.tensor([[0., 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
    exported = export_to_ort(model, (chain,), dynamic_shapes={"adjacency": {0: "n", 1: "n"}})
    star = torch.tensor([[0., 1, 1], [1, 0, 0], [1, 0, 0]])
    alone = torch.zeros(1, 1)
    inputs = [(chain,), (star,), (alone,), (torch.zeros(3, 3),)]
    assert {1, 3, 4} <= set().union(*trip_counts(model, inputs).values())  # break at once; 2 and 3 levels
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class _TransposedMatVec(torch.nn.Module):
    def forward(self, M, u):
        return 1.0 / (M.t() @ u)


def _ort_fuses_transposed_matvec_wrongly() -> bool:
    import onnx.helper as h

    graph = h.make_graph([h.make_node("Transpose", ["M"], ["t"], perm=[1, 0]), h.make_node("MatMul", ["t", "u"], ["y"])],
                         "g", [h.make_tensor_value_info("M", 1, ["n", "m"]), h.make_tensor_value_info("u", 1, ["n"])],
                         [h.make_tensor_value_info("y", 1, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    matrix, vector = _positive(4, 3).numpy(), np.full(4, 0.25, np.float32)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"M": matrix, "u": vector})[0]
    return not np.allclose(got, matrix.T @ vector, atol=1e-5)


def test_a_transposed_matrix_times_a_vector_is_written_as_onnx_runtime_computes_it():
    model = _TransposedMatVec()
    result = fxport.convert(model, (_positive(4, 3), _positive(4)), dynamic_shapes={"M": {0: "n", 1: "m"}, "u": {0: "n"}})
    assert result.verified
    ops = result.op_counts()
    assert ops.get("Unsqueeze") and ops.get("Squeeze") and ops.get("MatMul") == 1
    from tests.conftest import assert_matches_eager as equals_eager

    for n, k in [(1, 5), (6, 2), (3, 3)]:
        equals_eager(model, result.model, _positive(n, k, seed=n), _positive(n, seed=k))


def test_without_the_workaround_verification_refuses_the_file_onnx_runtime_miscomputes(monkeypatch):
    """The seeded counterpart: the workaround off, ONNX Runtime's fused product differs from eager
    and verification refuses the file (where this ONNX Runtime still miscomputes the pattern)."""
    if not _ort_fuses_transposed_matvec_wrongly():
        pytest.skip(f"onnxruntime {ort.__version__} computes MatMul(Transpose(A), v) right")
    import fxport.lower.lowering as lowering

    monkeypatch.setattr(lowering, "apply_ort_workarounds", lambda model: {})
    with pytest.raises(fxport.VerificationError):
        fxport.convert(_TransposedMatVec(), (_positive(4, 3), _positive(4)), dynamic_shapes={"M": {0: "n", 1: "m"}, "u": {0: "n"}})
