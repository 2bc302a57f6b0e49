"""Silence torch's own progress prints, log lines and warnings while fxport drives it.

fxport reports stages and errors itself; torch.export and the ONNX exporter otherwise print
graphs, progress bars and warnings that bury the one line that matters.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from typing import Iterator


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """Run the block with log records up to WARNING, Python warnings, stdout and stderr suppressed."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)
