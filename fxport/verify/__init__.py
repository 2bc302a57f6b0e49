"""The verify and coverage stages: ONNX Runtime against eager PyTorch (:mod:`fxport.verify.stage`,
:mod:`~fxport.verify.verification`), on input sets in the model's domain (:mod:`fxport.verify.inputs`),
judged by one comparer (:mod:`~fxport.verify.compare`) with its float64 reference, tied rows and
replayed decisions; then what those sets exercised of the converted control flow
(:mod:`~fxport.verify.exercise`).
"""
