"""torch's own log records do not reach the terminal while fxport drives torch (issue 25 item 17)."""

import logging
import subprocess
import sys


def test_torch_error_log_records_are_silenced_during_capture():
    script = (
        "import logging, torch\n"
        "from fxport.quiet import quiet_torch\n"
        "with quiet_torch():\n"
        "    logging.getLogger('torch.export._trace').error('always_classified is unsupported.')\n"
        "logging.getLogger('torch.export._trace').error('after the block')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "always_classified" not in result.stderr
    assert "after the block" in result.stderr, "only the block is silenced"
    assert not any(f.__class__.__name__ == "function" for h in logging.getLogger("torch").handlers for f in h.filters)  # removed
