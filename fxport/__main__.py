"""``python -m fxport`` is the ``fxport`` command."""

from fxport.cli import main

main()
