"""The mode table: each of transformers' generation modes (``GenerationMode``, the value
``generation_config.get_generation_mode()`` gives) → the fxport strategy that searches that
way (one file each under ``strategies/``), or the reason it is refused.

A generator is a strategy over an architecture family (:mod:`fxport.generation.families`):
:func:`generator_class` puts the mode's strategy class in front of the family's generator class,
so the strategy's search calls the family's hooks (``start``, ``advance``, …) as methods.
Adding a strategy is one file under ``strategies/`` and one row here.

Example::

    >>> MODES["beam_search"].strategy.__name__, MODES["constrained_beam_search"].strategy
    ('BeamSearch', None)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from fxport.errors import UsageError
from fxport.generation.strategies.beam import BeamSearch
from fxport.generation.strategies.greedy import GreedySearch
from fxport.generation.strategies.sample import Sampling

#: what the refusals say fxport converts
CONVERTED_MODES = "fxport converts greedy search, sampling and beam search"


@dataclasses.dataclass(frozen=True)
class Mode:
    """A row of :data:`MODES`: the mode in words, the strategy class (``None``: refused), the
    settings that select the mode (named in a refusal), why it is refused and what to do."""

    title: str
    strategy: type | None
    selected_by: tuple[str, ...] = ()
    why: str = CONVERTED_MODES
    hint: str = ""


#: transformers' generation modes (``GENERATION_MODES_MAPPING``'s keys), in its order
MODES = {
    "sample": Mode("sampling", Sampling),
    "greedy_search": Mode("greedy search", GreedySearch),
    "beam_search": Mode("beam search", BeamSearch),
    "beam_sample": Mode("beam sampling", None, ("do_sample", "num_beams"), "fxport samples one sequence per prompt",
                        "leave num_beams at 1 to sample, or pass do_sample=False"),
    "assisted_generation": Mode("assisted generation", None,
                                ("prompt_lookup_num_tokens", "assistant_early_exit", "use_mtp")),
    "dola_generation": Mode("DoLa decoding", None, ("dola_layers",)),
    "contrastive_search": Mode("contrastive search", None, ("penalty_alpha", "top_k")),
    "group_beam_search": Mode("group beam search", None, ("num_beam_groups", "diversity_penalty")),
    "constrained_beam_search": Mode("constrained beam search", None, ("constraints", "force_words_ids")),
}


def check_mode(config: Any) -> None:
    """A one-line :class:`UsageError` when ``config`` selects a mode without a strategy, naming
    the mode and the settings that select it.

    >>> from transformers import GenerationConfig
    >>> check_mode(GenerationConfig(num_beams=2))
    >>> check_mode(GenerationConfig(num_beams=2, force_words_ids=[[3]]))
    Traceback (most recent call last):
    fxport.errors.UsageError: generate(): constrained beam search (force_words_ids=[[3]]) is not converted (fxport converts greedy search, sampling and beam search); leave force_words_ids unset
    """
    mode = MODES.get(str(getattr(config.get_generation_mode(), "value", "")))
    if mode is None or mode.strategy is not None:
        return
    defaults = type(config)()
    given = [name for name in mode.selected_by
             if getattr(config, name, None) not in (None, getattr(defaults, name, None))] or list(mode.selected_by[:1])
    named = ", ".join(f"{name}={getattr(config, name, None)!r}" for name in given)
    raise UsageError(f"generate(): {mode.title} ({named}) is not converted ({mode.why})",
                     hint=mode.hint or f"leave {' and '.join(given)} unset")


def mode_of(settings: Any) -> Mode:
    """The row of the mode ``settings`` search with (``settings.mode``)."""
    return MODES[settings.mode]


@functools.cache
def _composed(strategy: type, family: type) -> type:
    return type(f"{strategy.__name__}{family.__name__}", (strategy, family),
                {"__module__": family.__module__, "__doc__": family.__doc__})


def generator_class(family: type, settings: Any) -> type:
    """The generator class for ``settings`` on ``family`` (a :class:`~fxport.generation.generator.Generator`
    subclass): the mode's strategy in front of the family, one class per pair.

    >>> from fxport.generation.families.decoder_only import DecoderOnlyGenerator
    >>> from fxport.generation.settings import GenerationSettings
    >>> generator_class(DecoderOnlyGenerator, GenerationSettings(max_new_tokens=4, num_beams=2)).__name__
    'BeamSearchDecoderOnlyGenerator'
    """
    return _composed(mode_of(settings).strategy, family)
