"""How far a weight-only quantised file is from the float32 model: reported, not judged.

Verification compares a weight-only file with eager running the *same* quantised weights
(:meth:`~fxport.lower.weight_quantization.WeightQuantization.fake_quantized`), so its verdict is
about the conversion. What quantisation itself changed is this module's: the file's outputs
against the float32 model's on the same input sets — the share of equal ids for integer
outputs (for a generator, the generated ids only: the prompt is copied), the cosine similarity
for float outputs. A row that stops at another step than the float32 model's counts the
positions one of them lacks as different.

Example::

    >>> import numpy as np
    >>> share_of_equal_ids([np.array([[5, 1, 2, 3]])], [np.array([[5, 1, 2, 9, 9]])], prefix=1)
    (2, 4)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fxport.eager.calls import run_eager
from fxport.eager.inputs import InputSet
from fxport.verify.compare import flatten_outputs, to_numpy


def share_of_equal_ids(produced: list[np.ndarray], expected: list[np.ndarray], prefix: int = 0) -> tuple[int, int]:
    """(equal, compared) over the integer outputs from column ``prefix`` on (rank ≥ 2: per row)."""
    equal = compared = 0
    for mine, theirs in zip(produced, expected):
        mine, theirs = np.asarray(mine), np.asarray(theirs)
        if mine.dtype.kind not in "iub" or theirs.dtype.kind not in "iub":
            continue
        if mine.ndim < 2 or theirs.ndim < 2 or mine.shape[0] != theirs.shape[0]:
            same = mine.shape == theirs.shape
            equal += int((mine == theirs).sum()) if same else 0
            compared += max(mine.size, theirs.size)
            continue
        mine, theirs = mine.reshape(mine.shape[0], -1)[:, prefix:], theirs.reshape(theirs.shape[0], -1)[:, prefix:]
        width = min(mine.shape[1], theirs.shape[1])
        equal += int((mine[:, :width] == theirs[:, :width]).sum())
        compared += mine.shape[0] * max(mine.shape[1], theirs.shape[1])
    return equal, compared


def float_cosine(produced: list[np.ndarray], expected: list[np.ndarray]) -> float | None:
    """The cosine similarity of the float outputs together (None when there are none or shapes differ)."""
    pairs = [(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()) for a, b in zip(produced, expected)
             if np.asarray(a).dtype.kind == "f" and np.asarray(a).shape == np.asarray(b).shape]
    if not pairs:
        return None
    mine, theirs = np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs])
    finite = np.isfinite(mine) & np.isfinite(theirs)
    norm = np.linalg.norm(mine[finite]) * np.linalg.norm(theirs[finite])
    return float(np.dot(mine[finite], theirs[finite]) / norm) if norm else 1.0


def agreement_with_float32(model: Any, module: torch.nn.Module, input_sets: list[InputSet],
                           known: dict[int, Any] | None = None) -> dict:
    """The file ``model`` (a proto or a path) against the float32 ``module`` on ``input_sets``
    (``known``: id(set) → eager outputs already computed): ``{"sets", "equal_ids",
    "compared_ids", "ids_share", "cosine"}``.

    Example::

        >>> agreement_with_float32(quantized, generator, sets)["ids_share"]   # doctest: +SKIP
        0.83
    """
    from fxport.verify.onnx_runner import OnnxRunner

    runner = OnnxRunner(model, "cpu")
    equal = compared = 0
    cosines = []
    try:
        for input_set in input_sets:
            expected = (known or {}).get(id(input_set))
            if expected is None:
                expected = run_eager(module, input_set)
            theirs = [to_numpy(value) for value in flatten_outputs(expected)]
            mine = runner.run(input_set)
            prefix = _prefix(module, input_set)
            same, total = share_of_equal_ids(mine, theirs, prefix)
            equal, compared = equal + same, compared + total
            cosine = float_cosine(mine, theirs)
            if cosine is not None:
                cosines.append(cosine)
    finally:
        runner.close()
    return {"sets": len(input_sets), "equal_ids": equal, "compared_ids": compared,
            "ids_share": equal / compared if compared else None, "cosine": min(cosines) if cosines else None}


def _prefix(module: torch.nn.Module, input_set: InputSet) -> int:
    """The columns of a generator's output that are its prompt (0 for other models)."""
    prefix_length = getattr(module, "prefix_length", None)
    if prefix_length is None or not input_set.args:
        return 0
    try:
        return int(prefix_length(input_set.args[0]))
    except (NotImplementedError, TypeError, AttributeError):
        return 0


def describe(agreement: dict | None) -> str:
    """One line: ``"ids agree with the fp32 model on 83% of generated ids (5 input sets)"``.

    >>> describe({"sets": 2, "equal_ids": 5, "compared_ids": 6, "ids_share": 5 / 6, "cosine": None})
    'ids agree with the fp32 model on 83% of generated ids (5 of 6, 2 input sets)'
    """
    if not agreement:
        return "agreement with the fp32 model not measured"
    sets = f"{agreement['sets']} input set{'s' if agreement['sets'] != 1 else ''}"
    said = []
    if agreement.get("ids_share") is not None:
        said.append(f"ids agree with the fp32 model on {agreement['ids_share']:.0%} of generated ids "
                    f"({agreement['equal_ids']} of {agreement['compared_ids']}, {sets})")
    if agreement.get("cosine") is not None:
        said.append(f"cosine similarity to the fp32 model {agreement['cosine']:.4f} (worst of {sets})")
    return "; ".join(said)
