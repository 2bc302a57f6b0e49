"""Generation settings read the way transformers' ``generate()`` reads them, and refused where
fxport's generators do not convert them: the rows of :mod:`fxport.generation.settings` say
which settings convert, the mode table (:mod:`fxport.generation.modes`) which searches do.

Example::

    >>> settings = generation_settings(lm, max_new_tokens=8, eos_token_id=[2, 7])   # doctest: +SKIP
    >>> settings.describe()                                                          # doctest: +SKIP
    'greedy, 8 new tokens, end tokens 2, 7'
"""

from __future__ import annotations

from typing import Any

import torch

from fxport.errors import UsageError
from fxport.generation.modes import check_mode
from fxport.generation.settings import CONVERTED, REQUIRED, SETTINGS, GenerationSettings, check_setting_ranges
from fxport.common.quiet import transformers_warnings_off

#: generation_config attributes that carry no setting of the decoding itself.
_BOOKKEEPING = frozenset({
    "transformers_version", "bos_token_id", "decoder_start_token_id", "use_cache", "output_attentions",
    "output_hidden_states", "compile_config", "disable_compile", "max_length",
})
#: ``generate()`` keyword arguments that are not generation settings and have no ONNX form.
UNSUPPORTED_ARGUMENTS = ("logits_processor", "stopping_criteria", "prefix_allowed_tokens_fn", "synced_gpus",
                         "assistant_model", "streamer", "negative_prompt_ids", "negative_prompt_attention_mask",
                         "custom_generate", "tokenizer", "past_key_values", "cache", "inputs_embeds",
                         "position_ids")


def generation_settings(model: torch.nn.Module, generation_config: Any = None, *, handled: frozenset[str] = frozenset(),
                        **overrides: Any) -> GenerationSettings:
    """The settings ``model.generate(**overrides)`` would decode with, or a one-line refusal.

    Reads ``generation_config`` (default: ``model.generation_config``) updated by ``overrides``
    (as ``generate()`` does); a setting or mode fxport does not convert (beam sampling, a logits
    processor, a streamer, …) raises :class:`UsageError` naming it. ``handled``:
    generation_config attributes the caller reads itself (Whisper's prompt tokens).

    Example::

        >>> generation_settings(lm, max_new_tokens=4, eos_token_id=[2, 3]).eos_token_ids   # doctest: +SKIP
        (2, 3)
    """
    for name in UNSUPPORTED_ARGUMENTS:
        if overrides.get(name) is not None:
            raise UsageError(f"generate(): {name}= has no ONNX form in fxport's generator",
                             hint=f"call generate() without {name}=")
    check_setting_ranges(overrides)  # given explicitly: refused even where generate() would ignore it
    config, global_defaults = _updated_config(model, generation_config, overrides)
    check_setting_ranges({name: getattr(config, name, None) for name in SETTINGS})  # the checkpoint's too
    check_mode(config)
    _refuse_unconverted(config, global_defaults, handled)
    returned = config.num_return_sequences or 1
    if config.do_sample and returned > 1:
        raise UsageError(f"generation setting do_sample=True with num_return_sequences={returned} is not converted "
                         "(fxport samples one sequence per prompt)",
                         hint="leave num_return_sequences at 1 to sample, or pass do_sample=False")
    if returned > (config.num_beams or 1):
        raise UsageError(f"num_return_sequences={returned} is more than num_beams={config.num_beams or 1}",
                         hint="pass num_return_sequences ≤ num_beams")
    if config.max_new_tokens is None:
        raise UsageError("generation needs max_new_tokens (max_length alone makes the number of new tokens "
                         "depend on the prompt length)", hint="pass max_new_tokens=N")
    return _settings_from(config)


def _updated_config(model: torch.nn.Module, generation_config: Any, overrides: dict[str, Any]) -> tuple[Any, dict]:
    """The config ``generate()`` decodes with (:func:`_resolved_config` updated by
    ``overrides``) and transformers' global defaults; transformers' own check of the settings
    and an unknown keyword are one-line refusals."""
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
    return config, global_defaults


def _refuse_unconverted(config: Any, global_defaults: dict[str, Any], handled: frozenset[str]) -> None:
    """A one-line refusal for the first setting that changes the output and is not converted:
    one the table does not list, one it marks unconverted (a sampling one only with
    ``do_sample``), or a converted one at a value outside the row's ``values``. The check reads
    ``to_diff_dict()``, so a setting fxport does not know is refused rather than ignored."""
    for name, value in config.to_diff_dict().items():
        row = SETTINGS.get(name)
        if name.startswith("_") or name in _BOOKKEEPING or name in handled or global_defaults.get(name, ...) == value:
            continue
        if row is not None and row.sampling and not config.do_sample:
            continue  # generate() ignores it without sampling
        if row is not None and row.converted and (not row.values or value in row.values or value is None):
            continue
        if row is not None and row.values:
            raise UsageError(f"{name}={value!r} is not converted ({row.why})",
                             hint=f"use one of {', '.join(row.values)}, or leave it out")
        raise UsageError(f"generation setting {name}={value!r} is not converted "
                         "(fxport converts greedy search, sampling and beam search)",
                         hint=f"leave {name} at its default, or export the one-step model with "
                              "--task text-generation-step and run your own loop")


def _settings_from(config: Any) -> GenerationSettings:
    """:class:`GenerationSettings` from a checked config: each converted row read as its kind
    says (``None`` → the row's default); ``pad_token_id`` defaults to the first end token, as in
    ``generate()`` (with a warning there)."""
    values = {}
    for row in CONVERTED:
        value = getattr(config, row.name, None)
        if row.kind == "ids":
            value = tuple(int(t) for t in (value if isinstance(value, (list, tuple)) else [] if value is None else [value]))
        elif row.kind == "id" and isinstance(value, (list, tuple)):
            value = value[0]
        if value is None or row.kind == "switch" and not value:
            value = row.default if row.default is not REQUIRED else value
        elif row.kind in ("int", "float") and not row.sampling:
            value = {"int": int, "float": float}[row.kind](value)
        values[row.attribute] = bool(value) if row.kind == "switch" else value
    if values["pad_token_id"] is None and values["eos_token_ids"]:
        values["pad_token_id"] = values["eos_token_ids"][0]  # what generate() does, with a warning
    for what, ids in (("eos_token_id", values["eos_token_ids"]), ("pad_token_id", (values["pad_token_id"],))):
        if any(t is not None and t < 0 for t in ids):
            raise UsageError(f"{what}={[t for t in ids if t is not None]} is negative", hint=f"pass {what} ≥ 0")
    return GenerationSettings(**values)


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
