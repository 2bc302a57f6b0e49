"""Loop-fuzz find (seed 0, programs 5, 37, 47, 52, 65, 110, 112, 120, 125 and 12 more: every decode program
with a static buffer written at `kb[length + step]` and the token sequence grown by `torch.cat`), cut down
by hand. Verification refuses the file: "ONNX Runtime differs from eager PyTorch on 7 of 8 input sets
(first: example, output[1], max abs error 6; ...)". In the body of a loop whose state grows (an ONNX Loop
around the separately exported body), `length` (tokens.shape[1], a constant) reads as the *current*
length of `seq`, which started as `tokens.clone()` with the same size: eager gives pos = 3 + 3 = 6 after
two steps from a 3-token prompt, the file 3 + 4 = 7. In the fuzz programs the buffer row written at
`length + step` moves one further each step. A wrong conversion that verification caught. Fixed: the body reads a size from a free
tensor first, and never from an axis of the state that grows (controlflow/operators/growing.py,
``_free_inputs``).
"""
# status: fixed

import torch
from torch import nn

FAMILY = "decode"


class Fuzzed(nn.Module):
    def forward(self, tokens, n):
        length = tokens.shape[1]
        seq = tokens.clone()
        pos = torch.zeros((), dtype=torch.int64)
        for step in range(int(n.clamp(0, 6))):
            pos = pos + length
            seq = torch.cat([seq, seq[:, -1:]], 1)
        return seq, pos
