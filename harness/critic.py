"""The critic of `advantage = gae`: a value model V(s_t) for PPO / VAPO.

A separate network (not a head on the policy's trunk, so the value loss never moves the policy): a
copy of the warm-start transformer body with a scalar head, zero-initialised so V = 0 before value
pretraining. VAPO (Yue et al. 2025, arXiv 2504.05118) initialises its value model from a reward
model and pretrains it on Monte Carlo returns of the fixed initial policy (`value_pretrain_steps`);
with no reward model here, it starts from the warm-start LM.

V(s_t) for response token t is read at the position that predicts token t (the state is the prompt
plus y_<t), the same alignment as the policy's log-probs, so values, rewards and masks are all
(B, T) over response tokens.
"""

from __future__ import annotations

import torch
from torch import nn

from .batch import StepBatch


class ValueModel(nn.Module):
    def __init__(self, lm: nn.Module):
        super().__init__()
        self.body = lm.base_model                      # the transformer without the LM head
        self.head = nn.Linear(lm.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, prompt_ids, prompt_mask, response_ids, response_mask) -> torch.Tensor:
        """(B, T) values of the states before each response token."""
        ids = torch.cat([prompt_ids, response_ids], 1)
        attn = torch.cat([prompt_mask, response_mask], 1)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        h = self.body(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state
        tp = prompt_ids.shape[1]
        return self.head(h[:, tp - 1:-1].float()).squeeze(-1) * response_mask


def value_backward(critic: ValueModel, b: StepBatch, micro_batches: int) -> dict:
    """Accumulate the gradient of the value loss 0.5 * token-mean (V - target)^2 over the loss tokens
    of the minibatch (normaliser over the whole minibatch: micro-batch invariant)."""
    w = b.loss_mask / b.loss_mask.sum().clamp(min=1)
    total = 0.0
    for j in torch.arange(len(b)).chunk(micro_batches):
        mb = b.rows(j)
        v = critic(mb.prompt_ids, mb.prompt_mask, mb.response_ids, mb.response_mask)
        loss = 0.5 * (((v - mb.value_targets) ** 2) * w[j]).sum()
        loss.backward()
        total += loss.item()
    return {"value_loss": total}


def explained_variance(values: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> float | None:
    """1 - Var(target - V) / Var(target) over the masked tokens (1 = perfect, 0 = a constant)."""
    n = mask.sum()
    if n < 2:
        return None
    def var(x):
        mean = (x * mask).sum() / n
        return (((x - mean) * mask) ** 2).sum() / (n - 1)
    vt = var(targets)
    return None if vt == 0 else (1 - var(targets - values) / vt).item()
