"""fxport on the "fresh4" loops (tests/wild_loops/fresh4_models.py): 12 loops ported from public code
that are in no other group (awni/speech's CTC prefix beam search, bentrevett's attention
``translate_sentence``, Real-Time-Voice-Cloning's Tacotron ``generate``, NCRF++'s CRF Viterbi, YOLOX's
SimOTA ``dynamic_k_matching``, vector-quantize-pytorch's ``kmeans``, pytorch-trpo's ``linesearch``, a
torch PageRank power iteration, GPT-2's BPE ``encode``/``bpe``, ConvAI's top-p ``sample_sequence``,
budzianowski's priority-queue ``beam_decode`` and efficientdet-pytorch's ``batched_soft_nms``), chosen
and ported before fxport was run on any of them, measured out of sample.

One test per case: it converts, equals eager on every held-out set, and holds an ONNX ``Loop`` (the
one loop with a constant trip count, kmeans', is unrolled: ``EXPECT_OPS``).
Cases fxport refuses today are strict xfails whose reason is the class of failure and the first
line of fxport's message (file locations and hints left out), so a fix turns them red (XPASS).
Measured table: ``python3 -m tests.wild_loops.measure --group fresh4``.
"""

from __future__ import annotations

import pytest

from tests.wild_loops.fresh4_models import CASES
from tests.wild_loops.harness import cases_with_xfails, check

# the corpus converts every loop end to end (seconds each): measured in CI with the slow set
pytestmark = pytest.mark.slow

XFAIL: dict[str, str] = {
    'awni_ctc_prefix_beam_search': "a pure-Python beam over 0-d tensors (prefix tuples in a defaultdict, logsumexp's `all(a == NEG_INF for a in args)`, `max(args)`, math.log/math.exp of tensor scores, `sorted(next_beam.items(), key=...)`): data-dependent control flow (a Python branch or loop on a tensor value, or a number read from a tensor with .item(), float(), int()) cannot be captured",
    'bentrevett_attention_translate': "loop whose state grows: a token list grown from .item() and fed back (inputs.append(output.argmax(-1).item()), torch.LongTensor([inputs[-1]]), `if predicted_token == eos: break`, attentions[i] = attention): for: loop whose state grows: its body could not be captured on its own (GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 1)",
    'rtvc_tacotron_generate': "range() whose step is read from a tensor (range(0, steps, self.r), the property self.decoder.r.item(); the refusal names no file:line): range() with a data-dependent step is not supported",
    'ncrfpp_crf_viterbi_decode': "iteration over a tensor's dynamic dimension (seq_iter = enumerate(scores) over seq_len, its first step taken with next(seq_iter), then `for idx, cur_values in seq_iter`): the model specialises dynamic dimension 'seq_len' to 4",
    'yolox_simota_dynamic_k': "a tensor if whose branch indexes by a boolean mask (if anchor_matching_gt.max() > 1: cost[:, anchor_matching_gt > 1], a size read from the data), after the SimOTA loop (its del of pos_idx converts now): a branch of this if uses a size read from a tensor (a slice by a loop counter or a carried length, g[:, :i + 1]; .item(), int()), which torch.cond cannot trace",
    'trpo_linesearch': "a return on a tensor condition in a for over enumerate of a numpy array (for (_n_backtracks, stepfrac) in enumerate(.5**np.arange(max_backtracks)): ... if ratio[0] > accept_ratio and actual_improve[0] > 0: return True, xnew): for: break on a tensor condition in a loop over a enumerate",
    'playground_pagerank_torch': "Python's builtin max over a tensor's rows (max_update = max(abs(new_pagerank - pagerank)) on an (n, 1) tensor; plain torch.export fails the same way): torch.export failed: TypeError: maximum() missing 1 required positional arguments: \"other\"",
    'gpt2_bpe_encode': "strings decoded from a tensor's bytes with .tolist() (bytes(text.tolist()).decode('utf-8'), then a pure-Python BPE over str tuples, sets and dicts): data-dependent control flow (a Python branch or loop on a tensor value, or a number read from a tensor with .item(), float(), int()) cannot be captured",
    'convai_sample_sequence': "a Python list grown in a data-dependent loop and rebuilt into the model's input every trip (build_input_from_segments(..., current_output, ...), current_output.append(prev.item()), a redraw `while prev.item() in special_tokens_ids`): current_output + [...]: list 'current_output' is grown in a data-dependent loop and used inside it",
    'budzianowski_beam_decode': "a priority queue of Python node objects (queue.PriorityQueue of (score, BeamSearchNode), endnodes.append((score, n)) under `n.wordid.item() == EOS_token`, a back trace through n.prevNode): list 'endnodes' appended to under a tensor condition gets a tuple, not a tensor or number",
}

# expected ONNX control-flow ops when converted (a static-trip loop is unrolled: no op expected):
# kmeans' `for _ in range(num_iters)` runs num_iters = 10 trips on every input, with no break
EXPECT_OPS: dict[str, tuple[str, ...]] = {"vector_quantize_kmeans": ()}


@pytest.mark.parametrize("case", cases_with_xfails(CASES, XFAIL))
def test_fresh4_loop(case):
    check(case, expect_ops=EXPECT_OPS.get(case.name, ("Loop",)))
