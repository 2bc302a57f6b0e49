"""ONNX Runtime's execution providers: which to ask for, and where a run's nodes actually ran.

For ``--device cuda`` ONNX Runtime silently places nodes without a CUDA kernel on the CPU; a
profile of the first run says which (:func:`node_placement`), and verification warns in one line
(:func:`fallback_warning`).
"""

from __future__ import annotations

from fxport.errors import ConversionError


def node_placement(profile_events: list[dict]) -> dict[str, list[str]]:
    """Provider → nodes ("OpType(name)") from an onnxruntime profile (chrome-trace events).

    Example::

        >>> node_placement([{"cat": "Node", "name": "mm_kernel_time",
        ...                  "args": {"op_name": "MatMul", "provider": "CUDAExecutionProvider"}}])
        {'CUDAExecutionProvider': ['MatMul(mm)']}
    """
    placement: dict[str, list[str]] = {}
    for event in profile_events:
        name = event.get("name", "")
        args = event.get("args") or {}
        if event.get("cat") != "Node" or not name.endswith("_kernel_time") or "provider" not in args:
            continue
        node = f"{args.get('op_name', '?')}({name[:-len('_kernel_time')]})"
        nodes = placement.setdefault(args["provider"], [])
        if node not in nodes:
            nodes.append(node)
    return placement


def describe_placement(placement: dict[str, list[str]], requested: str) -> str:
    """The provider actually used, e.g. ``CUDAExecutionProvider (2 of 40 nodes on CPU: Erf, Shape)``.

    When nothing ran on ``requested``, the provider that did run everything is returned.
    """
    total = sum(len(nodes) for nodes in placement.values())
    if requested not in placement:
        return next(iter(placement), requested)
    elsewhere = {provider: nodes for provider, nodes in placement.items() if provider != requested}
    if not elsewhere:
        return requested
    notes = []
    for provider, nodes in elsewhere.items():
        ops = sorted({node.split("(")[0] for node in nodes})
        notes.append(f"{len(nodes)} of {total} nodes on {provider.replace('ExecutionProvider', '')}: {', '.join(ops)}")
    return f"{requested} ({'; '.join(notes)})"


def fallback_warning(placement: dict[str, list[str]] | None, requested: str) -> str | None:
    """A one-line warning when some nodes did not run on ``requested`` (None when all did)."""
    if not placement or set(placement) <= {requested}:
        return None
    description = describe_placement(placement, requested)
    if requested not in placement:
        return f"ONNX Runtime ran every node on {description}, not {requested}; the verification is a CPU result"
    return (f"ONNX Runtime fell back to CPU for some nodes: {description.split(' (', 1)[1][:-1]} "
            "(ops without a CUDA kernel, or shape arithmetic ORT keeps on CPU by design)")


def select_providers(device: str) -> list[str]:
    """ONNX Runtime providers for ``device`` ("cpu", "cuda"); cuda needs onnxruntime-gpu."""
    import onnxruntime as ort

    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ConversionError(
                "--device cuda needs onnxruntime's CUDAExecutionProvider, which is not installed",
                hint="pip install 'fxport[cuda]' (onnxruntime-gpu), or use --device cpu",
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]
