"""Numerics switches that change how, not what, the model computes.

`use_fp32_lm_head`: the LM head (the projection to vocabulary logits) runs in fp32 whatever the
model's dtype, for sampling and for training alike, so the sampler's and the trainer's
probabilities agree more closely. ScaleRL (Khatri et al. 2025, arXiv 2510.13786) reports that this
fix raised the asymptote A from 0.52 to 0.61; MiniMax-M1 (arXiv 2506.13585) made the same fix.
It matters for bf16/fp16 models (`model.dtype = bf16`: forward passes under torch.autocast, which
would otherwise run the head in bf16 too); for the fp32 models of the CPU default it is an exact
no-op (same matmul in the same dtype).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def use_fp32_lm_head(model: torch.nn.Module) -> torch.nn.Module:
    """Patch the output projection in place to compute in fp32 (the weights keep their dtype and
    their state_dict keys; tied embeddings stay tied)."""
    head = model.get_output_embeddings()

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        bias = None if head.bias is None else head.bias.float()
        with torch.autocast(hidden.device.type, enabled=False):  # autocast would recast to bf16
            return F.linear(hidden.float(), head.weight.float(), bias)

    head.forward = forward
    return model
