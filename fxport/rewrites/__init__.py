"""``fxport.rewrites`` when fxport runs from a source checkout without being installed.

The built-in rules live in the repository's top-level ``rewrites/`` folder. ``pip install`` (and
``pip install -e``) installs that folder as ``fxport.rewrites`` (``package-dir`` in
pyproject.toml), and this file is not part of the installed package; in a checkout used straight
from ``sys.path`` it makes ``import fxport.rewrites.attention`` find ``rewrites/attention.py``.
"""

import os as _os

__path__.append(_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))),
                              "rewrites"))
