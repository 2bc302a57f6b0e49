"""fxport on the "fresh2" loops (tests/wild_loops/fresh2_models.py): 10 loops ported from public code
that nobody on the engine team had seen, measured out of sample *before* this round's fixes of two
refusal classes (``None`` carried into a data-dependent loop or one branch; numbers read from
tensors with ``.item()``/``int()``/``float()``/``.tolist()`` used as Python numbers in such loops).

One test per case: it converts, equals eager on every held-out set, and holds an ONNX ``Loop``.
Cases fxport refuses today are strict xfails whose reason is the class of failure and the first
line of fxport's message (file locations left out), so a fix turns them red (XPASS). Measured
table: ``python3 -m tests.wild_loops.measure --group fresh2``.
"""

from __future__ import annotations

import pytest

from tests.wild_loops.fresh2_models import CASES
from tests.wild_loops.harness import cases_with_xfails, check

# the corpus converts every loop end to end (seconds each): measured in CI with the slow set
pytestmark = pytest.mark.slow

XFAIL: dict[str, str] = {
    'pytorch_yolov3_2018_nms_output_none': "a list of None entries written inside a data-dependent loop (output[image_i] = ... if output[image_i] is None else torch.cat(...) in `for c in unique_labels`; the model returns None for an image without detections): for: loop variable 'output' (list) is carried by a loop whose state grows",
    'show_attend_tell_beam_search': 'tensor elements compared in a list comprehension inside a data-dependent loop (incomplete_inds; k -= len(...)): a number known only at run time (a loop counter, a number computed from one, or read from a tensor earlier) is tested as a Python bool',
    'deq_broyden_item_break': "a dict written under a tensor condition (lowest_dict[mode] = ..., mode from a Python loop over keys): if on a tensor condition writes into the dict 'lowest_dict'",
    'speechbrain_ctc_greedy_decode_int_narrow': "itertools.groupby and filter over a .tolist() list whose length the data decides (the list is now held as the tensor; isinstance(.., list) holds): a list made by .tolist() of a tensor whose length is a dynamic dimension or read from the data (held as that tensor) is iterated outside a for statement",
    'gdl_adj_to_shortest_path_item': 'numbers read with .item() as dict keys in a comprehension over torch.nonzero (a data-dependent count): data-dependent control flow (a Python branch or loop on a tensor value, or a number read from a tensor with .item(), float(), int()) cannot be captured',
    'pytorch_ssd_predict_hard_nms_item': 'number read from a tensor used as a number in a branch ([class_index] * box_probs.size(0) after `if probs.size(0) == 0: continue`; box_scores[picked, :] of the .item() list and 0 < top_k == len(picked) convert; the empty return changes the rank): a Python number read from a tensor (.item(), float(), int()) is used as a number inside a converted branch or loop body, which torch.cond/while_loop cannot trace',
}


@pytest.mark.parametrize("case", cases_with_xfails(CASES, XFAIL))
def test_fresh2_loop(case):
    check(case)
