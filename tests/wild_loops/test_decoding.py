"""fxport on decoding loops ported from public code (tests/wild_loops/decoding_models.py).

One test per ported loop: it converts, ONNX Runtime equals eager on every held-out set (each exit
taken), and the file holds the expected control-flow op. Cases fxport refuses today are strict
xfails whose reason names the class of failure and the first line of fxport's message, so the test
turns red (XPASS) once the class is fixed. Measured table: ``python3 -m tests.wild_loops.measure --group decoding``.
"""

from __future__ import annotations

import pytest

from tests.wild_loops.decoding_models import CASES
from tests.wild_loops.harness import cases_with_xfails, check

pytestmark = pytest.mark.slow

# expected ONNX control-flow ops when converted (a static-trip loop is unrolled: no op expected)
EXPECT_OPS = {
    "hf_dynamic_cache_docs_loop": (),
    "mingpt_generate": (),
}

XFAIL = {
    'crf_viterbi': "a list of lists of different lengths grown in a data-dependent loop: list 'best_tags_list' grown in a data-dependent loop gets a list grown in a data-dependent loop as an element (a list of lists, whose lengths may differ)",
    'nemo_rnnt_greedy': "an LSTM called in a torch.cond branch of a loop whose state grows (label == [] / label[-1] read in the loop now convert: the loops carry label's stack): while: loop whose state grows: its body could not be captured on its own (UncapturedHigherOrderOpError: This higher order operator doesn't work unless it is captured completely with torch.compile. Got graph break/error:)",
    "mingpt_generate": "set outside the range the model bounds itself to: ONNX Runtime differs from eager PyTorch on 1 of 11 input sets (first: size[prompt_len=6] outside exported 2..5, ONNX Runtime failed, max abs error nan); 'prompt_len' is bounded by ",
    "hmm_viterbi": "a dynamic dimension the model specialises (z_star_i.insert(0, z_t) converts since round nine; torch then fixes the batch, reported at log_delta[:, 0, :] = ...): the model specialises dynamic dimension 'batch' to 2",
    "forced_align_backtrack": "ONNX Runtime fails at one token (num_tokens=1: the backtrack's `while j > 0` runs no trip; the Point records, path[::-1] and the comprehensions by field now convert): ONNX Runtime failed on the user-1 inputs",
    "wenet_ctc_greedy": 'a Python list from .tolist() indexed by a loop counter: a Python list indexed by a value computed at run time (a loop counter or a number read from a tensor) in a data-dependent loop or branch: the exported file cannot pick one of its items',
    "wenet_ctc_prefix_beam_search": "container written under a tensor condition: if on a tensor condition writes into the defaultdict 'next_hyps'",
}



@pytest.mark.parametrize("case", cases_with_xfails(CASES, XFAIL))
def test_decoding_loop(case):
    check(case, expect_ops=EXPECT_OPS.get(case.name, ("Loop",)))
