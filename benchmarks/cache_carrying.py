"""Ways to carry the key/value cache through fxport's generation ``Loop``, measured (issue 49,
item 2): ONNX Runtime tokens/s of one Llama-shaped decoder's greedy decoding, each way built from
fxport's own file, beside the Python loop over fxport's one-step file and onnxruntime-genai.

fxport's ``--task text-generation`` file is a prefill and an ONNX ``Loop`` whose carried
per-layer keys and values grow by ``Concat`` each step. The variants rewrite that file's
``Loop`` body (onnx_ir, :func:`variant_model`) and change only how the cache is carried:

- ``concat``: fxport's file as ``fxport convert CKPT --task text-generation --no-verify`` writes it;
- ``scatternd`` / ``tensorscatter``: a buffer of the longest length (prompt + new tokens), padded
  once before the ``Loop``, written at the step's position (``ScatterND``; ``TensorScatter``,
  opset 24); the attention reads the whole buffer, its mask padded with the mask's minimum past
  the filled length;
- ``gqa``: ONNX Runtime's ``com.microsoft.GroupQueryAttention`` in place of the body's attention
  (the query and new key/value as the model computed them, rotary included; the model's mask as
  ``attention_bias``), its ``present`` carried — no repeated key/value heads: fxport's own
  rewrite, fxport/lower/loop_attention.py, which ``--optimize ort`` applies;
- ``gqa_buffer``: the same on a buffer of the longest length (``past`` and ``present`` of that
  length, ``seqlens_k`` the filled length);
- ``optimize_ort``: ``fxport convert CKPT --task text-generation --optimize ort --no-verify``: the
  ``gqa`` rewrite in the ``Loop``, and onnxscript's fusions (``MultiHeadAttention`` in the prefill);
- ``step_loop``: a Python loop over ``fxport convert CKPT --task text-generation-step`` with IO
  binding (the present cache bound as the next step's past without a copy to numpy);
- ``genai_fp32``: onnxruntime-genai's builder ``-p fp32 -e cpu`` and its C++ loop.

``MultiHeadAttention`` with past/present needs as many key/value heads as query heads: it would
keep the repeated heads, so it is not a variant here.

Every variant runs in this one process, one thread, interleaved: each repetition times every
variant once, so load on the machine affects them alike; tokens/s = batch × new ÷ the median.
Each variant's ids are compared with eager greedy ``generate()``.

    python3 -m benchmarks.cache_carrying                      # 4 layers, width 768; prints
    python3 -m benchmarks.cache_carrying --doc                # and writes docs/generation.md
    python3 -m benchmarks.cache_carrying --layers 2 --width 256 --rows 1x32x64
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

TITLE = "Carrying the cache through the generation Loop: Concat, a written buffer, GroupQueryAttention"
CONFIG = dict(layers=4, width=768, heads=12, kv_heads=4, vocab=8192)
#: (batch, prompt, new tokens)
ROWS = [(batch, prompt, new) for new in (64, 256) for prompt in (32, 512) for batch in (1, 4)]
LOOP_VARIANTS = ("concat", "scatternd", "tensorscatter", "gqa", "gqa_buffer")
VARIANTS = LOOP_VARIANTS + ("optimize_ort", "step_loop", "genai_fp32")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "generation.md")
BEGIN = "<!-- cache carrying: written by python3 -m benchmarks.cache_carrying -->"
END = "<!-- end of cache carrying -->"
BEFORE = "<!-- generation convert time: written by python3 -m benchmarks.generation_convert_time -->"
MASKED = float(np.finfo(np.float32).min)  # what the model's mask adds where it hides a key


@dataclass(frozen=True)
class Heads:
    """The attention's shape: query heads, key/value heads, head size."""

    heads: int
    kv_heads: int
    head_size: int

    @classmethod
    def of(cls, config: dict) -> "Heads":
        return cls(config["heads"], config["kv_heads"], config["width"] // config["heads"])


# --- building the variants: rewrites of fxport's Loop body ---------------------------------------


class Builder:
    """Appends nodes to ``graph`` (before ``anchor`` when given; else at the end, sorted later)."""

    def __init__(self, graph, anchor=None):
        self.graph, self.anchor = graph, anchor

    def __call__(self, op: str, *inputs, domain: str = "", outputs: int = 1, **attributes):
        import onnx_ir as ir

        node = ir.node(op, list(inputs), attributes=attributes, domain=domain, num_outputs=outputs)
        if self.anchor is not None:
            self.graph.insert_before(self.anchor, node)
        else:
            self.graph.append(node)
        return node.outputs[0] if outputs == 1 else node.outputs

    def const(self, values, dtype=np.int64):
        import onnx_ir as ir

        return self("Constant", value=ir.tensor(np.asarray(values, dtype=dtype)))


def generation_loop(model):
    """The main graph's ``Loop`` node (fxport writes one for greedy search) and its body."""
    loops = [node for node in model.graph if node.op_type == "Loop"]
    if len(loops) != 1:
        raise ValueError(f"expected one Loop in the main graph, found {len(loops)}")
    return loops[0], loops[0].attributes["body"].value


def cache_concats(body) -> list:
    """(carried position, Concat) for each cache the body grows: ``Concat(carried, new, axis=-2)``
    whose result is carried to the next step (keys of every layer, then values)."""
    carried = {value: position for position, value in enumerate(body.inputs[2:])}
    found = []
    for node in body:
        if node.op_type != "Concat" or node.attributes["axis"].as_int() not in (-2, 2):
            continue
        position = carried.get(node.inputs[0])
        if position is not None and body.outputs[1 + position] is node.outputs[0]:
            found.append((position, node))
    return found


def producer_chain(value, ops: tuple[str, ...]):
    """Walk producers of ``value`` through ``ops`` (nearest first); the value before them or None."""
    for op in ops:
        node = value.producer()
        if node is None or node.op_type != op:
            return None
        value = node.inputs[0]
    return value


def repeated_heads(concat):
    """The value the attention reads for ``concat``'s cache: the heads repeated to the query's
    (``Unsqueeze → Expand → Reshape``, transformers' ``repeat_kv``), or the cache itself."""
    for use, _ in concat.outputs[0].uses():
        if use.op_type == "Unsqueeze":
            expands = [node for node, _ in use.outputs[0].uses() if node.op_type == "Expand"]
            if expands:
                reshapes = [node for node, _ in expands[0].outputs[0].uses() if node.op_type == "Reshape"]
                if reshapes:
                    return reshapes[0].outputs[0]
    return concat.outputs[0]


def repeat_heads(build: Builder, cache, heads: Heads):
    """``cache`` (batch, kv heads, length, size) with each head repeated to the query heads."""
    if heads.heads == heads.kv_heads:
        return cache
    grouped = build("Unsqueeze", cache, build.const([2]))
    wide = build("Expand", grouped, build.const([1, 1, heads.heads // heads.kv_heads, 1, 1]))
    return build("Reshape", wide, build.const([0, heads.heads, -1, heads.head_size]))


def attention_sites(body, concats) -> list[dict]:
    """For each layer: its key and value Concat, the query, the additive mask, the attention's
    output (what the body computes as scaled_dot_product_attention) and the scale."""
    by_output = {concat.outputs[0]: concat for _, concat in concats}
    sites = []
    for softmax in [node for node in body if node.op_type == "Softmax"]:
        add = softmax.inputs[0].producer()
        scores = add.inputs[0].producer() if add is not None and add.op_type == "Add" else None
        if scores is None or scores.op_type != "MatMul":
            continue
        scaled_query, transposed_keys = scores.inputs
        keys = producer_chain(transposed_keys, ("Transpose", "Reshape", "Expand", "Unsqueeze")) \
            or producer_chain(transposed_keys, ("Transpose",))
        weighted = [node for node, _ in softmax.outputs[0].uses() if node.op_type == "MatMul"][0]
        values = producer_chain(weighted.inputs[1], ("Reshape", "Expand", "Unsqueeze")) or weighted.inputs[1]
        scale_node = scaled_query.producer()
        if keys not in by_output or values not in by_output or scale_node.op_type != "Mul":
            raise ValueError("an attention whose keys and values are not the carried cache")
        output = weighted.outputs[0]
        factor = [node for node, _ in output.uses() if node.op_type == "Mul"]
        sites.append(dict(keys=by_output[keys], values=by_output[values], query=scale_node.inputs[0],
                          scale=float(np.asarray(scale_node.inputs[1].const_value.numpy()).reshape(-1)[0]),
                          mask=add.inputs[1], output=factor[0].outputs[0] if factor else output))
    return sites


def filled_length(build: Builder, outer: Builder, loop, body, concats):
    """The cache's filled length at this step, shape (1,): the prefill's length (read before the
    ``Loop``) plus the iteration number."""
    first_cache = loop.inputs[2 + concats[0][0]]
    prefill = outer("Shape", first_cache, start=2, end=3)
    return build("Add", prefill, build("Unsqueeze", body.inputs[0], build.const([0])))


def read_filled_length_from(body, concats, length) -> None:
    """Where the body reads a cache's length (``Shape(cache)[2]``), read ``length`` instead: the
    buffer's own length is the longest, not the filled part."""
    caches = {body.inputs[2 + position] for position, _ in concats}
    for node in list(body):
        if node.op_type == "Shape" and node.inputs[0] in caches:
            start = node.attributes.get("start")
            end = node.attributes.get("end")
            if not (start and end and start.as_int() == 2 and end.as_int() == 3):
                raise ValueError("the body reads a cache's shape other than its length")
            node.outputs[0].replace_all_uses_with(length)


def pad_caches_before_loop(outer: Builder, loop, concats, new: int) -> None:
    """Each cache going into the ``Loop`` padded with ``new`` zero positions (its buffer)."""
    pads = outer.const([0, 0, 0, 0, 0, 0, new, 0])
    for position, _ in concats:
        slot = 2 + position
        loop.replace_input_with(slot, outer("Pad", loop.inputs[slot], pads))


def buffer_variant(model, heads: Heads, new: int, write: str):
    """Each cache a buffer of the longest length, written at the step's position by ``write``
    ("scatternd" or "tensorscatter"); the attention reads the whole buffer, its mask padded."""
    import onnx_ir as ir

    loop, body = generation_loop(model)
    concats = cache_concats(body)
    build, outer = Builder(body), Builder(model.graph, loop)
    length = filled_length(build, outer, loop, body, concats)
    read_filled_length_from(body, concats, length)
    sites = attention_sites(body, concats)
    pad_caches_before_loop(outer, loop, concats, new)
    first_new = concats[0][1].inputs[1]
    batch = build("Shape", first_new, start=0, end=1)
    if write == "scatternd":
        grid = build("Concat", build("Shape", first_new, start=0, end=2), build.const([1, 1]), axis=0)
        rows = build("Expand", build("Reshape", build("Range", build.const(0), build("Squeeze", batch), build.const(1)),
                                     build.const([-1, 1, 1, 1])), grid)
        kv = build("Expand", build("Reshape", build("Range", build.const(0), build.const(heads.kv_heads), build.const(1)),
                                   build.const([1, -1, 1, 1])), grid)
        at = build("Expand", build("Reshape", length, build.const([1, 1, 1, 1])), grid)
        indices = build("Concat", rows, kv, at, axis=-1)
    else:
        at = build("Expand", length, batch)
        model.opset_imports[""] = 24
    buffers = {}
    for position, concat in concats:
        cache, update = concat.inputs
        written = (build("ScatterND", cache, indices, update) if write == "scatternd"
                   else build("TensorScatter", cache, update, at, axis=-2))
        repeated_heads(concat).replace_all_uses_with(repeat_heads(build, written, heads))
        body.outputs[1 + position] = written
        buffers[concat] = written
    longest = build("Shape", buffers[concats[0][1]], start=2, end=3)
    pads = build("Concat", build.const([0] * 7), build("Sub", longest, build("Add", length, build.const([1]))), axis=0)
    for site in sites:
        padded = build("Pad", site["mask"], pads, build.const(MASKED, np.float32))
        add = [node for node, _ in site["mask"].uses() if node.op_type == "Add"][0]
        add.replace_input_with(1, padded)
    return _finish(model, ir)


def gqa_variant(model, heads: Heads, new: int = 0, buffer: bool = False):
    """The body's attention as ``GroupQueryAttention`` (past/present), its ``present`` carried:
    fxport's own rewrite under ``--optimize ort`` (fxport/lower/loop_attention.py); with
    ``buffer``, on a buffer of the longest length (``new`` positions past the prompt)."""
    import onnx_ir as ir

    from fxport.lower.loop_attention import loop_attention_for_onnxruntime

    if not buffer:
        if not loop_attention_for_onnxruntime(model):
            raise ValueError("fxport's Loop-attention rewrite found no attention over a carried cache")
        return _finish(model, ir)
    loop, body = generation_loop(model)
    concats = cache_concats(body)
    build, outer = Builder(body), Builder(model.graph, loop)
    sites = attention_sites(body, concats)
    length = filled_length(build, outer, loop, body, concats)
    read_filled_length_from(body, concats, length)
    pad_caches_before_loop(outer, loop, concats, new)
    batch = build("Shape", concats[0][1].inputs[1], start=0, end=1)
    seen = build("Cast", build("Expand", length, batch), to=ir.DataType.INT32)  # seqlens_k: total - 1
    total = build("Cast", build("Squeeze", build("Add", length, build.const([1]))), to=ir.DataType.INT32)
    position_of = {concat: position for position, concat in concats}
    for site in sites:
        keys, values = site["keys"], site["values"]
        query, key, value = (build("Reshape", build("Transpose", x, perm=[0, 2, 1, 3]), build.const([0, 0, -1]))
                             for x in (site["query"], keys.inputs[1], values.inputs[1]))
        output, present_keys, present_values = build(
            "GroupQueryAttention", query, key, value, keys.inputs[0], values.inputs[0], seen, total, None, None, None,
            site["mask"], domain="com.microsoft", outputs=3, num_heads=heads.heads, kv_num_heads=heads.kv_heads,
            scale=site["scale"])
        by_head = build("Reshape", output, build.const([0, 0, heads.heads, heads.head_size]))
        site["output"].replace_all_uses_with(build("Transpose", by_head, perm=[0, 2, 1, 3]))
        body.outputs[1 + position_of[keys]] = present_keys
        body.outputs[1 + position_of[values]] = present_values
    model.opset_imports["com.microsoft"] = 1
    return _finish(model, ir)


def _finish(model, ir):
    """Drop what the rewrite left unused and put every graph in order."""
    from onnx_ir.passes.common import NameFixPass, RemoveUnusedNodesPass, TopologicalSortPass

    RemoveUnusedNodesPass()(model)
    TopologicalSortPass()(model)
    NameFixPass()(model)  # the new values get names (an unnamed output would read as one value)
    return model


def variant_model(path: str, variant: str, heads: Heads, new: int):
    """The ONNX model (a ``ModelProto``) of ``variant`` built from fxport's file at ``path``."""
    import onnx_ir as ir

    model = ir.load(path)
    if variant == "scatternd" or variant == "tensorscatter":
        model = buffer_variant(model, heads, new, variant)
    elif variant == "gqa":
        model = gqa_variant(model, heads)
    elif variant == "gqa_buffer":
        model = gqa_variant(model, heads, new, buffer=True)
    elif variant != "concat":
        raise ValueError(f"not a Loop variant: {variant}")
    return ir.serde.serialize_model(model)


# --- running them ----------------------------------------------------------------------------------


def session_options():
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
    return options


def loop_runner(model_proto):
    """``(ids, mask) → generated ids`` of a one-file generator."""
    import onnxruntime as ort

    session = ort.InferenceSession(model_proto.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    return lambda ids, mask: session.run(None, {"input_ids": ids, "attention_mask": mask})[0][:, ids.shape[1]:]


def step_loop_runner(path: str, heads: Heads, layers: int, new: int):
    """A Python greedy loop over the one-step file, the present cache bound as the next past."""
    import onnxruntime as ort

    session = ort.InferenceSession(path, session_options(), providers=["CPUExecutionProvider"])
    names = [f"{i}.{kind}" for i in range(layers) for kind in ("key", "value")]

    def run(ids, mask):
        batch = ids.shape[0]
        empty = ort.OrtValue.ortvalue_from_numpy(np.zeros((batch, heads.kv_heads, 0, heads.head_size), np.float32))
        past = {name: empty for name in names}
        tokens, positions = ids, (mask.cumsum(-1) - 1).clip(0).astype(np.int64)
        chosen = []
        for _ in range(new):
            binding = session.io_binding()
            binding.bind_cpu_input("input_ids", np.ascontiguousarray(tokens))
            binding.bind_cpu_input("attention_mask", np.ascontiguousarray(mask))
            binding.bind_cpu_input("position_ids", np.ascontiguousarray(positions))
            for name in names:
                binding.bind_ortvalue_input(f"past_key_values.{name}", past[name])
            binding.bind_output("logits")
            for name in names:
                binding.bind_output(f"present.{name}")
            session.run_with_iobinding(binding)
            outputs = binding.get_outputs()
            tokens = outputs[0].numpy()[:, -1].argmax(-1)[:, None].astype(np.int64)
            past = dict(zip(names, outputs[1:]))
            chosen.append(tokens)
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], 1)
            positions = positions[:, -1:] + 1
        return np.concatenate(chosen, 1)

    return run


def genai_runner(folder: str, new: int):
    import onnxruntime_genai as og

    model = og.Model(folder)

    def run(ids, mask):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=ids.shape[1] + new, batch_size=ids.shape[0], do_sample=False)
        made = og.Generator(model, params)
        made.append_tokens(ids)
        while not made.is_done():
            made.generate_next_token()
        return np.stack([made.get_sequence(row) for row in range(ids.shape[0])])[:, ids.shape[1]:]

    return run


def eager_ids(lm, ids, mask, new: int):
    import torch

    with torch.no_grad():
        out = lm.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), max_new_tokens=new,
                          do_sample=False, eos_token_id=None, pad_token_id=0)
    return out[:, ids.shape[1]:].numpy()


def prompt(config: dict, batch: int, length: int):
    draw = np.random.default_rng(batch * 1000 + length)
    ids = draw.integers(3, config["vocab"], (batch, length)).astype(np.int64)
    return ids, np.ones_like(ids)


def convert(checkpoint: str, task: str, output: str, new: int | None = None, *flags: str) -> float:
    """``fxport convert`` of ``checkpoint`` (wall seconds); the end token is outside the vocabulary."""
    with open(os.path.join(checkpoint, "config.json")) as handle:
        vocabulary = json.load(handle)["vocab_size"]
    command = [sys.executable, "-m", "fxport", "convert", checkpoint, "--task", task, "--no-verify", "-o", output]
    if task == "text-generation":
        command += ["--max-new-tokens", str(new), "--eos-token-id", str(vocabulary), *flags]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[2:6])} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def build_all(folder: str, config: dict, rows, variants, log=print) -> dict:
    """The checkpoint, fxport's files (one per number of new tokens; the step file), genai's."""
    from benchmarks.generation_speed import build as genai_build, genai_available, write_checkpoint

    checkpoint = write_checkpoint(os.path.join(folder, "checkpoint"), config)
    files = {"checkpoint": checkpoint}
    if any(variant in LOOP_VARIANTS for variant in variants):
        for new in sorted({new for _, _, new in rows}):
            files[new] = os.path.join(folder, f"generation-{new}.onnx")
            log(f"fxport text-generation, {new} new: {convert(checkpoint, 'text-generation', files[new], new):.1f} s")
    if "optimize_ort" in variants:
        for new in sorted({new for _, _, new in rows}):
            files["ort", new] = os.path.join(folder, f"generation-ort-{new}.onnx")
            seconds = convert(checkpoint, "text-generation", files["ort", new], new, "--optimize", "ort")
            log(f"fxport text-generation --optimize ort, {new} new: {seconds:.1f} s")
    if "step_loop" in variants:
        files["step"] = os.path.join(folder, "step.onnx")
        log(f"fxport text-generation-step: {convert(checkpoint, 'text-generation-step', files['step']):.1f} s")
    if "genai_fp32" in variants:
        missing = genai_available()
        if missing:
            log(f"genai left out: {missing}")
        else:
            files["genai_fp32"] = genai_build("genai_fp32", checkpoint, folder)["path"]
    return files


def runners(files: dict, config: dict, new: int, variants) -> dict:
    heads = Heads.of(config)
    made = {}
    for variant in variants:
        if variant in LOOP_VARIANTS:
            made[variant] = loop_runner(variant_model(files[new], variant, heads, new))
        elif variant == "optimize_ort":
            import onnx

            made[variant] = loop_runner(onnx.load(files["ort", new]))
        elif variant == "step_loop":
            made[variant] = step_loop_runner(files["step"], heads, config["layers"], new)
        elif variant == "genai_fp32" and "genai_fp32" in files:
            made[variant] = genai_runner(files["genai_fp32"], new)
    return made


def measure_row(files, config, lm, batch, length, new, variants, repeats, log=print) -> dict:
    """tokens/s (median of ``repeats`` interleaved runs after a warm-up) and same-ids per variant."""
    ids, mask = prompt(config, batch, length)
    expected = eager_ids(lm, ids, mask, new)
    run = runners(files, config, new, variants)
    results = {}
    for variant, go in run.items():  # warm-up, and the ids
        try:
            produced = np.asarray(go(ids, mask))
            results[variant] = {"same": produced.shape == expected.shape and bool((produced == expected).all()),
                                "seconds": []}
        except Exception as exc:  # a variant ONNX Runtime refuses: say why, measure the rest
            results[variant] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            log(f"{variant} failed: {results[variant]['error']}")
    for _ in range(repeats):
        for variant, go in run.items():
            if "error" in results[variant]:
                continue
            start = time.perf_counter()
            go(ids, mask)
            results[variant]["seconds"].append(time.perf_counter() - start)
    for result in results.values():
        if "seconds" in result:
            result["tokens_per_s"] = batch * new / float(np.median(result["seconds"]))
    return results


def machine_load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} on {os.cpu_count()} cores"


def run(config: dict, rows, variants=VARIANTS, repeats: int = 3, log=print):
    """Build everything, then measure each row: the table's section."""
    import torch
    import transformers

    torch.set_num_threads(1)
    load_before = machine_load()
    folder = tempfile.mkdtemp(prefix="fxport-cache-")
    try:
        files = build_all(folder, config, rows, variants, log)
        lm = transformers.LlamaForCausalLM.from_pretrained(files["checkpoint"]).eval()
        table = []
        for batch, length, new in rows:
            results = measure_row(files, config, lm, batch, length, new, variants, repeats, log)
            log(f"batch {batch}, prompt {length}, new {new}: " + ", ".join(
                f"{v} {r['tokens_per_s']:.1f}" if "tokens_per_s" in r else f"{v} failed" for v, r in results.items()))
            table.append((batch, length, new, results))
        load_after = machine_load()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return section(config, table, variants, repeats, load_before, load_after)


def section(config, table, variants, repeats, load_before, load_after):
    from benchmarks.common import Section, machine_info

    shown = [v for v in variants if any(v in results for *_, results in table)]

    def speed(results, variant):
        result = results.get(variant)
        if result is None:
            return "—"
        return f"{result['tokens_per_s']:.1f}" if "tokens_per_s" in result else "fails"

    def ratio(results, variant, of):
        a, b = results.get(variant, {}), results.get(of, {})
        return f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}×" if "tokens_per_s" in a and "tokens_per_s" in b else "—"

    against_genai = [v for v in ("concat", "gqa", "gqa_buffer", "optimize_ort") if v in shown]
    rows = []
    for batch, length, new, results in table:
        rows.append([str(batch), str(length), str(new)] + [speed(results, v) for v in shown]
                    + [ratio(results, v, "concat") for v in shown if v != "concat"]
                    + [ratio(results, v, "genai_fp32") for v in against_genai]
                    + [" / ".join("yes" if results[v].get("same") else ("NO" if "same" in results[v] else "—")
                                  for v in shown if v in results)])
    header = (["batch", "prompt", "new"] + [f"{v} tok/s" for v in shown]
              + [f"{v} ÷ concat" for v in shown if v != "concat"]
              + [f"{v} ÷ genai fp32" for v in against_genai]
              + [f"same ids as eager ({' / '.join(shown)})"])
    shape = (f"{config['layers']} layers, width {config['width']}, {config['heads']} heads / {config['kv_heads']} "
             f"key-value heads, vocabulary {config['vocab']}")
    note = (f"Llama-shaped, random weights ({shape}); greedy, no row stopping early; every variant in one process, "
            f"one thread, interleaved: each of {repeats} repetitions after a warm-up times every variant once; "
            f"tokens/s = batch × new ÷ the median. {machine_info()}; {load_before} before the run, {load_after} after.")
    return Section(TITLE, note, header, rows)


def write_doc(result, command: str) -> None:
    from benchmarks.common import splice_block

    splice_block(DOC, BEGIN, END, f"{result.markdown()}\nCommand: `{command}`.", BEFORE)


def parse_rows(text: str):
    return [tuple(int(part) for part in row.split("x")) for row in text.split(",")]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--layers", type=int, default=CONFIG["layers"])
    parser.add_argument("--width", type=int, default=CONFIG["width"])
    parser.add_argument("--heads", type=int, default=CONFIG["heads"])
    parser.add_argument("--kv-heads", type=int, default=CONFIG["kv_heads"])
    parser.add_argument("--vocab", type=int, default=CONFIG["vocab"])
    parser.add_argument("--rows", help="BATCHxPROMPTxNEW,... (default: batch 1 and 4 × prompt 32 and 512 × new 64 and 256)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--doc", action="store_true", help="write the table into docs/generation.md")
    options = parser.parse_args(argv)
    from benchmarks.common import print_section
    from benchmarks.run import _quiet_transformers

    _quiet_transformers()
    config = dict(layers=options.layers, width=options.width, heads=options.heads, kv_heads=options.kv_heads,
                  vocab=options.vocab)
    rows = parse_rows(options.rows) if options.rows else ROWS
    result = run(config, rows, tuple(options.variants.split(",")), options.repeats)
    print_section(result)
    print(result.markdown())
    if options.doc:
        write_doc(result, "python3 -m benchmarks.cache_carrying " + " ".join(argv if argv is not None else sys.argv[1:]))


if __name__ == "__main__":
    main()
