"""fxport on the "fresh3" loops (tests/wild_loops/fresh3_models.py): 12 loops ported from public code
that nobody on the engine team had seen (torchaudio's RNN-T beam search and edit distance, a YOLOv3
evaluation matcher, the Deep Implicit Layers tutorial's Anderson solver, two hand-written KV-cache
loops around tiny transformers models, whisper's word-timestamp DTW, fast_pytorch_kmeans, Tacotron 1's
greedy decoder, deepspeech.pytorch's greedy decoder, ESPnet2's Transformer-TTS inference and
mmdetection's MaxIoUAssigner), measured out of sample.

One test per case: it converts, equals eager on every held-out set, and holds an ONNX ``Loop``.
Cases fxport refuses today are strict xfails whose reason is the class of failure and the first
line of fxport's message (file locations and hints left out), so a fix turns them red (XPASS).
Measured table: ``python3 -m tests.wild_loops.measure --group fresh3``.
"""

from __future__ import annotations

import pytest

from tests.wild_loops.fresh3_models import CASES
from tests.wild_loops.harness import cases_with_xfails, check

# the corpus converts every loop end to end (seconds each): measured in CI with the slow set
pytestmark = pytest.mark.slow

XFAIL: dict[str, str] = {
    'torchaudio_rnnt_beam_search': "a Python list indexed by a run-time value (b_hypos = [b_hypos[idx] for idx in sorted_idx] on a list of hypothesis tuples in `while a_hypos`): a Python list indexed by a value computed at run time (a loop counter or a number read from a tensor) in a data-dependent loop or branch: the exported file cannot pick one of its items",
    'deq_tutorial_anderson': "linalg.solve of a matrix whose size the loop's counter decides (H[:,:n+1,:n+1], n = min(k, m); the lambda's closure over x, which met a size symbol of the outer capture in the separately captured body, converts since round thirteen; fxport's linalg rules unroll over a static size): the ONNX exporter failed on the body of the loop at tests/wild_loops/fresh3_models.py:655: RuleError: linalg.solve: the matrix size must be static",
    'deepspeech_greedy_decoder': "strings built from numbers read with .item() in a loop (process_string: self.int_to_char[sequence[i].item()], string += char; the decoder's method now converts): data-dependent control flow (a Python branch or loop on a tensor value, or a number read from a tensor with .item(), float(), int()) cannot be captured",
}


@pytest.mark.parametrize("case", cases_with_xfails(CASES, XFAIL))
def test_fresh3_loop(case):
    check(case)
