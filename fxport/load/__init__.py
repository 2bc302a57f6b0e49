"""Loading user code for the command line: ``file.py:Name`` targets, ``-i``/``--dynamic``, and
``--task`` checkpoints. The engine never imports this package; its entry points do."""
