"""Generation settings read the way transformers' ``generate()`` reads them, checked against what
fxport's generator (:mod:`fxport.generation.text_generation`) converts.

Example::

    >>> settings = generation_settings(lm, max_new_tokens=8, eos_token_id=[2, 7])   # doctest: +SKIP
    >>> settings.describe()                                                          # doctest: +SKIP
    'greedy, 8 new tokens, end tokens 2, 7'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from fxport.errors import UsageError
from fxport.quiet import transformers_warnings_off

#: generation_config attributes that carry no setting of the decoding itself.
_BOOKKEEPING = frozenset({
    "transformers_version", "bos_token_id", "decoder_start_token_id", "use_cache", "output_attentions",
    "output_hidden_states", "compile_config", "disable_compile", "max_length",
})
#: sampling warpers the generator applies (transformers' classes, in generate()'s order).
SAMPLING_WARPERS = ("temperature", "top_k", "top_p", "min_p", "typical_p")
#: sampling settings without an ONNX form here; without do_sample transformers ignores them all.
_SAMPLING_UNCONVERTED = frozenset({"epsilon_cutoff", "eta_cutoff", "top_h"})
#: settings the generator implements.
_IMPLEMENTED = frozenset({"max_new_tokens", "min_new_tokens", "eos_token_id", "pad_token_id",
                          "repetition_penalty", "do_sample", "num_beams", "length_penalty", "early_stopping",
                          "num_return_sequences", "forced_eos_token_id", *SAMPLING_WARPERS})
#: ``cache_implementation`` values whose cache holds the same keys and values as the generator's
#: growing one (a fixed-size buffer, sliding windows the model's masks already apply): the same ids up to float noise, which verification against ``generate()`` checks.
#: ``quantized`` changes the cached values and is refused; the offloaded caches need CUDA streams
#: in eager ``generate()``, the reference, and are refused too.
SAME_VALUE_CACHES = ("dynamic", "static", "sliding_window", "hybrid", "hybrid_chunked")
#: ``generate()`` keyword arguments that are not generation settings and have no ONNX form.
UNSUPPORTED_ARGUMENTS = ("logits_processor", "stopping_criteria", "prefix_allowed_tokens_fn", "synced_gpus",
                         "assistant_model", "streamer", "negative_prompt_ids", "negative_prompt_attention_mask",
                         "custom_generate", "tokenizer", "past_key_values", "cache", "inputs_embeds",
                         "position_ids")


#: the values each numeric setting may take (transformers checks few of them and ignores the
#: rest: ``num_beams=0`` searched greedily, ``top_p=7`` applied no warper): name → (test, in words)
SETTING_RANGES = {
    "max_new_tokens": (lambda v: v >= 1, "≥ 1"),
    "min_new_tokens": (lambda v: v >= 0, "≥ 0"),
    "num_beams": (lambda v: v >= 1, "≥ 1 (1: no beam search)"),
    "num_return_sequences": (lambda v: v >= 1, "≥ 1"),
    "pad_token_id": (lambda v: v >= 0, "≥ 0"),
    "repetition_penalty": (lambda v: v > 0, "> 0 (1.0: none)"),
    "length_penalty": (lambda v: True, "that is finite"),
    "temperature": (lambda v: v > 0, "> 0"),
    "top_k": (lambda v: v >= 0, "≥ 0 (0: every token)"),
    "top_p": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "min_p": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "typical_p": (lambda v: 0 < v <= 1, "in (0, 1]"),
}


def check_setting_ranges(values: dict[str, Any], *, as_flags: bool = False) -> None:
    """A :class:`UsageError` for the first setting in ``values`` outside :data:`SETTING_RANGES`
    (``None`` is unset), named as a keyword (``top_p=7``) or, ``as_flags``, a flag (``--top-p 7``).

    >>> check_setting_ranges({"top_p": 0.9, "num_beams": None})
    >>> check_setting_ranges({"num_beams": 0}, as_flags=True)
    Traceback (most recent call last):
    fxport.errors.UsageError: --num-beams 0 is out of range; pass a value ≥ 1 (1: no beam search)
    """
    for name, (within, allowed) in SETTING_RANGES.items():
        value = values.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value) or not within(value):
            given = f"--{name.replace('_', '-')} {value:g}" if as_flags else f"{name}={value!r}"
            raise UsageError(f"{given} is out of range", hint=f"pass a value {allowed}")


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
    """What the search does, resolved: new tokens, end tokens, padding, penalties, beams, sampling.

    ``eos_token_ids`` empty means no row stops early (the loop runs ``max_new_tokens`` steps);
    ``pad_token_id`` fills the rows that stopped (transformers' default: the first end token).
    """

    max_new_tokens: int
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    min_new_tokens: int = 0
    repetition_penalty: float = 1.0
    forced_eos_token_ids: tuple[int, ...] = ()
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    num_return_sequences: int = 1
    do_sample: bool = False
    #: the sampling warpers' settings, as generate() reads them (``None``: not applied)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    typical_p: float | None = None
    #: the cache ``generate()`` is asked to use (:data:`SAME_VALUE_CACHES`); the file grows its own
    cache_implementation: str | None = None

    def applied_warpers(self) -> dict[str, float]:
        """The sampling warpers ``generate()`` applies with these settings, ``{setting: value}``
        in its order (``_get_logits_processor``); empty without sampling."""
        applies = {"temperature": lambda v: v != 1.0, "top_k": lambda v: v != 0, "top_p": lambda v: v < 1.0,
                   "min_p": lambda v: True, "typical_p": lambda v: v < 1.0}
        if not self.do_sample:
            return {}
        return {name: getattr(self, name) for name in SAMPLING_WARPERS
                if getattr(self, name) is not None and applies[name](getattr(self, name))}

    def warpers(self) -> list:
        """transformers' own warper objects for :meth:`applied_warpers`, in that order."""
        from transformers.generation import logits_process as processors

        build = {"temperature": processors.TemperatureLogitsWarper,
                 "top_k": lambda k: processors.TopKLogitsWarper(top_k=k, min_tokens_to_keep=1),
                 "top_p": lambda p: processors.TopPLogitsWarper(top_p=p, min_tokens_to_keep=1),
                 "min_p": lambda p: processors.MinPLogitsWarper(min_p=p, min_tokens_to_keep=1),
                 "typical_p": lambda p: processors.TypicalLogitsWarper(mass=p, min_tokens_to_keep=1)}
        return [build[name](value) for name, value in self.applied_warpers().items()]

    def generate_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that make transformers' ``generate()`` decode the same way."""
        kwargs = dict(max_new_tokens=self.max_new_tokens, min_new_tokens=self.min_new_tokens,
                      eos_token_id=list(self.eos_token_ids) or None, pad_token_id=self.pad_token_id,
                      repetition_penalty=self.repetition_penalty, do_sample=self.do_sample, num_beams=self.num_beams,
                      forced_eos_token_id=list(self.forced_eos_token_ids) or None,
                      length_penalty=self.length_penalty, early_stopping=self.early_stopping,
                      num_return_sequences=self.num_return_sequences)
        if self.do_sample:  # None overrides the checkpoint's value: generate() then applies no such warper
            kwargs.update({name: getattr(self, name) for name in SAMPLING_WARPERS})
        if self.cache_implementation is not None:
            kwargs["cache_implementation"] = self.cache_implementation
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
        if self.cache_implementation is not None:
            parts.append(f"generate()'s {self.cache_implementation} cache as a growing one")
        return ", ".join(parts)


def generation_settings(model: torch.nn.Module, generation_config: Any = None, *, handled: frozenset[str] = frozenset(),
                        **overrides: Any) -> GenerationSettings:
    """The settings ``model.generate(**overrides)`` would decode with, or a one-line refusal.

    Reads ``generation_config`` (default: ``model.generation_config``) updated by ``overrides``
    (as ``generate()`` does); a
    setting the generator does not implement (beam sampling, a logits processor, a streamer, …) raises :class:`UsageError` naming it.
    ``handled``: generation_config attributes the caller reads itself (Whisper's prompt tokens).

    Example::

        >>> generation_settings(lm, max_new_tokens=4, eos_token_id=[2, 3]).eos_token_ids   # doctest: +SKIP
        (2, 3)
    """
    for name in UNSUPPORTED_ARGUMENTS:
        if overrides.get(name) is not None:
            raise UsageError(f"generate(): {name}= has no ONNX form in fxport's generator",
                             hint=f"call generate() without {name}=")
    check_setting_ranges(overrides)  # given explicitly: refused even where generate() would ignore it
    try:
        with transformers_warnings_off():  # "flags are not valid" warnings: the error below says it
            config, global_defaults = _resolved_config(model, generation_config)
            unknown = config.update(**overrides)
            config.validate(strict=True)
    except ValueError as invalid:  # transformers' own check of the settings
        raise UsageError(f"generate(): {_first_reason(str(invalid))}",
                         hint="fix the generation settings (transformers refuses them too)") from None
    if unknown:
        name = sorted(unknown)[0]
        raise UsageError(f"generate(): {name}= is not a generation setting fxport's generator knows",
                         hint="pass only generation settings besides input_ids and attention_mask")
    check_setting_ranges({name: getattr(config, name, None) for name in SETTING_RANGES})  # the checkpoint's too
    for name, value in config.to_diff_dict().items():
        if name.startswith("_") or name in _BOOKKEEPING or name in _IMPLEMENTED or name in handled:
            continue
        if global_defaults.get(name, ...) == value:
            continue
        if name in _SAMPLING_UNCONVERTED and not config.do_sample:
            continue  # generate() ignores it without sampling
        if name == "cache_implementation":
            if value in SAME_VALUE_CACHES:
                continue
            raise UsageError(f"cache_implementation={value!r} is not converted (fxport's generator keeps keys "
                             "and values as the model computes them, in memory)",
                             hint=f"use one of {', '.join(SAME_VALUE_CACHES)}, or leave it out")
        raise UsageError(f"generation setting {name}={value!r} is not converted "
                         "(fxport converts greedy search, sampling and beam search)",
                         hint=f"leave {name} at its default, or export the one-step model with "
                              "--task text-generation-step and run your own loop")
    beams = config.num_beams or 1
    returned = config.num_return_sequences or 1
    if config.do_sample and (beams > 1 or returned > 1):
        name = f"num_beams={beams}" if beams > 1 else f"num_return_sequences={returned}"
        raise UsageError(f"generation setting do_sample=True with {name} is not converted (fxport samples one "
                         "sequence per prompt)", hint=f"leave {name.split('=')[0]} at 1 to sample, or pass do_sample=False")
    if returned > beams:
        raise UsageError(f"num_return_sequences={returned} is more than num_beams={beams}",
                         hint="pass num_return_sequences ≤ num_beams")
    forced = config.forced_eos_token_id
    forced_ids = tuple(int(t) for t in (forced if isinstance(forced, (list, tuple)) else [forced] if forced is not None else []))
    if config.max_new_tokens is None:
        raise UsageError("generation needs max_new_tokens (max_length alone makes the number of new tokens "
                         "depend on the prompt length)", hint="pass max_new_tokens=N")
    eos = config.eos_token_id
    eos_ids = tuple(int(t) for t in (eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else []))
    pad = config.pad_token_id
    if isinstance(pad, (list, tuple)):
        pad = pad[0]
    if pad is None and eos_ids:
        pad = eos_ids[0]  # what generate() does, with a warning
    for what, ids in (("eos_token_id", eos_ids), ("pad_token_id", () if pad is None else (pad,))):
        if any(t < 0 for t in ids):
            raise UsageError(f"{what}={list(ids)} is negative", hint=f"pass {what} ≥ 0")
    penalty = 1.0 if config.repetition_penalty is None else float(config.repetition_penalty)
    return GenerationSettings(
        max_new_tokens=int(config.max_new_tokens), eos_token_ids=eos_ids, pad_token_id=pad,
        min_new_tokens=int(config.min_new_tokens or 0), repetition_penalty=penalty, num_beams=beams,
        forced_eos_token_ids=forced_ids,
        length_penalty=1.0 if config.length_penalty is None else float(config.length_penalty),
        early_stopping=False if config.early_stopping is None else config.early_stopping,
        num_return_sequences=returned, do_sample=bool(config.do_sample),
        cache_implementation=config.cache_implementation,
        **{name: getattr(config, name) for name in SAMPLING_WARPERS},
    )


def _first_reason(message: str) -> str:
    """The first line of transformers' message, with its first item when that line only
    introduces a list (``GenerationConfig is invalid:`` then ``- `top_p`: ...``).

    >>> _first_reason("GenerationConfig is invalid: \\n- `top_p`: set do_sample.\\nIf you're using...")
    'GenerationConfig is invalid: `top_p`: set do_sample'
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1].removeprefix('- ')}".rstrip(".")
    return lines[0].rstrip(".") if lines else "invalid settings"


def _resolved_config(model: torch.nn.Module, generation_config: Any) -> tuple[Any, dict[str, Any]]:
    """The generation config ``generate()`` starts from (``_prepare_generation_config``) and
    transformers' global defaults: the config given (or a default one), its unset values taken
    from the model's, then from those defaults (``top_k`` 50, ``temperature`` 1.0, …); keyword
    arguments go on top."""
    from transformers import GenerationConfig

    base = GenerationConfig() if generation_config is None else generation_config
    config = base.__class__.from_dict(base.to_dict())
    config.update(**model.generation_config.to_dict(), defaults_only=True, allow_custom_entries=True)
    global_defaults = config._get_default_generation_params()
    config.update(**global_defaults, defaults_only=True)
    return config, global_defaults
