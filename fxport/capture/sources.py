"""Where a frame or a size comes from: the model's own files, and a shape-env source's name.

Example::

    >>> import torch
    >>> is_model_file(torch.__file__), is_model_file("/home/me/model.py")
    (False, True)
"""

from __future__ import annotations

import contextlib
import os

import torch

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep
_FXPORT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_model_file(filename: str) -> bool:
    """Not torch's, fxport's or Python's own library (installed packages such as torchvision are
    the model's)."""
    path = os.path.abspath(filename)
    if path.startswith((_TORCH_DIR, _FXPORT_DIR)):
        return False
    return not path.startswith(_STDLIB_DIR) or os.sep + "site-packages" + os.sep in path


def source_name(source) -> str:
    """``L['x'].size()[0]``: the name torch's shape env gives an input size's source."""
    name = source.name
    return name() if callable(name) else str(name)
