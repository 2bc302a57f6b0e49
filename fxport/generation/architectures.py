"""The architecture table: which family a transformers model belongs to — decoder-only,
encoder–decoder or Whisper, one file each under ``families/`` — and how its generator is built.
:func:`family_of` is the one choice, used by ``--task text-generation``
(:mod:`fxport.load.tasks`) and by the ``generate()`` rule (:mod:`fxport.generation.generate`).

Example::

    >>> generator = build_generator(lm, max_new_tokens=8, num_beams=2)   # doctest: +SKIP
    >>> family_of(lm).name, type(generator).__name__                    # doctest: +SKIP
    ('decoder-only', 'BeamSearchDecoderOnlyGenerator')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from fxport.generation.families import whisper
from fxport.generation.families.decoder_only import DecoderOnlyGenerator
from fxport.generation.families.encoder_decoder import EncoderDecoderGenerator
from fxport.generation.generator import Generator
from fxport.generation.modes import generator_class
from fxport.generation.resolve import generation_settings


def _generic(family: type) -> Callable[..., Generator]:
    """The builder of a family searched as transformers' generic ``generate()`` searches."""
    def build(lm: torch.nn.Module, generation_config: Any = None, **kwargs: Any) -> Generator:
        settings = generation_settings(lm, generation_config, **kwargs)
        return generator_class(family, settings)(lm, settings)

    return build


@dataclasses.dataclass(frozen=True)
class Family:
    """A row of :data:`FAMILIES`: the family's name, whether a model is one (first match wins),
    its generator class, how ``generate(generation_config, **kwargs)`` builds its generator,
    how ``--task`` does (``given``: the command line's settings; ``None``: as ``generate()``,
    in eval mode), and what the file takes (``prompts``: ids and a mask; ``audio``: features)."""

    name: str
    matches: Callable[[torch.nn.Module], bool]
    generator: type
    build: Callable[..., Generator]
    for_task: Callable[[torch.nn.Module, dict[str, Any]], Generator] | None = None
    inputs: str = "prompts"


FAMILIES = {
    "whisper": Family("whisper", lambda lm: hasattr(lm, "detect_language"), whisper.WhisperGenerator,
                      whisper.whisper_generator, whisper.task_generator, inputs="audio"),
    "encoder-decoder": Family("encoder-decoder", lambda lm: bool(lm.config.is_encoder_decoder), EncoderDecoderGenerator,
                              _generic(EncoderDecoderGenerator)),
    "decoder-only": Family("decoder-only", lambda lm: True, DecoderOnlyGenerator, _generic(DecoderOnlyGenerator)),
}


def family_of(lm: torch.nn.Module) -> Family:
    """The family of the transformers model ``lm``: Whisper (it detects languages), an
    encoder–decoder model (``config.is_encoder_decoder``), else decoder-only."""
    return next(family for family in FAMILIES.values() if family.matches(lm))


def build_generator(lm: torch.nn.Module, generation_config: Any = None, **settings: Any) -> Generator:
    """The generator for ``lm.generate(generation_config=..., **settings)``: the family's
    generator class with the mode's strategy, or a one-line refusal naming what is not converted.

    Example::

        >>> ids = build_generator(lm, max_new_tokens=4, eos_token_id=2)(input_ids, attention_mask)  # doctest: +SKIP
    """
    return family_of(lm).build(lm, generation_config, **settings)


def task_generator(lm: torch.nn.Module, given: dict[str, Any]) -> Generator:
    """The generator ``--task text-generation`` converts for ``lm`` with the command line's
    settings ``given``, in eval mode."""
    family = family_of(lm)
    return family.for_task(lm, given) if family.for_task else family.build(lm, **given).eval()
