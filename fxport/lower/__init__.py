"""The lower and precision stages: the dynamo exporter with the rules' op translations
(:mod:`fxport.lower.lowering`, :mod:`~fxport.lower.exporter`), the ONNX ``Loop`` of loops whose
state grows (:mod:`~fxport.lower.grown_loops`), loop-invariant hoisting, ONNX Runtime fusions,
external data, the graph serialised once, fp16/int8 (:mod:`~fxport.lower.precision`), and the
scan for ops without a translation (:mod:`~fxport.lower.missing_ops`).

A stage package imports nothing from a later stage's package (``tests/test_architecture.py``).
"""
