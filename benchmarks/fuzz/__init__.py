"""Differential fuzzing of fxport's converter: random programs, eager vs ONNX Runtime."""
