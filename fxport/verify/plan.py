"""What one verification is asked to do: a frozen plan, built once from a run's options.

:func:`fxport.verify.verification.verify_model` takes the plan instead of a parameter per
setting; the verify and coverage stages build it from the ``Conversion``
(:func:`fxport.verify.stage.verification_plan`), a test from a few keywords
(:meth:`VerificationPlan.build`). Its ``passes`` are the file's precision read as runs of the
verifier (:mod:`fxport.verify.precision`), its ``acceptance`` the criteria every judge applies
(:mod:`fxport.verify.judges`).

Example::

    >>> plan = VerificationPlan.build(atol=1e-3, precision="fp16", dynamic_axes={0: {0: "batch"}})
    >>> plan.acceptance.atol, [p.label for p in plan.passes]
    (0.001, ['', ' vs eager fp16'])
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from fxport.eager.inputs import InputSet
from fxport.lower.serialized import ModelBytes
from fxport.verify.compare import Acceptance
from fxport.verify.inputs.domains import InputDomain
from fxport.verify.precision import Pass, precision_passes


@dataclasses.dataclass(frozen=True)
class VerificationPlan:
    """Everything one verification shares across its passes and input sets.

    Attributes:
        device: where eager and ONNX Runtime run (the module is copied there, never moved).
        passes: the runs of the verifier (:func:`~fxport.verify.precision.precision_passes`).
        acceptance: the criteria: the user's ``--atol``/``--rtol``, the outputs a sort orders
            (``sort_keys``, whose tied rows may be paired); each pass adds its own.
        generate: add generated input sets after the first (the example).
        generated_sets: those sets when already drawn (the pipeline reuses them for coverage);
            None draws them with ``seed``, ``bounds`` and ``domains`` along ``dynamic_axes``.
        dynamic_axes: ``{input index: {axis: name}}``; ``bounds``: the dimensions' ranges
            (:class:`~fxport.capture.dynamic_dims.DimRange` by input and axis).
        domains: generated values stay inside the model's domain (:mod:`fxport.verify.inputs.domains`).
        program: the program the exporter translated into the file (its node names are the
            file's value names): the decision replay runs it; None: no replay.
        decisions: the decision rules replayed (the rule set's); None: the built-in ones.
        float_model: int8's float32 export (its first pass verifies it).
        known_outputs: eager's outputs already computed on the CPU, by ``id`` of the input set.
        model_bytes: the file's graph serialised once (:mod:`fxport.lower.serialized`).
        notes: receives one-line warnings (nodes ONNX Runtime placed on CPU, sets left out).
        on_input_set: called with each set's name before it runs (the CLI's status line).
    """

    device: str = "cpu"
    passes: tuple[Pass, ...] = (Pass(),)
    acceptance: Acceptance = Acceptance()
    generate: bool = True
    generated_sets: Sequence[InputSet] | None = None
    seed: int = 1234
    dynamic_axes: dict[int, dict[int, str]] | None = None
    bounds: dict | None = None
    domains: dict[int, InputDomain] | None = None
    program: Any = None
    decisions: tuple | None = None
    float_model: Any = None
    known_outputs: dict[int, Any] | None = None
    model_bytes: ModelBytes | None = None
    notes: list[str] | None = None
    on_input_set: Callable[[str], None] | None = None

    @classmethod
    def build(cls, *, precision: str = "fp32", min_cosine: float | None = None, atol: float | None = None,
              rtol: float | None = None, sort_keys: frozenset[int] | None = None, **fields: Any) -> "VerificationPlan":
        """A plan from options as a user states them: ``precision`` (and int8's ``min_cosine``)
        become the passes, ``atol``/``rtol``/``sort_keys`` the acceptance; ``fields`` are the plan's."""
        acceptance = dataclasses.replace(fields.pop("acceptance", Acceptance()), atol=atol, rtol=rtol,
                                         sort_keys=sort_keys)
        return cls(passes=precision_passes(precision, min_cosine), acceptance=acceptance, **fields)

    def acceptance_of(self, step: Pass) -> Acceptance:
        """The criteria of one pass: the plan's, with the pass's float16 tolerances or cosine."""
        acceptance = self.acceptance
        return dataclasses.replace(
            acceptance, tolerance_dtype=step.tolerance_dtype or acceptance.tolerance_dtype,
            min_cosine=acceptance.min_cosine if step.min_cosine is None else step.min_cosine)
