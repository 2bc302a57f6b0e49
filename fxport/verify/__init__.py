"""The verify and coverage stages: ONNX Runtime against eager PyTorch (:mod:`fxport.verify.stage`,
:mod:`~fxport.verify.verification`) as one plan says (:mod:`~fxport.verify.plan`, its passes in
:mod:`~fxport.verify.precision`), on input sets in the model's domain (:mod:`fxport.verify.inputs`),
judged by a chain of judges (:mod:`fxport.verify.judges`: fixed tolerances, tied rows, float64
noise, replayed decisions); then what those sets exercised of the converted control flow
(:mod:`~fxport.verify.exercise`).
"""
