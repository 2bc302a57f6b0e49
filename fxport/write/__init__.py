"""The write stage: the model (and its external data) at the output path, atomically."""
