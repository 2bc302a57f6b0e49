"""Silence torch's own progress prints, log lines and warnings while fxport drives it, and
leave torch's thread state as it was found.

fxport reports stages and errors itself; torch.export and the ONNX exporter otherwise print
graphs, progress bars and warnings that bury the one line that matters.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from typing import Iterator

import torch


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """Run the block with log records up to WARNING, torch's own log records of any level
    (``E… torch/export/_trace.py:1323] always_classified is unsupported.`` for a capture attempt
    fxport retries: its handler holds the real stderr), Python warnings, stdout and stderr
    suppressed.

    Also restores torch's torch-function state on the way out: an export that fails inside
    ``torch.cond``'s dynamo compile (a guard that refines a range) leaves ``__torch_function__``
    disabled for the thread, and every later capture in the process then reads a tensor used as
    a slice bound as a data-dependent number (a fuzz campaign's finding).
    """
    previous = logging.root.manager.disable
    function_state = torch._C._get_torch_function_state()
    logging.disable(logging.WARNING)
    handlers = _torch_handlers()
    for handler in handlers:
        handler.addFilter(drop_record)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        torch._C._set_torch_function_state(function_state)
        for handler in handlers:
            handler.removeFilter(drop_record)
        logging.disable(previous)


def _torch_handlers() -> list[logging.Handler]:
    """The handlers torch's logging set up (on ``torch`` and on its child loggers, which do not
    propagate)."""
    loggers = [logging.getLogger("torch")] + [
        logger for name, logger in list(logging.root.manager.loggerDict.items())
        if name.startswith("torch.") and isinstance(logger, logging.Logger)]
    return list({id(h): h for logger in loggers for h in logger.handlers}.values())


def drop_record(record: logging.LogRecord) -> bool:
    """A logging filter that drops every record (what torch logs while fxport keeps it quiet)."""
    return False


@contextlib.contextmanager
def transformers_progress_bars_off() -> Iterator[None]:
    """transformers' tqdm bars (``Loading weights``) off for the block, as they were after it."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


@contextlib.contextmanager
def transformers_warnings_off() -> Iterator[None]:
    """transformers' log records below ERROR dropped for the block (its verbosity put back after)."""
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
