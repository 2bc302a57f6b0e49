"""Models fxport builds for a task (``fxport convert CHECKPOINT --task ...``) and for the
``generate()`` rule: generation along its two axes, as transformers' ``generate()`` is.

- the settings: one table (:mod:`~fxport.generation.settings`) read as ``generate()`` reads a
  ``generation_config`` (:mod:`~fxport.generation.resolve`); the logits processors in its order
  (:mod:`~fxport.generation.processors`);
- how tokens are chosen: the mode table (:mod:`~fxport.generation.modes`), one strategy file
  each under ``strategies/`` (greedy, sample, beam);
- how the model is called: the family table (:mod:`~fxport.generation.architectures`), one file
  each under ``families/`` (decoder-only, encoder–decoder, Whisper).

A generator's ``forward`` is model code, not fxport's machinery: the control-flow converter
converts it as it converts the user's own files (:func:`fxport.common.frames.is_user_file`).
"""
