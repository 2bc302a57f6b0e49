"""torchvision's RAFT with a dynamic batch: the two frames' features split by slicing.

``RAFT.forward`` encodes both frames in one batch (``torch.cat([image1, image2])``) and splits
the features with ``torch.chunk(fmaps, 2)``. The number of chunks of a symbolic size 2·B is a
floor expression torch.export cannot prove equal to 2 (``(3·B - 1) // B == 2``), so a dynamic
batch was refused as specialised ("Constraints violated (batch)"). The patch is torchvision's
forward with the split written as ``fmaps[:B], fmaps[B:]`` — the same two halves whenever the
frames have the same batch, which torchvision requires (its correlation block raises
otherwise) — and that requirement stated with ``torch._check``. Everything else (validation,
the update loop with its correlation-pyramid lookups) is torchvision's code, unchanged.

The rule exists once torchvision is imported (fxport collects its built-ins again when it
appears). docs/vision-models.md shows raft_small converted.
"""

from __future__ import annotations

import sys

import torch

import fxport

if "torchvision" in sys.modules:

    @fxport.patch("torchvision.models.optical_flow.raft.RAFT.forward", name="raft-split-frames",
                  priority=fxport.BUILTIN_PRIORITY)
    def raft_forward(self, image1, image2, num_flow_updates: int = 12):
        """RAFT.forward with the two frames' features split by slicing, not torch.chunk."""
        from torch.nn import functional as F
        from torchvision.models.optical_flow._utils import make_coords_grid, upsample_flow

        batch_size, _, h, w = image1.shape
        if (h, w) != image2.shape[-2:]:
            raise ValueError(f"input images should have the same shape, instead got ({h}, {w}) != {image2.shape[-2:]}")
        if not ((h % 8 == 0) and (w % 8 == 0)):
            raise ValueError(f"input image H and W should be divisible by 8, instead got {h} (h) and {w} (w)")
        torch._check(image2.shape[0] == batch_size,
                     lambda: "the two frames must have the same batch size")

        fmaps = self.feature_encoder(torch.cat([image1, image2], dim=0))
        fmap1, fmap2 = fmaps[:batch_size], fmaps[batch_size:]
        if fmap1.shape[-2:] != (h // 8, w // 8):
            raise ValueError("The feature encoder should downsample H and W by 8")

        self.corr_block.build_pyramid(fmap1, fmap2)

        context_out = self.context_encoder(image1)
        if context_out.shape[-2:] != (h // 8, w // 8):
            raise ValueError("The context encoder should downsample H and W by 8")

        hidden_state_size = self.update_block.hidden_state_size
        out_channels_context = context_out.shape[1] - hidden_state_size
        if out_channels_context <= 0:
            raise ValueError(
                f"The context encoder outputs {context_out.shape[1]} channels, but it should have at "
                f"strictly more than hidden_state={hidden_state_size} channels")
        hidden_state, context = torch.split(context_out, [hidden_state_size, out_channels_context], dim=1)
        hidden_state = torch.tanh(hidden_state)
        context = F.relu(context)

        coords0 = make_coords_grid(batch_size, h // 8, w // 8).to(fmap1.device)
        coords1 = make_coords_grid(batch_size, h // 8, w // 8).to(fmap1.device)

        flow_predictions = []
        for _ in range(num_flow_updates):
            coords1 = coords1.detach()
            corr_features = self.corr_block.index_pyramid(centroids_coords=coords1)

            flow = coords1 - coords0
            hidden_state, delta_flow = self.update_block(hidden_state, context, corr_features, flow)

            coords1 = coords1 + delta_flow

            up_mask = None if self.mask_predictor is None else self.mask_predictor(hidden_state)
            upsampled_flow = upsample_flow(flow=(coords1 - coords0), up_mask=up_mask)
            flow_predictions.append(upsampled_flow)

        return flow_predictions
