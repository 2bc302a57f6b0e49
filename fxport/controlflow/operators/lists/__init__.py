"""Lists at trace time: grown with ``.append`` in a data-dependent loop (the appender, how each
is carried and read after it) and appended to under a tensor condition outside one."""
