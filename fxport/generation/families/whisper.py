"""Whisper's ``generate()`` (short-form: one 30-second window of log-mel features) as a
module fxport converts: the encoder once, the decoder prompt Whisper builds
(``<|startoftranscript|>``, language, task, ``<|notimestamps|>``), its suppressed tokens, then
greedy or beam search as for any encoder–decoder model
(:mod:`fxport.generation.families.encoder_decoder`).

What ``WhisperForConditionalGeneration.generate`` returns decides the output:

- with ``force_unique_generate_call=True`` (what ``--task text-generation`` uses): the decoder's
  ids, prompt tokens first, as transformers' generic ``generate()`` returns them;
- without it, the window's *segment*: the generated ids without the prompt tokens, the padding
  and the end token, right-padded with ``pad_token_id``. A vocabulary with timestamp tokens is
  refused then: a row that ends on two timestamp tokens makes ``generate()`` decode another
  segment of the same audio, which this generator does not write.

The language is detected in the file when neither ``language=`` nor the checkpoint's
``forced_decoder_ids`` gives it (``detect_language``: the decoder once on the start token, the
most likely language token per row). Long-form audio, timestamps, temperature fallback and
prompts (``prompt_ids``) are refused in one line naming the argument.

Example::

    >>> generator = whisper_generator(whisper, force_unique_generate_call=True, max_new_tokens=8)  # doctest: +SKIP
    >>> generator(input_features).shape[1] <= len(generator.prompt.tokens) + 8                       # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from fxport.errors import UsageError
from fxport.generation.families.encoder_decoder import EncoderDecoderGenerator
from fxport.generation.modes import generator_class
from fxport.generation.processors import vocabulary_mask
from fxport.generation.resolve import generation_settings
from fxport.generation.settings import SETTINGS

#: generation_config attributes Whisper's generate() reads itself (its prompt, its processors).
WHISPER_CONFIG = frozenset({
    "lang_to_id", "task_to_id", "no_timestamps_token_id", "suppress_tokens", "begin_suppress_tokens",
    "is_multilingual", "alignment_heads", "max_initial_timestamp_index", "prev_sot_token_id", "return_timestamps",
    "language", "task", "forced_decoder_ids", "force_unique_generate_call", "lang_ids", "task_ids", "max_length",
})
#: Whisper generate() arguments that change the output and have no form here.
_REFUSED = {"prompt_ids": "prompts", "prompt_condition_type": "prompts", "condition_on_prev_tokens": "long-form",
            "compression_ratio_threshold": "temperature fallback", "logprob_threshold": "temperature fallback",
            "no_speech_threshold": "no-speech detection", "return_token_timestamps": "timestamps",
            "return_segments": "segments", "return_dict_in_generate": "a dict output", "monitor_progress": "long-form",
            "num_segment_frames": "long-form", "decoder_input_ids": "prompts", "encoder_outputs": "encoder outputs"}
#: Whisper generate() arguments that change nothing in short-form greedy and beam search.
_IGNORED = ("attention_mask", "time_precision", "time_precision_features", "synced_gpus")
#: marks the language slot of the prompt when the file detects the language
DETECTED = -1


@dataclasses.dataclass(frozen=True)
class WhisperPrompt:
    """What Whisper adds around the search: the decoder's prompt ``tokens`` (:data:`DETECTED`
    where the language is detected), the language ids detection chooses from, the suppressed
    tokens, and whether the output is the window's segment rather than the decoder's ids."""

    tokens: tuple[int, ...]
    language_ids: tuple[int, ...] = ()
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()
    segment_output: bool = False


class WhisperGenerator(EncoderDecoderGenerator):
    """``input_features (batch, mel bins, frames) → ids`` around a ``WhisperForConditionalGeneration``:
    what its ``generate()`` returns for short-form audio, built by :func:`whisper_generator`."""

    dynamic_shapes = {"input_features": {0: "batch"}}

    def __init__(self, lm: torch.nn.Module, settings: Any, prompt: WhisperPrompt, reference_kwargs: dict[str, Any]):
        super().__init__(lm, settings)
        self.prompt, self.reference_kwargs = prompt, reference_kwargs

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        ids = self.decoder_ids(input_features)
        return self.segment(ids) if self.prompt.segment_output else ids

    def decoder_ids(self, input_features: torch.Tensor) -> torch.Tensor:
        """The decoder's ids, prompt first (what the generic ``generate()`` returns)."""
        rows = torch.ones(input_features.shape[0], 1, dtype=torch.int64, device=input_features.device)
        return self.search(input_features, rows)

    def example_arguments(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, draw: torch.Generator) -> tuple:
        """Features for as many rows as ``input_ids`` has: log-mel-like values, normal around 0."""
        config = self.lm.config
        frames = 2 * config.max_source_positions
        return (torch.randn(input_ids.shape[0], config.num_mel_bins, frames, generator=draw) * 0.5,)

    def reference(self, input_features: torch.Tensor) -> torch.Tensor:
        """transformers' own ``generate()`` on these features, with this generator's arguments."""
        return self.lm.generate(input_features, **self.reference_kwargs)

    def start(self, input_features: torch.Tensor, rows: torch.Tensor, beams: int) -> tuple:
        """The encoder once, the prompt (its language detected when asked), the decoder on it."""
        from transformers import DynamicCache, EncoderDecoderCache

        hidden = self.lm.get_encoder()(input_features=input_features, return_dict=True).last_hidden_state
        prompt = self.prompt_tokens(hidden).repeat_interleave(beams, 0)
        hidden = hidden.repeat_interleave(beams, 0)
        rows = rows.repeat_interleave(beams, 0)
        cache = EncoderDecoderCache(DynamicCache(config=self.lm.config), DynamicCache(config=self.lm.config))
        cache, logits = self.decoder_step(prompt, hidden, rows, cache)
        return prompt, cache, logits, hidden, rows

    def prompt_tokens(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each row's decoder prompt: the fixed tokens, the detected language in its slot
        (``detect_language``: the most likely language token after the start token)."""
        tokens = torch.tensor(self.prompt.tokens, dtype=torch.int64, device=hidden.device)
        tokens = tokens[None].expand(hidden.shape[0], -1)
        if DETECTED not in self.prompt.tokens:
            return tokens
        from transformers.modeling_outputs import BaseModelOutput

        start = tokens[:, :1]
        logits = self.lm(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), decoder_input_ids=start,
                         use_cache=False).logits[:, -1]
        is_language = vocabulary_mask(logits.shape[-1], self.prompt.language_ids, hidden.device)
        language = torch.where(is_language, logits, -math.inf).argmax(-1)
        return torch.where(tokens == DETECTED, language[:, None], tokens)

    def prefix_length(self, input_ids: torch.Tensor) -> int:
        """The decoder ids start with the prompt tokens."""
        return len(self.prompt.tokens)

    def decoder_step(self, decoder_ids: torch.Tensor, hidden: torch.Tensor, rows: torch.Tensor,
                     cache: Any) -> tuple[Any, torch.Tensor]:
        """One decoder call on the encoder's output (Whisper's decoder takes no audio mask)."""
        from transformers.modeling_outputs import BaseModelOutput

        out = self.lm(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), decoder_input_ids=decoder_ids,
                      use_cache=True, **{self.cache_argument: cache})
        return out[self.cache_argument], out.logits[:, -1]

    def processed(self, scores: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, generated: Any,
                  filled: Any = None) -> torch.Tensor:
        """``generate()``'s processors, then Whisper's (appended after them, as ``generate()``
        merges custom processors): ``SuppressTokensLogitsProcessor`` every step and
        ``SuppressTokensAtBeginLogitsProcessor`` at the first generated token."""
        scores = super().processed(scores, sequences, padding, generated, filled)
        if self.prompt.begin_suppress_tokens:
            begin = vocabulary_mask(scores.shape[-1], self.prompt.begin_suppress_tokens, scores.device)
            scores = scores.masked_fill(begin & (torch.as_tensor(generated) == 0), -math.inf)
        if self.prompt.suppress_tokens:
            suppressed = vocabulary_mask(scores.shape[-1], self.prompt.suppress_tokens, scores.device)
            scores = scores.masked_fill(suppressed, -math.inf)
        return scores

    def segment(self, ids: torch.Tensor) -> torch.Tensor:
        """The window's segment as ``generate()`` cuts it (``generate_with_fallback``): the
        generated ids; when a row ends on the pad token, as many ids as the row holds pad
        tokens are cut (one fewer when the pad token is the end token); then a last end token;
        the rows right-padded with ``pad_token_id`` to the longest."""
        pad, (end,) = self.settings.pad_token_id, self.settings.eos_token_ids
        generated = ids[:, len(self.prompt.tokens):]
        length = generated.shape[1]
        pads = (generated == pad).sum(1) - int(pad == end)
        keep = torch.where(generated[:, -1] == pad, length - pads, torch.full_like(pads, length))
        last = generated.gather(1, (keep - 1).clamp(min=0)[:, None])[:, 0]
        keep = keep - ((last == end) & (keep > 0)).long()
        positions = torch.arange(length, device=ids.device)
        segment = torch.where(positions < keep[:, None], generated, torch.full_like(generated, pad))
        return segment[:, : keep.max()]


def whisper_generator(lm: torch.nn.Module, generation_config: Any = None, **kwargs: Any) -> WhisperGenerator:
    """The generator for ``lm.generate(input_features, generation_config, **kwargs)`` on
    short-form audio, or a one-line refusal naming what it does not convert.

    Example::

        >>> whisper_generator(whisper, language="en", max_new_tokens=8).prompt.tokens   # doctest: +SKIP
        (50258, 50259, 50359, 50363)
    """
    import copy

    reference_kwargs = dict(kwargs, generation_config=generation_config)
    for name, what in _REFUSED.items():
        if kwargs.pop(name, None) is not None:
            raise UsageError(f"Whisper generate(): {name}= ({what}) is not converted",
                             hint=f"call generate() without {name}=")
    for name in _IGNORED:
        kwargs.pop(name, None)
    kwargs.pop("do_sample", None)  # Whisper samples only when temperature > 0 (generate_with_fallback)
    temperature = kwargs.pop("temperature", None)
    if isinstance(temperature, (list, tuple)) or (temperature is not None and temperature > 0.0):
        raise UsageError(f"Whisper generate(): temperature={temperature!r} samples (with fallback) and is not converted",
                         hint="leave temperature unset: Whisper then searches greedily or with beams")
    config = copy.deepcopy(generation_config if generation_config is not None else lm.generation_config)
    whisper_args = {name: kwargs.pop(name, None) for name in ("language", "task", "is_multilingual",
                                                                "return_timestamps", "force_unique_generate_call")}
    if whisper_args["return_timestamps"] or getattr(config, "return_timestamps", False):
        raise UsageError("Whisper generate(): return_timestamps=True is not converted (timestamp tokens decide the "
                         "segments)", hint="call generate() without return_timestamps")
    if isinstance(whisper_args["language"], (list, tuple)):
        raise UsageError("Whisper generate(): a language per row is not converted",
                         hint="pass one language, or none to detect it")
    if (kwargs.get("num_return_sequences") or 1) > 1:
        raise UsageError("Whisper generate(): num_return_sequences > 1 is not converted (Whisper returns each "
                         "audio's best sequence that many times)", hint="leave num_return_sequences at 1")
    prompt_tokens = _prompt_tokens(lm, config, whisper_args)
    unique = whisper_args["force_unique_generate_call"]
    if unique is None:
        unique = getattr(config, "force_unique_generate_call", False)
    max_target = lm.config.max_target_positions
    new_tokens = kwargs.pop("max_new_tokens", None) or config.max_new_tokens
    if new_tokens is None:  # _set_max_new_tokens_and_length: max_length counts from the prompt
        length = kwargs.pop("max_length", None) or config.max_length
        new_tokens = min(length + min(max_target // 2 - 1, len(prompt_tokens)), max_target) - len(prompt_tokens)
    if new_tokens + len(prompt_tokens) > max_target:
        raise UsageError(f"Whisper generate(): {len(prompt_tokens)} prompt tokens and max_new_tokens={new_tokens} "
                         f"exceed max_target_positions {max_target}", hint="pass a smaller max_new_tokens")
    settings = generation_settings(lm, config, handled=WHISPER_CONFIG, **kwargs, max_new_tokens=new_tokens,
                                   do_sample=False)
    prompt = WhisperPrompt(
        tokens=prompt_tokens, language_ids=tuple(getattr(config, "lang_to_id", {}).values()),
        suppress_tokens=tuple(config.suppress_tokens or ()), begin_suppress_tokens=tuple(config.begin_suppress_tokens or ()),
        segment_output=not unique)
    if prompt.segment_output:
        _check_one_segment(lm, config, settings)
    return generator_class(WhisperGenerator, settings)(lm, settings, prompt, reference_kwargs).eval()


def task_generator(lm: torch.nn.Module, given: dict[str, Any]) -> WhisperGenerator:
    """What ``--task text-generation`` builds for a Whisper checkpoint: its short-form
    ``generate()`` with ``force_unique_generate_call=True`` (the output is the decoder's ids,
    prompt tokens first). Whisper samples only in its temperature fallback, which is not
    converted: the sampling flags are usage errors."""
    sampling = sorted(name for name, row in SETTINGS.items()
                      if (row.sampling and row.help or name == "do_sample") and given.get(name) not in (None, False))
    if sampling:
        flag = SETTINGS[sampling[0]].flag
        raise UsageError(f"{flag}: Whisper's generate() samples only in its temperature fallback, which is not "
                         "converted", hint=f"drop {flag}: Whisper searches greedily or with --num-beams")
    return whisper_generator(lm, force_unique_generate_call=True, **given)


def _prompt_tokens(lm: torch.nn.Module, config: Any, whisper_args: dict[str, Any]) -> tuple[int, ...]:
    """The decoder prompt transformers' ``_retrieve_init_tokens`` builds for one language (or
    none), in Python numbers (this runs while fxport captures, where a tensor made on the way
    would be traced): :data:`DETECTED` in the language's slot when it would detect the language."""
    try:
        lm._set_language_and_task(language=whisper_args["language"], task=whisper_args["task"],
                                  is_multilingual=whisper_args["is_multilingual"], generation_config=config)
    except ValueError as invalid:  # transformers' own checks of language and task
        raise UsageError(f"Whisper generate(): {str(invalid).strip().splitlines()[0]}",
                         hint="fix language= / task= (transformers refuses them too)") from None
    task, language = getattr(config, "task", None), getattr(config, "language", None)
    tokens = [config.decoder_start_token_id]
    forced = getattr(config, "forced_decoder_ids", None) or getattr(lm.config, "forced_decoder_ids", None)
    if task is None and language is None and forced and forced[0][0] == 1:  # the deprecated prompt
        positions = [position for position, _ in forced]
        if positions != list(range(1, len(forced) + 1)):
            raise UsageError(f"Whisper generate(): forced_decoder_ids {forced} do not follow Whisper's prompt pattern",
                             hint="set language= and task= instead of forced_decoder_ids")
        tokens += [token for _, token in forced]
    language_undefined = len(tokens) <= 1 or tokens[1] is None
    language_id = _language_id(config, language) if language is not None else (
        DETECTED if hasattr(config, "lang_to_id") and language_undefined else None)
    if language_id is not None:
        tokens[1:2] = [language_id]
    task_ids = list(getattr(config, "task_to_id", {}).values())
    if task is not None:  # appended (transformers' replace_or_add after it changes nothing)
        if task not in ("translate", "transcribe") or task not in config.task_to_id:
            raise UsageError(f"Whisper generate(): task {task!r} is not one of {sorted(config.task_to_id)}",
                             hint="pass task='transcribe' or task='translate'")
        tokens.append(config.task_to_id[task])
    elif language is not None and task_ids and not any(t in task_ids for t in tokens):
        tokens.append(config.task_to_id["transcribe"])
    no_timestamps = getattr(config, "no_timestamps_token_id", None)
    if no_timestamps is not None and tokens[-1] != no_timestamps:
        tokens.append(no_timestamps)
    return tuple(int(t) for t in tokens if t is not None)


def _language_id(config: Any, language: str) -> int:
    """``language_to_id`` of ``_retrieve_init_tokens``: a language token, code or name."""
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    language = language.lower()
    token = (language if language in config.lang_to_id else f"<|{TO_LANGUAGE_CODE[language]}|>"
             if language in TO_LANGUAGE_CODE else f"<|{language}|>" if language in TO_LANGUAGE_CODE.values() else None)
    if token is None or token not in config.lang_to_id:
        raise UsageError(f"Whisper generate(): Unsupported language {language!r} for this model's lang_to_id",
                         hint=f"pass one of {', '.join(sorted(config.lang_to_id))}")
    return config.lang_to_id[token]


def _check_one_segment(lm: torch.nn.Module, config: Any, settings: Any) -> None:
    """Refuses what makes ``generate()``'s segment output differ from one window's segment."""
    hint = "pass force_unique_generate_call=True to generate(): the output is then the decoder's ids"
    no_timestamps = getattr(config, "no_timestamps_token_id", None)
    if no_timestamps is not None and no_timestamps + 1 < lm.config.vocab_size:
        raise UsageError("Whisper generate() decodes another segment of the audio when a row ends on two timestamp "
                         "tokens; fxport writes one window's segment", hint=hint)
    if len(settings.eos_token_ids) != 1 or config.pad_token_id is None:
        raise UsageError("Whisper generate()'s segment output needs one eos_token_id and a pad_token_id", hint=hint)
