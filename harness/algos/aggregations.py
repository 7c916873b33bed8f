"""aggregation: (mask, *, group_size, max_new_tokens) -> token weights (B, T); the loss of a
(mini)batch is sum(weights * token_loss).

Aggregations return *weights*, not a scalar: every normaliser is computed once over the whole
minibatch, so splitting it into micro-batches cannot change the gradient. Properties:
weights_by_length (a response's total weight grows with its length), length_weight_intended (it
weights a response-constant term by the response's length on purpose: LUSPO; the config rule that
refuses a length-weighting aggregation under a response-constant ratio lets it pass).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

AGGREGATIONS = Registry("algo.aggregation", weights_by_length=False, length_weight_intended=False)


def _n_seqs(mask: torch.Tensor) -> torch.Tensor:
    """Responses with at least one token in the loss (a fully masked one is not in the mean)."""
    return (mask.sum(-1) > 0).sum().clamp(min=1)


@AGGREGATIONS.register("seq_mean_token_mean")
def aggregate_seq_mean_token_mean(mask, *, group_size: int, max_new_tokens: int):
    """Original GRPO: mean over sequences of (mean over that sequence's tokens):
    w_{i,t} = 1 / (|o_i| N_seq). Shao et al. 2024 (arXiv 2402.03300), 1/G sum_i 1/|o_i| sum_t.
    """
    return mask / (mask.sum(-1, keepdim=True).clamp(min=1) * _n_seqs(mask))


@AGGREGATIONS.register("token_mean", weights_by_length=True)
def aggregate_token_mean(mask, *, group_size: int, max_new_tokens: int):
    """DAPO token-level loss: sum over all tokens of the (mini)batch / number of tokens, so long
    responses weigh in proportion to their length: w = 1 / sum|o_i|.
    Yu et al. 2025 (arXiv 2503.14476) Eq. 12."""
    return mask / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq_sum_constant", weights_by_length=True)
def aggregate_seq_sum_constant(mask, *, group_size: int, max_new_tokens: int):
    """Dr. GRPO: sum over tokens of each sequence / a constant (max_new_tokens, never the padded
    width), mean over sequences: w = 1 / (C N_seq). Liu et al. 2025 (arXiv 2503.20783), Eq. 3;
    authors' code divides by `generate_max_length`."""
    return mask / (max_new_tokens * _n_seqs(mask))


@AGGREGATIONS.register("prompt_mean", weights_by_length=True)
def aggregate_prompt_mean(mask, *, group_size: int, max_new_tokens: int):
    """ScaleRL prompt-level aggregation: token mean over all G responses of a prompt, then mean over
    prompts: w_{i,t} = 1 / (sum_{j in g(i)} |o_j| N_prompts). Khatri et al. 2025 (arXiv 2510.13786).
    Rows must hold whole groups, contiguously."""
    per_group = mask.view(-1, group_size, mask.shape[-1]).sum((1, 2))          # (P,)
    n_prompts = (per_group > 0).sum().clamp(min=1)
    denom = per_group.clamp(min=1).repeat_interleave(group_size).unsqueeze(-1)  # (B, 1)
    return mask / (denom * n_prompts)


@AGGREGATIONS.register("seq_sum_mean", weights_by_length=True, length_weight_intended=True)
def aggregate_seq_sum_mean(mask, *, group_size: int, max_new_tokens: int):
    """LUSPO: each response's loss summed over its tokens, then the mean over responses:
    w_{i,t} = 1 / N_seq. Under the sequence ratio (GSPO, one value per response) this is GSPO's
    loss scaled by the response's length |o_i|, which removes GSPO's bias toward short responses.
    Liu et al. 2026, Length-Unbiased Sequence Policy Optimization (arXiv 2602.05261); TRL
    `loss_type=luspo`: mean_i(|o_i| * l_i), the same weights."""
    return mask / _n_seqs(mask)


def positive_nll_weights(mask: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """VAPO positive-example LM loss weights: token mean over the correct responses of the
    (mini)batch (Yue et al. 2025, arXiv 2504.05118); loss = sum(w * -log pi_t)."""
    m = mask * correct.float().unsqueeze(-1)
    return m / m.sum().clamp(min=1)
