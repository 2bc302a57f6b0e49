"""torch's own log records do not reach the terminal while fxport drives torch (issue 25 item 17)."""

import logging
import subprocess
import sys


def test_torch_error_log_records_are_silenced_during_capture():
    script = (
        "import logging, torch\n"
        "from fxport.common.quiet import quiet_torch\n"
        "with quiet_torch():\n"
        "    logging.getLogger('torch.export._trace').error('always_classified is unsupported.')\n"
        "logging.getLogger('torch.export._trace').error('after the block')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "always_classified" not in result.stderr
    assert "after the block" in result.stderr, "only the block is silenced"
    assert not any(f.__class__.__name__ == "function" for h in logging.getLogger("torch").handlers for f in h.filters)  # removed


def test_a_failed_export_leaves_torch_function_enabled():
    """An export failing inside torch.cond's dynamo compile left ``__torch_function__`` disabled
    for the thread; every later capture in the process then refused a slice by the loop counter
    as a data-dependent number (a fuzz campaign's finding). The block restores the state."""
    import pytest
    import torch

    from fxport.common.quiet import quiet_torch

    with pytest.raises(RuntimeError):
        with quiet_torch():
            torch._C._set_torch_function_state(torch._C._TorchFunctionState.ALL_DISABLED)
            raise RuntimeError("the export failed")
    assert torch._C._is_torch_function_enabled() and not torch._C._is_torch_function_all_disabled()
