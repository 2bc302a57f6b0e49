"""Real-model sweep: transformers architectures converted by fxport and by the stock exporter.

Each architecture is built from a tiny config object with random weights (nothing is
downloaded), wrapped so that it takes tensors and returns tensors, and converted twice with batch
and sequence dynamic: by ``fxport.convert`` (verification on) and by
``torch.onnx.export(..., dynamo=True)``. Then this script checks both written files itself with
ONNX Runtime against eager PyTorch on inputs neither export saw: batch 1 and 3, sequence lengths
5 and 13, token ids inside the vocabulary, and padding-shaped attention masks (all ones,
right-padded, left-padded, every row with at least one valid position). Each architecture runs
in its own subprocess (isolation, a timeout, a memory limit).

Usage::

    python3 -m benchmarks.real_models                      # all architectures, writes docs/real-models.md
    python3 -m benchmarks.real_models --only gpt2,bert     # a few, prints the table only
    python3 -m benchmarks.real_models --workers 2 --timeout 900

The tests (tests/test_real_models.py) import :func:`build` and :func:`check_file` from here, so
the suite and the sweep convert the same models and judge them the same way.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import statistics
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "real-models.md")

#: The float32 tolerances fxport verifies with (fxport.verify.compare.TOLERANCES): |ort - eager| ≤ ATOL + RTOL·|eager|.
ATOL, RTOL = 1e-4, 1e-3
VOCAB = 100
#: Example shapes the models are exported with.
BATCH, SEQ, TGT = 2, 8, 6
IMAGE = 32
AUDIO_SAMPLES = 160


# --- the architectures ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Arch:
    """One architecture of the sweep.

    Attributes:
        name: short key (``--only``).
        label: what the table shows.
        family: decoder, encoder, seq2seq, audio, vision or moe.
        kind: the inputs it takes: ``text`` (input_ids, attention_mask), ``seq2seq`` (plus
            decoder_input_ids), ``image`` (pixel_values), ``audio`` (input_values) or
            ``features`` (log-mel input_features of a fixed length).
        make: builds the bare transformers model (seeded, random weights).
        pad_id: the token id placed at padded positions (what a tokenizer writes there).
    """

    name: str
    label: str
    family: str
    kind: str
    make: Callable[[], torch.nn.Module]
    pad_id: int = 0


def _t():
    import transformers

    return transformers


def _decoder_sizes(**extra) -> dict:
    sizes = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=0,
                 bos_token_id=1, eos_token_id=2)
    sizes.update(extra)
    return sizes


def _encoder_sizes(**extra) -> dict:
    sizes = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                 vocab_size=VOCAB, max_position_embeddings=64)
    sizes.update(extra)
    return sizes


def _make_gpt2():
    t = _t()
    return t.GPT2Model(t.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64))


def _make_gpt_neox():
    t = _t()
    return t.GPTNeoXModel(t.GPTNeoXConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                          intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
                                          rotary_pct=0.5))


def _make_llama():
    t = _t()
    return t.LlamaModel(t.LlamaConfig(**_decoder_sizes()))


def _make_mistral():
    t = _t()
    return t.MistralModel(t.MistralConfig(**_decoder_sizes(sliding_window=8)))


def _make_qwen2():
    t = _t()
    return t.Qwen2Model(t.Qwen2Config(**_decoder_sizes()))


def _make_qwen3():
    t = _t()
    return t.Qwen3Model(t.Qwen3Config(**_decoder_sizes(head_dim=8)))


def _make_phi3():
    t = _t()
    return t.Phi3Model(t.Phi3Config(**_decoder_sizes()))


def _make_gemma2():
    t = _t()
    return t.Gemma2Model(t.Gemma2Config(**_decoder_sizes(head_dim=8, sliding_window=8)))


def _make_gemma3():
    t = _t()
    return t.Gemma3TextModel(t.Gemma3TextConfig(**_decoder_sizes(head_dim=8, sliding_window=8)))


def _make_olmo():
    t = _t()
    return t.OlmoModel(t.OlmoConfig(**_decoder_sizes()))


def _make_falcon():
    t = _t()
    return t.FalconModel(t.FalconConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                        vocab_size=VOCAB, pad_token_id=0))


def _make_opt():
    t = _t()
    return t.OPTModel(t.OPTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, ffn_dim=64,
                                  word_embed_proj_dim=32, vocab_size=VOCAB, max_position_embeddings=64))


def _make_bert():
    t = _t()
    return t.BertModel(t.BertConfig(**_encoder_sizes()), add_pooling_layer=False)


def _make_roberta():
    t = _t()
    return t.RobertaModel(t.RobertaConfig(**_encoder_sizes(pad_token_id=1)), add_pooling_layer=False)


def _make_distilbert():
    t = _t()
    return t.DistilBertModel(t.DistilBertConfig(n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=VOCAB,
                                                max_position_embeddings=64))


def _make_albert():
    t = _t()
    return t.AlbertModel(t.AlbertConfig(**_encoder_sizes(embedding_size=16)), add_pooling_layer=False)


def _make_electra():
    t = _t()
    return t.ElectraModel(t.ElectraConfig(**_encoder_sizes(embedding_size=16)))


def _make_deberta_v2():
    t = _t()
    return t.DebertaV2Model(t.DebertaV2Config(**_encoder_sizes(
        relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=16, max_relative_positions=-1,
        norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False)))


def _make_clip_text():
    t = _t()
    return t.CLIPTextModel(t.CLIPTextConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                            intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
                                            pad_token_id=0, bos_token_id=1, eos_token_id=2))


def _t5_config():
    t = _t()
    return t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                      decoder_start_token_id=0, pad_token_id=0)


def _make_t5_encoder():
    return _t().T5EncoderModel(_t5_config())


def _make_t5():
    return _t().T5Model(_t5_config())


def _make_bart():
    t = _t()
    return t.BartModel(t.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                    decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
                                    bos_token_id=0, eos_token_id=2, decoder_start_token_id=2))


def _make_whisper_encoder():
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    t = _t()
    return WhisperEncoder(t.WhisperConfig(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                          encoder_ffn_dim=64, max_source_positions=16, vocab_size=VOCAB))


def _make_wav2vec2():
    t = _t()
    return t.Wav2Vec2Model(t.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_kernel=(10, 3), conv_stride=(5, 2), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, vocab_size=VOCAB))


def _make_vit():
    t = _t()
    return t.ViTModel(t.ViTConfig(image_size=IMAGE, patch_size=8, num_channels=3, **_vision_sizes()),
                      add_pooling_layer=False)


def _vision_sizes() -> dict:
    return dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _make_convnext():
    t = _t()
    return t.ConvNextModel(t.ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
                                            patch_size=4, image_size=IMAGE))


def _make_resnet():
    t = _t()
    return t.ResNetModel(t.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                        layer_type="basic"))


def _make_swin():
    t = _t()
    return t.SwinModel(t.SwinConfig(image_size=IMAGE, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1],
                                    num_heads=[2, 2], window_size=4), add_pooling_layer=False)


def _make_clip_vision():
    t = _t()
    return t.CLIPVisionModel(t.CLIPVisionConfig(image_size=IMAGE, patch_size=8, num_channels=3, **_vision_sizes()))


def _make_mixtral():
    t = _t()
    return t.MixtralModel(t.MixtralConfig(**_decoder_sizes(num_local_experts=4, num_experts_per_tok=2)))


def _make_mixtral_eager_experts():
    """Mixtral with transformers' own experts loop (``for expert_idx in expert_hit:``): fxport
    converts that library function during capture (docs/control-flow.md, "Library code")."""
    t = _t()
    return t.MixtralModel(t.MixtralConfig(**_decoder_sizes(num_local_experts=4, num_experts_per_tok=2),
                                          experts_implementation="eager", attn_implementation="eager"))


def _make_qwen2_moe():
    t = _t()
    return t.Qwen2MoeModel(t.Qwen2MoeConfig(**_decoder_sizes(
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        decoder_sparse_step=1)))


def _make_qwen3_moe():
    t = _t()
    return t.Qwen3MoeModel(t.Qwen3MoeConfig(**_decoder_sizes(
        head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1)))


ARCHITECTURES: dict[str, Arch] = {arch.name: arch for arch in [
    Arch("gpt2", "GPT-2", "decoder", "text", _make_gpt2),
    Arch("gpt_neox", "GPT-NeoX", "decoder", "text", _make_gpt_neox),
    Arch("llama", "Llama", "decoder", "text", _make_llama),
    Arch("mistral", "Mistral (sliding window 8)", "decoder", "text", _make_mistral),
    Arch("qwen2", "Qwen2", "decoder", "text", _make_qwen2),
    Arch("qwen3", "Qwen3", "decoder", "text", _make_qwen3),
    Arch("phi3", "Phi-3", "decoder", "text", _make_phi3),
    Arch("gemma2", "Gemma 2 (sliding window 8)", "decoder", "text", _make_gemma2),
    Arch("gemma3", "Gemma 3 text (sliding window 8)", "decoder", "text", _make_gemma3),
    Arch("olmo", "OLMo", "decoder", "text", _make_olmo),
    Arch("falcon", "Falcon", "decoder", "text", _make_falcon),
    Arch("opt", "OPT", "decoder", "text", _make_opt, pad_id=1),
    Arch("bert", "BERT", "encoder", "text", _make_bert),
    Arch("roberta", "RoBERTa", "encoder", "text", _make_roberta, pad_id=1),
    Arch("distilbert", "DistilBERT", "encoder", "text", _make_distilbert),
    Arch("albert", "ALBERT", "encoder", "text", _make_albert),
    Arch("electra", "ELECTRA", "encoder", "text", _make_electra),
    Arch("deberta_v2", "DeBERTa-v2", "encoder", "text", _make_deberta_v2),
    Arch("clip_text", "CLIP text", "encoder", "text", _make_clip_text),
    Arch("t5_encoder", "T5 encoder", "seq2seq", "text", _make_t5_encoder),
    Arch("t5", "T5 (encoder-decoder)", "seq2seq", "seq2seq", _make_t5),
    Arch("bart", "BART (encoder-decoder)", "seq2seq", "seq2seq", _make_bart, pad_id=1),
    Arch("whisper_encoder", "Whisper encoder", "audio", "features", _make_whisper_encoder),
    Arch("wav2vec2", "Wav2Vec2", "audio", "audio", _make_wav2vec2),
    Arch("vit", "ViT", "vision", "image", _make_vit),
    Arch("convnext", "ConvNeXt", "vision", "image", _make_convnext),
    Arch("resnet", "ResNet", "vision", "image", _make_resnet),
    Arch("swin", "Swin", "vision", "image", _make_swin),
    Arch("clip_vision", "CLIP vision", "vision", "image", _make_clip_vision),
    Arch("mixtral", "Mixtral", "moe", "text", _make_mixtral),
    Arch("mixtral_eager_experts", "Mixtral (eager attention and experts loop)", "moe", "text",
         _make_mixtral_eager_experts),
    Arch("qwen2_moe", "Qwen2-MoE", "moe", "text", _make_qwen2_moe),
    Arch("qwen3_moe", "Qwen3-MoE", "moe", "text", _make_qwen3_moe),
]}


# --- wrappers: tensors in, tensors out ----------------------------------------------------------

class TextModel(torch.nn.Module):
    """Token ids and an attention mask in, the last hidden state out."""

    def __init__(self, model: torch.nn.Module, use_cache: bool):
        super().__init__()
        self.model = model
        self.extra = {"use_cache": False} if use_cache else {}

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **self.extra).last_hidden_state


class Seq2SeqModel(torch.nn.Module):
    """Source ids, their mask and decoder ids in; decoder and encoder last hidden states out."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                         use_cache=False)
        return out.last_hidden_state, out.encoder_last_hidden_state


class SignalModel(torch.nn.Module):
    """Pixels, a waveform or log-mel features in (one tensor), the last hidden state out."""

    def __init__(self, model: torch.nn.Module, input_name: str):
        super().__init__()
        self.model = model
        self.input_name = input_name

    def forward(self, values):
        return self.model(**{self.input_name: values}).last_hidden_state


_SIGNAL_INPUT = {"image": "pixel_values", "audio": "input_values", "features": "input_features"}


@dataclasses.dataclass
class Built:
    """A wrapped model ready to convert: module, example kwargs, dynamic shapes (simple form)."""

    arch: Arch
    module: torch.nn.Module
    example: dict[str, torch.Tensor]
    dynamic_shapes: dict[str, dict[int, str]]


def build(name: str, seed: int = 0) -> Built:
    """The wrapped, eval-mode model of architecture ``name`` with its example and dynamic shapes."""
    arch = ARCHITECTURES[name]
    torch.manual_seed(seed)
    model = arch.make().eval()
    generator = torch.Generator().manual_seed(seed)
    if arch.kind in ("text", "seq2seq"):
        module = TextModel(model, use_cache=arch.family in ("decoder", "moe")) if arch.kind == "text" \
            else Seq2SeqModel(model)
        example = text_inputs(arch, BATCH, SEQ, "ones", generator, tgt=TGT)
        dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        if arch.kind == "seq2seq":
            dynamic["decoder_input_ids"] = {0: "batch", 1: "tgt"}
    else:
        module = SignalModel(model, _SIGNAL_INPUT[arch.kind])
        example = {"values": signal_input(arch, model, BATCH, generator)}
        dynamic = {"values": {0: "batch", 1: "samples"} if arch.kind == "audio" else {0: "batch"}}
    return Built(arch, module.eval(), example, dynamic)


def text_inputs(arch: Arch, batch: int, seq: int, padding: str, generator: torch.Generator,
                tgt: int | None = None) -> dict[str, torch.Tensor]:
    """Ids inside the vocabulary and a padding-shaped mask (``ones``, ``right`` or ``left``).

    Padded rows keep between ``seq`` and one valid position (the last row exactly one); padded
    positions hold the model's pad id, as a tokenizer writes them.
    """
    ids = torch.randint(3, VOCAB, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.long)
    if padding != "ones":
        for row in range(batch):
            valid = seq - (seq - 1) * row // max(batch - 1, 1)
            if padding == "right":
                mask[row, valid:] = 0
            else:
                mask[row, : seq - valid] = 0
        ids = ids.masked_fill(mask == 0, arch.pad_id)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if arch.kind == "seq2seq":
        inputs["decoder_input_ids"] = torch.randint(3, VOCAB, (batch, tgt or TGT), generator=generator)
    return inputs


def signal_input(arch: Arch, model: torch.nn.Module, batch: int, generator: torch.Generator,
                 samples: int = AUDIO_SAMPLES) -> torch.Tensor:
    """Normalised pixels, a waveform, or log-mel features of the length the encoder requires."""
    if arch.kind == "image":
        return torch.randn(batch, 3, IMAGE, IMAGE, generator=generator)
    if arch.kind == "audio":
        return torch.randn(batch, samples, generator=generator)
    config = model.config
    return torch.randn(batch, config.num_mel_bins, 2 * config.max_source_positions, generator=generator)


def check_inputs(built: Built, seed: int = 1) -> list[tuple[str, dict[str, torch.Tensor]]]:
    """The input sets both files are checked on: sizes and masks neither export saw."""
    arch = built.arch
    generator = torch.Generator().manual_seed(seed)
    if arch.kind in ("text", "seq2seq"):
        plan = [(2, 8, "ones", 6), (1, 5, "ones", 1), (1, 13, "ones", 9), (3, 13, "right", 4),
                (3, 13, "left", 9), (3, 5, "left", 3)]
        sets = []
        for batch, seq, padding, tgt in plan:
            label = f"batch={batch} seq={seq}" + ("" if padding == "ones" else f" {padding}-padded")
            if arch.kind == "seq2seq":
                label += f" tgt={tgt}"
            sets.append((label, text_inputs(arch, batch, seq, padding, generator, tgt=tgt)))
        return sets
    model = built.module.model
    sets = [(f"batch={batch}", {"values": signal_input(arch, model, batch, generator)}) for batch in (2, 1, 3)]
    if arch.kind == "audio":
        sets += [(f"batch={batch} samples={samples}", {"values": signal_input(arch, model, batch, generator, samples)})
                 for batch, samples in ((1, 97), (3, 333))]
    return sets


# --- checking a file ------------------------------------------------------------------------------

@dataclasses.dataclass
class Check:
    """How an ONNX file compares with eager PyTorch on :func:`check_inputs`.

    ``max_abs`` is over every output element of every set; ``max_abs_valid`` leaves out the
    positions a padding mask marks invalid (a wrong value there is still a wrong file, but a
    different kind of wrong). ``failed`` names the sets that differ; ``error`` says why the file
    could not be run at all.
    """

    max_abs: float = 0.0
    max_abs_valid: float = 0.0
    failed: list[str] = dataclasses.field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.failed and not self.error

    def summary(self) -> str:
        if self.error:
            return f"file does not run: {self.error}"
        if self.passed:
            return "equals eager"
        where = "padded positions only" if self.max_abs_valid <= ATOL else "valid positions too"
        return f"differs from eager on {', '.join(self.failed)} ({where})"


def check_file(built: Built, path: str, sets: list[tuple[str, dict]] | None = None) -> Check:
    """Run the ONNX file at ``path`` with ONNX Runtime (CPU) and compare with eager on every set."""
    import onnxruntime as ort

    check = Check()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - the file is judged, not the script
        check.error = first_line(exc)
        return check
    names = [i.name for i in session.get_inputs()]
    for label, inputs in sets if sets is not None else check_inputs(built):
        with torch.no_grad():
            expected = built.module(**{k: v.clone() for k, v in inputs.items()})
        expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        values = list(inputs.values())
        try:
            actual = session.run(None, {name: value.numpy() for name, value in zip(names, values)})
        except Exception as exc:  # noqa: BLE001
            check.failed.append(label)
            check.error = f"{label}: {first_line(exc)}"
            continue
        mask = inputs.get("attention_mask")
        ok = len(actual) == len(expected)
        for ref, got in zip(expected, actual):
            ref = ref.numpy().astype(np.float64)
            got = got.astype(np.float64)
            if ref.shape != got.shape:
                ok = False
                check.max_abs = check.max_abs_valid = float("inf")
                continue
            same_nan = np.array_equal(np.isnan(ref), np.isnan(got))
            diff = np.abs(np.nan_to_num(ref, nan=0.0) - np.nan_to_num(got, nan=0.0))
            bad = diff > ATOL + RTOL * np.abs(np.nan_to_num(ref, nan=0.0))
            ok = ok and same_nan and not bad.any()
            check.max_abs = max(check.max_abs, float(diff.max()) if diff.size else 0.0)
            valid = diff
            if mask is not None and ref.ndim >= 2 and tuple(ref.shape[:2]) == tuple(mask.shape):
                keep = mask.numpy().astype(bool).reshape(mask.shape + (1,) * (ref.ndim - 2))
                valid = np.where(keep, diff, 0.0)
            check.max_abs_valid = max(check.max_abs_valid, float(valid.max()) if valid.size else 0.0)
            if not same_nan:
                check.max_abs = check.max_abs_valid = float("inf")
        if not ok:
            check.failed.append(label)
    return check


def first_line(exc: BaseException) -> str:
    """One line saying why ``exc`` was raised: fxport's own message, or for other errors the
    first line of the outermost message plus the first line of the root cause (torch.onnx wraps
    the real reason in a generic "step N/3" message)."""
    if _is_fxport_error(exc):
        return _shorten(_plain(str(exc)))
    line = f"{type(exc).__name__}: {_first(exc)}"
    root = exc
    while (root.__cause__ or root.__context__) is not None and root is not (root.__cause__ or root.__context__):
        root = root.__cause__ or root.__context__
    if root is not exc:
        line = f"{_first(exc).split('. ')[0]}: {type(root).__name__}: {_first(root)}"
    return _shorten(line)


def _first(exc: BaseException) -> str:
    text = _plain(str(exc)).strip()
    return next((part.strip() for part in text.splitlines() if part.strip()), type(exc).__name__)


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _shorten(line: str, limit: int = 240) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _is_fxport_error(exc: BaseException) -> bool:
    from fxport.errors import ConversionError

    return isinstance(exc, ConversionError)


# --- converting -------------------------------------------------------------------------------

def stock_dynamic_shapes(built: Built) -> dict:
    """The simple-form dynamic shapes as torch.export ``Dim`` objects shared by name."""
    dims: dict[str, Any] = {}
    return {name: {axis: dims.setdefault(dim, torch.export.Dim(dim)) for axis, dim in axes.items()}
            for name, axes in built.dynamic_shapes.items()}


def convert_stock(built: Built, path: str) -> float:
    """``torch.onnx.export(dynamo=True)`` as a user calls it; returns seconds."""
    from fxport.common.quiet import quiet_torch

    start = time.perf_counter()
    with quiet_torch():
        torch.onnx.export(built.module, (), path, kwargs=built.example, dynamic_shapes=stock_dynamic_shapes(built),
                          dynamo=True)
    return time.perf_counter() - start


def convert_fxport(built: Built, path: str, verify: bool = True):
    """``fxport.convert`` with verification on (by default); returns (result, seconds)."""
    import fxport

    start = time.perf_counter()
    result = fxport.convert(built.module, kwargs=built.example, dynamic_shapes=built.dynamic_shapes, output=path,
                            verify=verify)
    return result, time.perf_counter() - start


def _warm_up() -> None:
    """One tiny stock export so neither side pays the process's first-export costs in its timing."""
    from fxport.common.quiet import quiet_torch

    with quiet_torch(), tempfile.TemporaryDirectory() as tmp:
        torch.onnx.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), os.path.join(tmp, "w.onnx"), dynamo=True)


def run_architecture(name: str) -> dict:
    """Convert ``name`` both ways, check both files, return the record (JSON-ready)."""
    import warnings

    import transformers

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    record: dict[str, Any] = {"name": name}
    built = build(name)
    sets = check_inputs(built)
    record["check_sets"] = [label for label, _ in sets]
    _warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        stock_path = os.path.join(tmp, "stock.onnx")
        stock: dict[str, Any] = {}
        try:
            stock["seconds"] = convert_stock(built, stock_path)
        except Exception as exc:  # noqa: BLE001 - a refusal is a verdict
            stock.update(verdict="refused", message=first_line(exc))
        else:
            check = check_file(built, stock_path, sets)
            stock.update(verdict="ok" if check.passed else "wrong", message="" if check.passed else check.summary(),
                         max_abs=check.max_abs, max_abs_valid=check.max_abs_valid)
        record["stock"] = stock

        ours_path = os.path.join(tmp, "fxport.onnx")
        ours: dict[str, Any] = {}
        try:
            result, seconds = convert_fxport(built, ours_path)
        except Exception as exc:  # noqa: BLE001
            # fxport's own errors are refusals; anything else escaping convert is a crash of fxport.
            ours.update(verdict="refused" if _is_fxport_error(exc) else "internal error", message=first_line(exc),
                        stage=getattr(exc, "stage", ""))
            if getattr(exc, "stage", "") == "verify":
                # Would the file have been right? Convert again without verification and check it.
                try:
                    convert_fxport(built, ours_path, verify=False)
                    unverified = check_file(built, ours_path, sets)
                    ours["unverified"] = unverified.summary()
                    ours["unverified_max_abs"] = unverified.max_abs
                except Exception as again:  # noqa: BLE001
                    ours["unverified"] = f"not produced: {first_line(again)}"
        else:
            verify_s = result.timings.get("verify", 0.0)
            check = check_file(built, ours_path, sets)
            ours.update(verdict="ok" if check.passed else "wrong", message="" if check.passed else check.summary(),
                        max_abs=check.max_abs, max_abs_valid=check.max_abs_valid, seconds=seconds - verify_s,
                        verify_seconds=verify_s, rules=sorted({r.rule for r in result.rewrites}),
                        verified_sets=[row.name for row in result.verification])
        record["fxport"] = ours
    return record


# --- the sweep --------------------------------------------------------------------------------

def run_in_subprocess(name: str, timeout: float, memory_gb: float, script: str = "benchmarks.real_models") -> dict:
    """Run one architecture in a fresh interpreter (``python3 -m script --worker name``); a crash,
    timeout or OOM becomes a record."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "record.json")
        command = [sys.executable, "-m", script, "--worker", name, "--record", out]
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1")
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
                                  preexec_fn=_memory_limit(memory_gb))
        except subprocess.TimeoutExpired:
            return _broken(name, f"timed out after {timeout:.0f} s", time.perf_counter() - start)
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            return _broken(name, f"worker exited {proc.returncode}: {tail[-1] if tail else ''}", wall)
        with open(out) as handle:
            record = json.load(handle)
    record["wall_seconds"] = wall
    return record


def _memory_limit(gigabytes: float):
    def limit():
        import resource

        size = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    return limit if gigabytes > 0 else None


def _broken(name: str, message: str, wall: float) -> dict:
    broken = {"verdict": "crashed", "message": message}
    return {"name": name, "stock": dict(broken), "fxport": dict(broken), "wall_seconds": wall}


def fxport_cell(record: dict) -> str:
    ours = record["fxport"]
    if ours["verdict"] == "ok":
        return "converted + verified"
    if ours["verdict"] == "wrong":
        return f"**wrong file** (verified, but {ours['message']})"
    text = f"{ours['verdict']}: {ours['message']}"
    if "unverified" in ours:
        text += f" [file without verification: {ours['unverified']}]"
    return text


def stock_cell(record: dict) -> str:
    stock = record["stock"]
    if stock["verdict"] == "ok":
        return "converted, correct"
    if stock["verdict"] == "wrong":
        return f"**wrong file**: {stock['message']}"
    return f"{stock['verdict']}: {stock['message']}"


def error_cell(side: dict) -> str:
    if "max_abs" not in side:
        return "—"
    text = f"{side['max_abs']:.1e}"
    if side["max_abs"] > ATOL and side.get("max_abs_valid", side["max_abs"]) <= ATOL:
        text += f" (non-padded {side['max_abs_valid']:.1e})"
    return text


def ratio_cell(record: dict) -> str:
    ours, stock = record["fxport"].get("seconds"), record["stock"].get("seconds")
    if ours is None or not stock:
        return "—"
    end_to_end = ours + record["fxport"].get("verify_seconds", 0.0)
    return f"{ours / stock:.2f}× ({ours:.1f} s / {stock:.1f} s); verified {end_to_end / stock:.2f}×"


def time_ratios(records: list[dict]) -> tuple[list[float], list[float]]:
    """fxport ÷ stock convert time per architecture both converted: without verification, end to end."""
    pairs = [(r["fxport"]["seconds"], r["fxport"].get("verify_seconds", 0.0), r["stock"]["seconds"])
             for r in records if r["fxport"].get("seconds") is not None and r["stock"].get("seconds")]
    return [ours / stock for ours, _, stock in pairs], [(ours + check) / stock for ours, check, stock in pairs]


def table_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for record in records:
        arch = ARCHITECTURES[record["name"]]
        rules = ", ".join(record["fxport"].get("rules", [])) or "—"
        rows.append([arch.label, arch.family, fxport_cell(record), stock_cell(record),
                     f"{error_cell(record['fxport'])} / {error_cell(record['stock'])}", ratio_cell(record), rules])
    return rows


HEADER = ["architecture", "family", "fxport", "stock exporter", "max abs error fxport / stock",
          "convert time fxport / stock", "fxport rules fired"]


def summary_line(records: list[dict]) -> str:
    total = len(records)
    ours = sum(r["fxport"]["verdict"] == "ok" for r in records)
    stock = sum(r["stock"]["verdict"] == "ok" for r in records)
    ours_wrong = sum(r["fxport"]["verdict"] == "wrong" for r in records)
    stock_wrong = [r for r in records if r["stock"]["verdict"] == "wrong"]
    padded_only = sum(r["stock"].get("max_abs_valid", float("inf")) <= ATOL for r in stock_wrong)
    stock_refused = sum(r["stock"]["verdict"] == "refused" for r in records)
    plain, verified = time_ratios(records)
    timing = (f" Convert time, median over the {len(plain)} architectures both convert: {statistics.median(plain):.2f}× "
              f"the stock export without verification, {statistics.median(verified):.2f}× end to end with "
              "verification and coverage (target ≤ 1.10×).") if plain else ""
    return (f"**fxport converts and verifies {ours}/{total}; the stock exporter converts {stock}/{total} to a file "
            f"equal to eager** — it refuses {stock_refused} and writes {len(stock_wrong)} wrong files "
            f"({padded_only} of them wrong only at padded positions of left- or right-padded batches). "
            f"fxport wrote {ours_wrong} wrong files." + timing)


def markdown(records: list[dict], elapsed: float, workers: int, load: tuple[float, float]) -> str:
    from benchmarks.common import machine_info
    import transformers

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sets = next((r["check_sets"] for r in records if r.get("check_sets") and ARCHITECTURES[r["name"]].kind == "text"), [])
    lines = [
        "# Real models: fxport and the stock exporter on transformers architectures",
        "",
        f"Generated by `python3 -m benchmarks.real_models` on {stamp} ({len(records)} architectures, "
        f"{workers} worker{'s' if workers != 1 else ''}, sweep took {elapsed / 60:.1f} min). "
        f"Machine: {machine_info()}, transformers {transformers.__version__}; load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end (the machine is shared: convert times are noisy).",
        "",
        summary_line(records),
        "",
        "## Method",
        "",
        "- Every model is a transformers architecture built from a tiny config object (2 layers, hidden 32, "
        "2–4 heads, vocabulary 100, intermediate 64) with random weights; nothing is downloaded. A small wrapper "
        "makes it take tensors and return tensors: text models take `input_ids` and `attention_mask` and return "
        "the last hidden state; T5 and BART also take `decoder_input_ids` and return the decoder's and the "
        "encoder's last hidden states; vision models take `pixel_values` (batch dynamic), Wav2Vec2 a waveform "
        "(batch and length dynamic), the Whisper encoder log-mel features (batch dynamic; its length is fixed "
        "by the model).",
        f"- Both exporters get the same example (batch {BATCH} × sequence {SEQ}, mask all ones; decoder length "
        f"{TGT}) and the same dynamic axes (batch, sequence, decoder length as named `Dim`s). fxport: "
        "`fxport.convert(model, kwargs=..., dynamic_shapes=..., output=...)` with its verification on. Stock: "
        "`torch.onnx.export(model, (), path, kwargs=..., dynamic_shapes=..., dynamo=True)`.",
        "- Then this script checks both written files itself: ONNX Runtime (CPU) against eager PyTorch on "
        "inputs neither export saw" + (f" — {'; '.join(sets)}" if sets else "") + ". Ids are drawn inside the "
        "vocabulary; padded positions hold the pad id; padded rows keep between all and exactly one valid "
        "position. Vision and audio models are checked on batch 1, 2 and 3 (audio also at other lengths).",
        f"- A file is correct when every output element satisfies |ort − eager| ≤ {ATOL:g} + {RTOL:g}·|eager| "
        "(fxport's float32 tolerance) on every set. **Every position counts**, padded ones too: eager is the "
        "reference. When a file differs only at padded positions the verdict says so.",
        "- fxport verdicts: *converted + verified* (and equal to eager on the check sets), *refused* with its "
        "one-line message (for a refusal at verification the file is produced again without verification and "
        "checked, to tell a justified refusal from a false one), *wrong file* (verified, yet differs here), or "
        "*internal error* (what escaped was not one of fxport's own one-line errors). Stock verdicts: *converted, correct*, *refused* (first line of its error), *wrong file*.",
        "- Max abs error is over all check sets and outputs. Convert time is wall time in the same subprocess "
        "after a warm-up export, one run each: fxport without its verification stage ÷ stock, then \"verified\": "
        "fxport end to end (verification included) ÷ stock. Each architecture runs in its own subprocess with a timeout.",
        "",
        "Rerun: `python3 -m benchmarks.real_models` (all architectures; writes this file), "
        "`python3 -m benchmarks.real_models --only gpt2,bert` (prints only), `--workers N` for parallel "
        "subprocesses. The test suite runs a subset through the same builders and checker "
        "(tests/test_real_models.py).",
        "",
        "## Results",
        "",
        "| " + " | ".join(HEADER) + " |",
        "| " + " | ".join("---" for _ in HEADER) + " |",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table_rows(records)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated architecture names: " + ", ".join(ARCHITECTURES))
    parser.add_argument("--workers", type=int, default=1, help="architectures converted at once (subprocesses)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per architecture")
    parser.add_argument("--memory-gb", type=float, default=8, help="address-space limit per subprocess (0: none)")
    parser.add_argument("--output", help="markdown file to write (default: docs/real-models.md for a full sweep)")
    parser.add_argument("--json", help="also write the records as JSON here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--record", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        try:
            record = run_architecture(options.worker)
        except Exception:  # noqa: BLE001 - the harness failing is reported as a crash with its trace
            traceback.print_exc()
            return 1
        with open(options.record, "w") as handle:
            json.dump(record, handle)
        return 0

    names = list(ARCHITECTURES)
    if options.only:
        names = [n.strip() for n in options.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in ARCHITECTURES]
        if unknown:
            parser.error(f"unknown architecture {', '.join(unknown)}; known: {', '.join(ARCHITECTURES)}")
    output = options.output or (None if options.only else DOC)
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    records: dict[str, dict] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
        futures = {pool.submit(run_in_subprocess, name, options.timeout, options.memory_gb): name for name in names}
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            records[record["name"]] = record
            print(f"[{len(records)}/{len(names)}] {ARCHITECTURES[record['name']].label}: "
                  f"fxport {fxport_cell(record)} | stock {stock_cell(record)} | "
                  f"{record.get('wall_seconds', 0):.0f} s", flush=True)
    ordered = [records[name] for name in names]
    elapsed = time.perf_counter() - start

    from benchmarks.common import Section, print_section

    print_section(Section("Real models", "", HEADER, table_rows(ordered), [summary_line(ordered)]))
    print(f"sweep took {elapsed / 60:.1f} min")
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(ordered, handle, indent=1)
    if output:
        with open(output, "w") as handle:
            handle.write(markdown(ordered, elapsed, options.workers, (load_start, os.getloadavg()[0])))
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
