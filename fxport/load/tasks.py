"""Tasks: ``fxport convert CHECKPOINT_DIR --task NAME`` builds the model and its inputs from a
local transformers checkpoint (``config.json`` + weights; nothing is downloaded).

- ``text-generation``: the generator of the checkpoint's family
  (:func:`fxport.generation.architectures.family_of`: decoder-only, encoder–decoder, Whisper)
  with the strategy of its settings' mode — inputs ``input_ids``, ``attention_mask``
  (left-padded; audio features for Whisper), output the prompt followed by the generated ids.
  The generator is checked against the checkpoint's own ``generate()`` on every input set
  before conversion, and the file against the generator: on prompts of several lengths and
  batch sizes, left-padded rows, and prompts searched so that rows stop at different steps.

Example::

    >>> loaded = load_task("ckpt/", "text-generation", {"max_new_tokens": 8})   # doctest: +SKIP
    >>> loaded.module.settings.describe()                                        # doctest: +SKIP
    'greedy, 8 new tokens, end tokens 2'
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from fxport.errors import ModelLoadError, UsageError, VerificationError
from fxport.eager.inputs import InputSet
from fxport.load.targets import LoadedModel
from fxport.common.quiet import transformers_progress_bars_off

TASKS = ("text-generation", "text-generation-step")
#: new tokens when neither the command line nor the checkpoint's generation_config says
DEFAULT_MAX_NEW_TOKENS = 20
#: prompts of each length tried when searching for rows that stop at each step
SEARCH_PROMPTS = 64


def load_task(path: str, task: str, settings: dict[str, Any], *, verify: bool = True) -> LoadedModel:
    """The model ``task`` builds from the checkpoint directory ``path``, with its input sets.

    ``settings``: generation settings given on the command line (``None`` values are left to
    the checkpoint's ``generation_config``). A missing directory or config, or a model class
    the task does not fit, is a usage error. ``verify=False`` (``--no-verify``) leaves out what
    only verification reads: the searched prompts that stop early and the check against the
    checkpoint's ``generate()`` (together 59% of a 12-layer conversion's time, docs/generation.md).
    """
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}", hint=f"use one of {', '.join(TASKS)}")
    from fxport.generation.settings import check_setting_ranges

    check_setting_ranges(settings, as_flags=True)  # before the checkpoint loads: a usage error costs nothing
    require_transformers(f"--task {task}")
    if not os.path.isdir(path):
        raise ModelLoadError(f"{path}: --task needs a checkpoint directory (config.json and weights)",
                             hint="pass the directory a transformers save_pretrained() wrote")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ModelLoadError(f"{path} has no config.json, so it is not a transformers checkpoint",
                             hint="pass the directory a transformers save_pretrained() wrote")
    lm = _generation_lm(path, task)
    if task == "text-generation-step":
        return _step_model(lm, path, task, settings)
    from fxport.generation.architectures import task_generator

    given = {name: value for name, value in settings.items() if value is not None}
    if "max_new_tokens" not in given and lm.generation_config.max_new_tokens is None:
        given["max_new_tokens"] = DEFAULT_MAX_NEW_TOKENS
    generator = task_generator(lm, given)
    input_sets = generation_inputs(generator, stopping=verify)
    if verify:
        check_against_generate(generator, input_sets)
    return LoadedModel(generator, input_sets, generator.dynamic_shapes, source=f"{path} --task {task}",
                       description=generator.settings.describe())


def check_against_generate(generator, input_sets: list[InputSet]) -> None:
    """fxport's generator gives the ids the checkpoint's own ``generate()`` gives on each input
    set, or a :class:`VerificationError` naming the first set where it does not (the file is
    then compared with the generator, so both comparisons together tie it to ``generate()``)."""
    from fxport.generation.sampling import sampling_draws

    settings = generator.settings
    for input_set in input_sets:
        draws = input_set.args[2:]
        drawing = sampling_draws(draws[0]) if draws else contextlib.nullcontext()  # generate() samples from them
        with torch.no_grad(), drawing:
            expected = generator.reference(*input_set.args)
        with torch.no_grad():
            produced = generator(*input_set.args)
        if expected.shape != produced.shape or not torch.equal(expected, produced):
            raise VerificationError(f"fxport's generator differs from the checkpoint's generate() on the input set "
                                    f"'{input_set.name}' ({settings.describe()})",
                                    hint="report it to fxport with the transformers version; meanwhile use "
                                         "--task text-generation-step and your own loop")


def _step_model(lm: torch.nn.Module, path: str, task: str, settings: dict[str, Any]) -> LoadedModel:
    """The one-step model and its inputs: decode steps with a past, a prefill (empty past),
    left-padded rows, several batch sizes."""
    from fxport.generation.decoder_step import DecoderStep, step_dynamic_shapes, step_inputs

    given = sorted(name for name, value in settings.items() if value is not None)
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UsageError(f"{flag} is a generation setting; --task text-generation-step writes one step, "
                         "the loop (and its settings) is yours", hint=f"drop {flag}, or use --task text-generation")
    step = DecoderStep(lm).eval()
    shapes = [(2, 5, 1, 1, "example: batch 2, past 5, one new token, one row left-padded"),
              (1, 0, 4, 0, "prefill: batch 1, empty past, 4 tokens"), (3, 7, 1, 2, "batch 3, past 7, two rows left-padded"),
              (1, 2, 3, 0, "batch 1, past 2, 3 tokens"), (4, 9, 1, 0, "batch 4, past 9")]
    input_sets = [InputSet(step_inputs(lm, batch, past, sequence, seed=index, padded_rows=padded), name=name)
                  for index, (batch, past, sequence, padded, name) in enumerate(shapes)]
    return LoadedModel(step, input_sets, step_dynamic_shapes(lm), source=f"{path} --task {task}",
                       description="one decoding step: past key/values in, present key/values out")


def require_transformers(what: str) -> None:
    """A one-line :class:`UsageError` saying what to install when transformers cannot be imported."""
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        missing = "is not installed" if exc.name == "transformers" else f"does not import ({type(exc).__name__}: {exc})"
        raise UsageError(f"{what} needs transformers, which {missing}",
                         hint="pip install 'fxport[transformers]' (bash scripts/setup installs it)") from None


def _generation_lm(path: str, task: str) -> torch.nn.Module:
    """The checkpoint's causal LM, or for ``text-generation`` its encoder–decoder LM (T5, BART)."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(path, local_files_only=True)
    auto = transformers.AutoModelForCausalLM
    if task == "text-generation" and getattr(config, "is_encoder_decoder", False):
        auto = transformers.AutoModelForSeq2SeqLM
        if type(config) in transformers.AutoModelForSpeechSeq2Seq._model_mapping:  # Whisper
            auto = transformers.AutoModelForSpeechSeq2Seq
    if type(config) not in auto._model_mapping:
        kind = "sequence-to-sequence" if auto is transformers.AutoModelForSeq2SeqLM else "causal-LM"
        raise ModelLoadError(f"{path}: model type {config.model_type!r} has no {kind} head in transformers, "
                             f"so --task {task} does not fit it",
                             hint="pass a decoder-only checkpoint (GPT-2, Llama, Mistral, Qwen, ...)"
                                  + (" or an encoder-decoder one (T5, BART, Whisper) with --task text-generation"
                                     if task == "text-generation" else ""))
    try:
        with transformers_progress_bars_off():  # fxport's status line says what loads; -q and --json print nothing
            return auto.from_pretrained(path, local_files_only=True).eval()
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"{path}: transformers could not load the checkpoint: {first_line}",
                             hint="check that the directory holds the weights save_pretrained() wrote") from None


def left_padded_prompts(batch: int, length: int, vocab: int, seed: int, lowest_id: int = 0) -> tuple:
    """``(input_ids, attention_mask)`` as a tokenizer pads prompts for generation: ids in
    ``[lowest_id, vocab)``, rows 1, 3, 5, … left-padded by 0 to ``length - 1`` positions.

    >>> ids, mask = left_padded_prompts(3, 4, vocab=64, seed=0)
    >>> ids.shape, mask[0].tolist(), int(mask[1].sum()) >= 1
    (torch.Size([3, 4]), [1, 1, 1, 1], True)
    """
    draw = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(lowest_id, vocab, (batch, length), generator=draw)
    attention_mask = torch.ones(batch, length, dtype=torch.int64)
    for row in range(1, batch, 2):
        attention_mask[row, : int(torch.randint(0, length, (), generator=draw))] = 0
    return input_ids, attention_mask


def generation_inputs(generator: torch.nn.Module, seed: int = 0, stopping: bool = True) -> list[InputSet]:
    """Prompts to export and verify a generator with: left-padded batches, prompt lengths 1, 2
    and 9, batch 1 and 4, and (``stopping``) prompts searched so that rows stop at different
    steps (one batch where they stop at several steps, one where every row stops early) when the
    end tokens are reachable at all.
    """
    from fxport.generation.architectures import family_of

    vocab = generator.lm.config.get_text_config().vocab_size
    draw = torch.Generator().manual_seed(seed)

    def prompts(batch: int, length: int, padded_rows: int, name: str) -> InputSet:
        ids = torch.randint(0, vocab, (batch, length), generator=draw)
        mask = torch.ones(batch, length, dtype=torch.int64)
        for row in range(batch - padded_rows, batch):
            mask[row, : int(torch.randint(1, length, (), generator=draw)) if length > 1 else 0] = 0
        return InputSet(generator.example_arguments(ids, mask, draw), name=name)

    if family_of(generator.lm).inputs == "audio":  # Whisper: audio windows, no prompt
        def windows(batch: int, name: str) -> InputSet:
            return InputSet(generator.example_arguments(torch.zeros(batch, 1), None, draw), name=name)

        sets = [windows(2, "example: 2 audio windows"), windows(1, "1 audio window"), windows(4, "4 audio windows")]
        return sets + (_stopping_sets(generator, vocab, draw) if stopping else [])
    sets = [prompts(2, 6, 1, "example: batch 2, length 6, one row left-padded"),
            prompts(1, 1, 0, "batch 1, length 1"), prompts(1, 2, 0, "batch 1, length 2"),
            prompts(4, 9, 2, "batch 4, length 9, two rows left-padded"), prompts(3, 2, 1, "batch 3, length 2")]
    return sets + (_stopping_sets(generator, vocab, draw) if stopping else [])


def _stopping_sets(generator, vocab: int, draw: torch.Generator) -> list[InputSet]:
    """Batches whose rows stop at different steps, found by running eager on random prompts."""
    settings = generator.settings
    if not settings.eos_token_ids:
        return []
    length = 5
    ids = torch.randint(0, vocab, (SEARCH_PROMPTS, length), generator=draw)
    arguments = generator.example_arguments(ids, torch.ones_like(ids), draw)
    with torch.no_grad():
        out = generator(*arguments)[:, generator.prefix_length(ids):]
    out = out[::settings.num_return_sequences]  # each prompt's best sequence (rows are prompt × returned)
    is_end = torch.isin(out, torch.tensor(settings.eos_token_ids))
    stop_step = torch.where(is_end.any(1), is_end.int().argmax(1) + 1, torch.full((len(ids),), 0))
    by_step: dict[int, int] = {}
    for row, step in enumerate(stop_step.tolist()):
        by_step.setdefault(step, row)
    stopping = sorted(step for step in by_step if step > 0)
    if not stopping:
        return []
    rows = [by_step[step] for step in stopping] + ([by_step[0]] if 0 in by_step else [])
    sets = [InputSet(tuple(argument[rows] for argument in arguments), name=f"rows stopping at steps {stopping}"
                     + (" and one that never stops" if 0 in by_step else ""))]
    early = [row for row, step in enumerate(stop_step.tolist()) if step == stopping[0]][:3]
    sets.append(InputSet(tuple(argument[early] for argument in arguments),
                         name=f"every row stops at step {stopping[0]}"))
    return sets
