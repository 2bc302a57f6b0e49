"""CUDA: ONNX Runtime's CUDA execution provider vs eager PyTorch on CUDA, same models.

On a machine without a CUDA device (or without onnxruntime-gpu) the section has one row saying
it was skipped and why. Target: reported, not asserted.
"""

from __future__ import annotations

import copy

import torch

import fxport
from benchmarks.common import Section, adaptive_rounds, ms, ort_session, paired_medians, ratio
from benchmarks.convert_time import models

HEADER = ["model", "eager CUDA ms", "ORT CUDA ms", "ORT / eager", "nodes on CPU"]


def cuda_missing_reason() -> str | None:
    """Why this machine cannot run the section, or None when it can."""
    import onnxruntime as ort

    if not torch.cuda.is_available():
        return "skipped: no CUDA device present"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return "skipped: onnxruntime has no CUDAExecutionProvider (pip install 'fxport[cuda]')"
    return None


def synchronized(fn):
    """``fn`` followed by a device synchronisation, so wall time covers the GPU work."""
    def run():
        fn()
        torch.cuda.synchronize()
    return run


def cuda_ort_runner(session, args):
    """Run ``session`` with inputs and outputs bound to CUDA memory (no host copies timed)."""
    import onnxruntime as ort

    binding = session.io_binding()
    for spec, tensor in zip(session.get_inputs(), args):
        binding.bind_ortvalue_input(spec.name, ort.OrtValue.ortvalue_from_numpy(tensor.cpu().numpy(), "cuda", 0))
    for spec in session.get_outputs():
        binding.bind_output(spec.name, "cuda")
    return lambda: session.run_with_iobinding(binding)


def run(repeats: int = 3) -> Section:
    reason = cuda_missing_reason()
    note = ("Median latency per call (ms) on the GPU, eager PyTorch on CUDA vs the fxport ONNX in "
            "onnxruntime's CUDAExecutionProvider (I/O bound to device memory), called alternately. "
            "Nodes ORT placed on CPU come from a profile of the verification run.")
    if reason:
        return Section("CUDA: ONNX Runtime CUDA EP vs eager CUDA", note, HEADER,
                       [["all", "—", "—", "—", reason]])
    rows = []
    for name, module, args, dynamic in models():
        result = fxport.convert(module, args, dynamic_shapes=dynamic, device="cuda")
        fallback = next((w for w in result.warnings if "CPU" in w), "none")
        on_gpu = copy.deepcopy(module).to("cuda")
        cuda_args = tuple(a.to("cuda") for a in args)

        def eager():
            with torch.no_grad():
                on_gpu(*cuda_args)

        run_ort = cuda_ort_runner(ort_session(result.model, device="cuda"), args)
        run_eager = synchronized(eager)
        rounds = adaptive_rounds(run_eager, minimum=10 * repeats)
        eager_s, ort_s = paired_medians(run_eager, synchronized(run_ort), rounds)
        rows.append([name, ms(eager_s), ms(ort_s), ratio(ort_s, eager_s), fallback])
    return Section("CUDA: ONNX Runtime CUDA EP vs eager CUDA", note, HEADER, rows)
