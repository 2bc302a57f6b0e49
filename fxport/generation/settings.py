"""The generation settings table: one row per ``generate()`` setting fxport knows, from which the
settings class (:class:`GenerationSettings`), the CLI's generation options, the range checks,
the refusals and the ``generate()`` keyword mapping are derived.

A row says how the setting is read from a ``generation_config`` and given on the command line
(``kind``), its default, the values it may take, when ``generate()`` applies it (a logits
processor or warper), and whether fxport converts it at all (``converted=False``: refused where
it takes effect). Adding a setting is one row here (and, for a processor, one entry in
:mod:`fxport.generation.processors`). This module imports neither torch nor transformers: the
CLI reads it to declare its options.

Example::

    >>> SETTINGS["no_repeat_ngram_size"].flag
    '--no-repeat-ngram-size'
    >>> settings = GenerationSettings(max_new_tokens=8, eos_token_ids=(2,), no_repeat_ngram_size=3)
    >>> settings.describe()
    'greedy, 8 new tokens, end tokens 2, no repeated 3-gram'
    >>> settings.generate_kwargs()["no_repeat_ngram_size"], settings.mode
    (3, 'greedy_search')
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from fxport.errors import UsageError

#: a row whose settings-class field has no default (the first one)
REQUIRED = object()
#: ``cache_implementation`` values whose cache holds the same keys and values as the generator's
#: growing one (a fixed-size buffer, sliding windows the model's masks already apply): the same ids
#: up to float noise, which verification against ``generate()`` checks. ``quantized`` changes the
#: cached values and is refused; the offloaded caches need CUDA streams in eager ``generate()``,
#: the reference, and are refused too.
SAME_VALUE_CACHES = ("dynamic", "static", "sliding_window", "hybrid", "hybrid_chunked")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of :data:`SETTINGS`.

    ``kind``: ``int``, ``float``, ``id`` (a token id; a list gives its first), ``ids`` (one or
    several token ids; a repeatable flag), ``switch`` (``--x`` / ``--no-x``), ``choice`` (a word
    of ``choices``), ``text`` (no flag). ``help``: the flag's help, empty for a setting without a
    flag (``off_help``: the ``--no-x`` flag's, for a switch). ``within``: (test, the allowed values in words). ``applies``: ``(value, settings) →``
    whether ``generate()`` applies it. ``sampling``: read only with ``do_sample``, as
    ``generate()`` reads it. ``values``/``why``: the values converted, and why the others are not.
    """

    name: str
    kind: str = "int"
    default: Any = None
    help: str = ""
    off_help: str = ""
    metavar: str = "N"
    within: tuple[Callable[[Any], bool], str] | None = None
    applies: Callable[[Any, Any], bool] | None = None
    field: str = ""
    sampling: bool = False
    converted: bool = True
    choices: dict[str, Any] = dataclasses.field(default_factory=dict)
    values: tuple[str, ...] = ()
    why: str = ""

    @property
    def flag(self) -> str:
        """The command-line option: ``--no-repeat-ngram-size``."""
        return "--" + self.name.replace("_", "-")

    @property
    def attribute(self) -> str:
        """The :class:`GenerationSettings` field holding it."""
        return self.field or self.name


_ROWS = (
    Setting("max_new_tokens", default=REQUIRED, within=(lambda v: v >= 1, "≥ 1"),
            help="text-generation: new tokens at most (default: the checkpoint's generation_config, else 20)"),
    Setting("min_new_tokens", default=0, within=(lambda v: v >= 0, "≥ 0"),
            applies=lambda v, s: v > 0 and bool(s.eos_token_ids),
            help="text-generation: no end token before N new tokens"),
    Setting("eos_token_id", "ids", (), field="eos_token_ids", metavar="ID",
            help="text-generation: an end token (repeatable; default: the checkpoint's)"),
    Setting("pad_token_id", "id", None, metavar="ID", within=(lambda v: v >= 0, "≥ 0"),
            help="text-generation: the id of rows that stopped (default: the checkpoint's, else the first end token)"),
    Setting("repetition_penalty", "float", 1.0, metavar="X", within=(lambda v: v > 0, "> 0 (1.0: none)"),
            applies=lambda v, s: v != 1.0, help="text-generation: transformers' repetition penalty (1.0: none)"),
    Setting("no_repeat_ngram_size", default=0, within=(lambda v: v >= 0, "≥ 0 (0: none)"),
            applies=lambda v, s: v > 0,
            help="text-generation: never choose a token that repeats an N-gram of the row's ids (0: none)"),
    Setting("forced_eos_token_id", "ids", (), field="forced_eos_token_ids", applies=lambda v, s: bool(v)),
    Setting("num_beams", default=1, within=(lambda v: v >= 1, "≥ 1 (1: no beam search)"),
            help="text-generation: beam search with N beams (1: greedy)"),
    Setting("length_penalty", "float", 1.0, metavar="X", within=(lambda v: True, "that is finite"),
            help="text-generation, beams: finished scores ÷ length^X (default 1.0)"),
    Setting("early_stopping", "choice", False, metavar="WHEN", choices={"true": True, "false": False, "never": "never"},
            help="text-generation, beams: true, false or never (transformers' meanings)"),
    Setting("num_return_sequences", default=1, within=(lambda v: v >= 1, "≥ 1"),
            help="text-generation, beams: the N best sequences per prompt"),
    Setting("do_sample", "switch", False, metavar="",
            help="text-generation: sample, with the random numbers an input random_draws (default: the "
                 "checkpoint's generation_config)",
            off_help="text-generation: search without sampling, whatever the checkpoint's generation_config says"),
    # the sampling warpers, in generate()'s order (None: not applied)
    Setting("temperature", "float", None, metavar="X", sampling=True, within=(lambda v: v > 0, "> 0"),
            applies=lambda v, s: v != 1.0, help="text-generation, sampling: divide the logits by X"),
    Setting("top_k", default=None, sampling=True, within=(lambda v: v >= 0, "≥ 0 (0: every token)"),
            applies=lambda v, s: v != 0, help="text-generation, sampling: keep the N most likely tokens (0: all)"),
    Setting("top_p", "float", None, metavar="X", sampling=True, within=(lambda v: 0 <= v <= 1, "in [0, 1]"),
            applies=lambda v, s: v < 1.0,
            help="text-generation, sampling: keep the most likely tokens whose probabilities add up to X"),
    Setting("min_p", "float", None, metavar="X", sampling=True, within=(lambda v: 0 <= v <= 1, "in [0, 1]"),
            applies=lambda v, s: True,
            help="text-generation, sampling: drop tokens less likely than X × the most likely one"),
    Setting("typical_p", "float", None, metavar="X", sampling=True, within=(lambda v: 0 < v <= 1, "in (0, 1]"),
            applies=lambda v, s: v < 1.0, help="text-generation, sampling: transformers' typical decoding mass"),
    # the cache generate() is asked to use; the file grows its own
    Setting("cache_implementation", "text", None, values=SAME_VALUE_CACHES,
            why="fxport's generator keeps keys and values as the model computes them, in memory"),
    # sampling warpers without an ONNX form: refused with do_sample (generate() ignores them otherwise)
    Setting("epsilon_cutoff", "float", sampling=True, converted=False),
    Setting("eta_cutoff", "float", sampling=True, converted=False),
    Setting("top_h", "float", sampling=True, converted=False),
)
#: every setting fxport knows, by name, in generate()'s order of processors and warpers
SETTINGS: dict[str, Setting] = {row.name: row for row in _ROWS}
#: the settings fxport converts: the fields of :class:`GenerationSettings`
CONVERTED = tuple(row for row in _ROWS if row.converted)
#: the settings given on the command line (``--task text-generation``)
FLAGS = tuple(row for row in CONVERTED if row.help)
#: the sampling warpers, in generate()'s order
WARPERS = tuple(row.name for row in CONVERTED if row.sampling)


def check_setting_ranges(values: dict[str, Any], *, as_flags: bool = False) -> None:
    """A :class:`UsageError` for the first setting in ``values`` outside its row's range
    (``None`` is unset), named as a keyword (``top_p=7``) or, ``as_flags``, a flag (``--top-p 7``).

    >>> check_setting_ranges({"top_p": 0.9, "num_beams": None})
    >>> check_setting_ranges({"num_beams": 0}, as_flags=True)
    Traceback (most recent call last):
    fxport.errors.UsageError: --num-beams 0 is out of range; pass a value ≥ 1 (1: no beam search)
    """
    for row in _ROWS:
        value = values.get(row.name)
        if row.within is None or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        within, allowed = row.within
        if not math.isfinite(value) or not within(value):
            given = f"{row.flag} {value:g}" if as_flags else f"{row.name}={value!r}"
            raise UsageError(f"{given} is out of range", hint=f"pass a value {allowed}")


def settings_from_flags(given: dict[str, Any]) -> dict[str, Any]:
    """``generate()``'s keywords for the command line's generation options: ``given`` holds each
    flag's value by parameter name (``no_do_sample`` for ``--no-do-sample``); an unset flag is
    ``None``. A word outside a choice, or both flags of a switch, is a usage error.

    >>> settings_from_flags({"max_new_tokens": 8, "eos_token_id": [2, 7], "early_stopping": "never"})
    {'max_new_tokens': 8, 'eos_token_id': [2, 7], 'early_stopping': 'never'}
    >>> settings_from_flags({"do_sample": True, "no_do_sample": True})
    Traceback (most recent call last):
    fxport.errors.UsageError: --do-sample conflicts with --no-do-sample; keep one of them
    """
    settings = {}
    for row in FLAGS:
        value = given.get(row.name)
        if row.kind == "ids":
            value = list(value) if value else None
        elif row.kind == "switch":
            on, off = bool(value), bool(given.get(f"no_{row.name}"))
            if on and off:
                raise UsageError(f"{row.flag} conflicts with --no-{row.flag[2:]}", hint="keep one of them")
            value = True if on else False if off else None
        elif row.kind == "choice" and value is not None:
            if value.lower() not in row.choices:
                raise UsageError(f"{row.flag} {value!r} is not one of {', '.join(row.choices)}",
                                 hint=f"pass {row.flag} {list(row.choices)[-1]}")
            value = row.choices[value.lower()]
        if value is not None:
            settings[row.name] = value
    return settings


class _Described:
    """What :class:`GenerationSettings` computes from its fields (the fields come from the table)."""

    @property
    def mode(self) -> str:
        """transformers' ``GenerationMode`` for these settings: ``greedy_search``, ``sample`` or
        ``beam_search`` (the modes fxport converts; :mod:`fxport.generation.modes`)."""
        return "beam_search" if self.num_beams > 1 else "sample" if self.do_sample else "greedy_search"

    def applies(self, name: str) -> bool:
        """Whether ``generate()`` applies the processor or warper of setting ``name``."""
        row, value = SETTINGS[name], getattr(self, SETTINGS[name].attribute)
        if row.sampling and not self.do_sample or value is None:
            return False
        return row.applies is None or row.applies(value, self)

    def applied_warpers(self) -> dict[str, float]:
        """The sampling warpers ``generate()`` applies, ``{setting: value}`` in its order."""
        return {name: getattr(self, name) for name in WARPERS if self.applies(name)}

    def generate_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that make transformers' ``generate()`` decode the same way."""
        kwargs = {}
        for row in CONVERTED:
            value = getattr(self, row.attribute)
            if row.sampling and not self.do_sample or row.kind == "text" and value is None:
                continue  # a sampling None overrides the checkpoint's value: generate() applies no such warper
            kwargs[row.name] = (list(value) or None) if row.kind == "ids" else value
        return kwargs

    def describe(self) -> str:
        """One line for reports: ``greedy, 8 new tokens, end tokens 2``."""
        warped = ", ".join(f"{name} {value:g}" for name, value in self.applied_warpers().items())
        sampled = f"sampling from random_draws ({warped or 'no warper'})"
        search = (sampled if self.do_sample else "greedy") if self.num_beams == 1 else (
            f"beam search ({self.num_beams} beams, length penalty {self.length_penalty:g}, "
            f"early stopping {self.early_stopping}, {self.num_return_sequences} returned)")
        parts = [search, f"{self.max_new_tokens} new tokens"]
        parts.append(f"end tokens {', '.join(map(str, self.eos_token_ids))}" if self.eos_token_ids else "no end token")
        if self.min_new_tokens:
            parts.append(f"at least {self.min_new_tokens} new tokens")
        if self.repetition_penalty != 1.0:
            parts.append(f"repetition penalty {self.repetition_penalty:g}")
        if self.no_repeat_ngram_size:
            parts.append(f"no repeated {self.no_repeat_ngram_size}-gram")
        if self.cache_implementation is not None:
            parts.append(f"generate()'s {self.cache_implementation} cache as a growing one")
        return ", ".join(parts)


def _settings_class() -> type:
    """:class:`GenerationSettings`: a frozen dataclass with one field per converted row."""
    types = {"int": int, "float": float, "id": int, "ids": tuple, "switch": bool, "choice": Any, "text": str}
    fields = [(row.attribute, types[row.kind]) if row.default is REQUIRED else
              (row.attribute, types[row.kind], dataclasses.field(default=row.default)) for row in CONVERTED]
    doc = ("What the search does, resolved from the settings table: new tokens, end tokens, padding, "
           "processors, beams, sampling. ``eos_token_ids`` empty: no row stops early; ``pad_token_id`` "
           "fills the rows that stopped (transformers' default: the first end token).")
    return dataclasses.make_dataclass("GenerationSettings", fields, bases=(_Described,), frozen=True,
                                      namespace={"__doc__": doc, "__module__": __name__})


GenerationSettings = _settings_class()
