"""The search strategies, one file per generation mode fxport converts (the table is
:data:`fxport.generation.modes.MODES`): greedy search, sampling, beam search."""
