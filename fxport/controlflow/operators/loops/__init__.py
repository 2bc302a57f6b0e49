"""Loops at trace time: ``while``/``for`` dispatch, the ``while_loop`` lowering, loops whose
state grows (one ``fxport::grown_loop`` op), what such a body reads, and a peeled first trip."""
