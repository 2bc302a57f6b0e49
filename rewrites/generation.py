"""transformers' ``generate()`` called in a model's ``forward``: greedy search as one ONNX Loop.

transformers' own decoding loop cannot be captured: it decides, in Python, on tensor values
(``this_peer_finished``), defers stop checks, and keeps its state in Python objects
(``LogitsProcessorList``, ``StoppingCriteriaList``, ``DeferredStopCheck``). While fxport
captures, this rule stands in for ``GenerationMixin.generate`` with fxport's generator
(:func:`fxport.generation.generate.generate`): the same loop written as a loop fxport
converts, with the same settings read the same way. The eager reference fxport verifies
against is transformers' real ``generate()`` (rules apply only while capturing), so the file is
compared token for token with it.

What it covers: greedy search, beam search and sampling (``do_sample=True`` inside a
``fxport.generation.sampling.sampling_draws(draws)`` block: the draws are an input, docs/generation.md);
``max_new_tokens``, ``min_new_tokens``, one or several ``eos_token_id``, ``pad_token_id``,
``repetition_penalty``, the sampling warpers; left-padded ``attention_mask`` (or none: inferred as
``generate()`` infers it); encoder–decoder models. Anything else (beam sampling, logits
processors, streamers, assistant models, …) is refused in one line naming the setting.

Whisper's own ``generate()`` (``WhisperGenerationMixin``) on short-form audio is the second rule:
its prompt tokens, suppressed tokens and language detection, then the same searches
(:mod:`fxport.generation.families.whisper`).
"""

from __future__ import annotations

import sys

import fxport
from fxport.generation.generate import generate as fxport_generate
from fxport.generation.generate import generate_whisper

if "transformers" in sys.modules:  # collected again once transformers is imported (OPTIONAL_OP_LIBRARIES)

    @fxport.patch("transformers.generation.utils.GenerationMixin.generate", name="transformers-generate",
                  priority=fxport.BUILTIN_PRIORITY)
    def generate(self, inputs=None, generation_config=None, **kwargs):
        """transformers' generate() as fxport's generator (one ONNX Loop)."""
        return fxport_generate(self, inputs, generation_config, **kwargs)

    @fxport.patch("transformers.models.whisper.generation_whisper.WhisperGenerationMixin.generate",
                  name="transformers-whisper-generate", priority=fxport.BUILTIN_PRIORITY)
    def whisper_generate(self, input_features=None, generation_config=None, **kwargs):
        """Whisper's generate() on short-form audio as fxport's Whisper generator (one ONNX Loop)."""
        return generate_whisper(self, input_features, generation_config, **kwargs)
