"""``model.generate(...)`` as fxport's generators: what the built-in rule ``rewrites/generation.py``
runs in place of transformers' ``generate()`` while fxport captures a model that calls it.

Example::

    >>> ids = generate(lm, input_ids, attention_mask=mask, max_new_tokens=4)   # doctest: +SKIP
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import torch

from fxport.errors import UsageError
from fxport.common.frames import user_location_from_stack
from fxport.generation.architectures import FAMILIES, family_of
from fxport.generation.sampling import active_draws

__all__ = ["generate", "generate_whisper"]


def generate(lm: torch.nn.Module, inputs: torch.Tensor | None = None, generation_config: Any = None,
             **kwargs: Any) -> torch.Tensor:
    """``lm.generate(...)`` as the generator: what the built-in rule ``rewrites/generation.py``
    runs in place of transformers' ``generate()`` while fxport captures a model that calls it.

    Takes ``generate()``'s arguments (``input_ids`` positionally or by name, ``attention_mask``,
    generation settings); refuses, in one line naming it, what
    :func:`~fxport.generation.resolve.generation_settings` refuses. The generator is the
    family's (:func:`~fxport.generation.architectures.family_of`) with the mode's strategy.
    Without ``attention_mask`` the mask is the one ``generate()`` infers: 0 where the
    ids are the pad token (when a pad token is set, differs from the end tokens and occurs in
    the ids), else 1.

    Example::

        >>> ids = generate(lm, input_ids, attention_mask=mask, max_new_tokens=4)   # doctest: +SKIP
    """
    from fxport.controlflow import converted_function

    input_ids = kwargs.pop("input_ids", None) if inputs is None else inputs
    if input_ids is None:
        raise UsageError("generate() without input_ids is not converted", where=_caller_location(),
                         hint="pass input_ids")
    attention_mask = kwargs.pop("attention_mask", None)
    family = family_of(lm)
    if family.name == "whisper":  # GenerationMixin.generate reached past Whisper's own: the generic search
        family = FAMILIES["encoder-decoder"]
    try:
        generator = family.build(lm, generation_config, **kwargs)
    except UsageError as refused:  # said at the user's generate() call
        refused.where = refused.where or _caller_location()
        refused.args = (refused.message,)
        raise
    settings = generator.settings
    draws = active_draws()
    if settings.do_sample and draws is None:
        raise UsageError("generate(do_sample=True) samples with torch's random numbers, which an ONNX file cannot "
                         "reproduce", where=_caller_location(),
                         hint="take the draws as an input of forward and call generate() inside "
                              "`with fxport.generation.sampling.sampling_draws(draws):` (docs/generation.md)")
    if attention_mask is None:
        attention_mask = generator.inferred_attention_mask(input_ids)
    forward = converted_function(type(generator).forward) or type(generator).forward  # its loop as an ONNX Loop
    return forward(generator, input_ids, attention_mask, draws if settings.do_sample else None)


def generate_whisper(lm: torch.nn.Module, input_features: torch.Tensor | None = None, generation_config: Any = None,
                     **kwargs: Any) -> torch.Tensor:
    """``whisper.generate(input_features, ...)`` as fxport's Whisper generator
    (:mod:`fxport.generation.families.whisper`): what the built-in rule runs in place of
    ``WhisperGenerationMixin.generate`` while fxport captures; refusals are said at the user's
    ``generate()`` call.

    Example::

        >>> ids = generate_whisper(whisper, features, max_new_tokens=4, force_unique_generate_call=True)  # doctest: +SKIP
    """
    from fxport.controlflow import converted_function
    from fxport.generation.families.whisper import whisper_generator

    input_features = kwargs.pop("inputs", None) if input_features is None else input_features
    if input_features is None:
        raise UsageError("Whisper generate() without input_features is not converted", where=_caller_location(),
                         hint="pass input_features")
    frames, window = input_features.shape[-1], 2 * lm.config.max_source_positions
    try:
        if frames > window:
            raise UsageError(f"Whisper generate() on {frames} frames (more than one {window}-frame window) decodes "
                             "long-form audio segment by segment, which is not converted",
                             hint=f"pass at most {window} frames (short-form audio, up to 30 s)")
        generator = whisper_generator(lm, generation_config, **kwargs)
    except UsageError as refused:  # said at the user's generate() call
        refused.where = refused.where or _caller_location()
        refused.args = (refused.message,)
        raise
    forward = converted_function(type(generator).forward) or type(generator).forward  # its loop as an ONNX Loop
    return forward(generator, input_features)


def _caller_location():
    """The user's line that called ``generate()``: the innermost user frame outside this file
    and fxport's built-in rules (the rule that called :func:`generate`)."""
    import fxport.rewrites

    ours = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
            *(os.path.abspath(path) + os.sep for path in fxport.rewrites.__path__))
    return user_location_from_stack(frame for frame in traceback.extract_stack()
                                    if not os.path.abspath(frame.filename).startswith(ours))
