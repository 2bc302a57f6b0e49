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
    "wenet_ctc_greedy": "per-element lengths of a list of lists grown in a data-dependent loop (len(r) for r in results; the .tolist() lists, the rows' loop and the flat torch.tensor of them convert): iterating over the elements of list 'results', grown in a data-dependent loop with lists of different lengths as elements, is not supported: only their concatenation is kept",
    "wenet_ctc_prefix_beam_search": "container written under a tensor condition: if on a tensor condition writes into the defaultdict 'next_hyps'",
}



@pytest.mark.parametrize("case", cases_with_xfails(CASES, XFAIL))
def test_decoding_loop(case):
    check(case, expect_ops=EXPECT_OPS.get(case.name, ("Loop",)))
