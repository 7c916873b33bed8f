"""The design space: one registry per independent axis, one small pure function per choice.

An algorithm is a preset (YAML data) that picks one name per axis; the loop calls
`ADVANTAGES[cfg.algo.advantage](...)` etc. and never branches on algorithm names.

Shapes: B sequences (= prompts x G, grouped contiguously: rows g*G .. g*G+G-1 share a prompt),
T response tokens. `mask` is (B, T) with 1 on tokens the policy chose.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Registry

ADVANTAGES: Registry = Registry("algo.advantage")
RATIOS: Registry = Registry("algo.ratio")
SURROGATES: Registry = Registry("algo.surrogate")
AGGREGATIONS: Registry = Registry("algo.aggregation")

REGISTRIES = {"advantage": ADVANTAGES, "ratio": RATIOS, "surrogate": SURROGATES,
              "aggregation": AGGREGATIONS}
ADVANTAGE_NEEDS_GROUP: dict[str, bool] = {}


def _broadcast(adv_seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) sequence advantage -> (B, T) on the response tokens."""
    return adv_seq.unsqueeze(-1) * mask


# ------------------------------------------------------------------------------------------------
# advantage: (rewards (B,), mask (B,T), group_size, eps) -> (B, T)
# ------------------------------------------------------------------------------------------------
def _register_adv(name: str, needs_group: bool):
    ADVANTAGE_NEEDS_GROUP[name] = needs_group
    return ADVANTAGES.register(name)


@_register_adv("group_norm", needs_group=True)
def compute_group_norm_advantage(rewards, mask, *, group_size: int, eps: float):
    """GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), std unbiased over the G samples of a prompt.

    Shao et al. 2024, DeepSeekMath (arXiv 2402.03300), outcome supervision, Eq. for A_hat_{i,t}.
    """
    r = rewards.view(-1, group_size)
    adv = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)
    return _broadcast(adv.reshape(-1), mask)


@_register_adv("group_mean", needs_group=True)
def compute_group_mean_advantage(rewards, mask, *, group_size: int, eps: float):
    """Dr. GRPO: A_i = r_i - mean_g r (no std division, which over-weights easy/hard prompts).

    Liu et al. 2025, "Understanding R1-Zero-Like Training" (arXiv 2503.20783), Sec. 3.2.
    """
    r = rewards.view(-1, group_size)
    return _broadcast((r - r.mean(-1, keepdim=True)).reshape(-1), mask)


@_register_adv("rloo", needs_group=True)
def compute_rloo_advantage(rewards, mask, *, group_size: int, eps: float):
    """RLOO: A_i = r_i - (1/(G-1)) sum_{j != i} r_j  (= G/(G-1) (r_i - mean_g r)).

    Ahmadian et al. 2024, "Back to Basics" (arXiv 2402.14740), leave-one-out baseline.
    """
    r = rewards.view(-1, group_size)
    others = (r.sum(-1, keepdim=True) - r) / (group_size - 1)
    return _broadcast((r - others).reshape(-1), mask)


@_register_adv("batch_norm", needs_group=False)
def compute_batch_norm_advantage(rewards, mask, *, group_size: int, eps: float):
    """REINFORCE++: A_i = (r_i - mean_batch r) / (std_batch r + eps), global batch whitening.

    Hu 2025, REINFORCE++ (arXiv 2501.03262), "Global Advantage Normalization".
    """
    adv = (rewards - rewards.mean()) / (rewards.std() + eps)
    return _broadcast(adv, mask)


# ------------------------------------------------------------------------------------------------
# ratio: (logp (B,T), logp_old (B,T), mask) -> log importance ratio (B, T)
# ------------------------------------------------------------------------------------------------
@RATIOS.register("token")
def compute_token_log_ratio(logp, logp_old, mask):
    """PPO/GRPO token ratio: log rho_t = log pi(y_t|x,y_<t) - log pi_old(y_t|x,y_<t).

    Schulman et al. 2017, PPO (arXiv 1707.06347).
    """
    return (logp - logp_old) * mask


# ------------------------------------------------------------------------------------------------
# surrogate: (log_ratio (B,T), adv (B,T), logp (B,T), clip_low, clip_high) -> (token loss, clipped)
# ------------------------------------------------------------------------------------------------
@dataclass
class SurrogateOut:
    loss: torch.Tensor      # (B, T) per-token loss to minimise (before aggregation)
    clipped: torch.Tensor   # (B, T) bool: the clip was active (no gradient from this token)


@SURROGATES.register("ppo_clip")
def compute_ppo_clip_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float):
    """PPO clipped surrogate, asymmetric bounds (DAPO clip-higher when clip_high > clip_low):

        L_t = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    Schulman et al. 2017 (arXiv 1707.06347) Eq. 7; Yu et al. 2025, DAPO (arXiv 2503.14476) Eq. 10.
    """
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return SurrogateOut(loss, clipped < unclipped)


@SURROGATES.register("reinforce")
def compute_reinforce_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float):
    """Plain policy gradient, no ratio: L_t = -A_t log pi(y_t). On-policy only (one update per batch
    is the unbiased case). Williams 1992, REINFORCE."""
    return SurrogateOut(-adv * logp, torch.zeros_like(logp, dtype=torch.bool))


# ------------------------------------------------------------------------------------------------
# aggregation: (token_loss (B,T), mask (B,T), max_new_tokens) -> scalar
# ------------------------------------------------------------------------------------------------
@AGGREGATIONS.register("seq_mean_token_mean")
def aggregate_seq_mean_token_mean(token_loss, mask, *, max_new_tokens: int):
    """Original GRPO: mean over sequences of (mean over that sequence's tokens).

    Shao et al. 2024 (arXiv 2402.03300), 1/G sum_i 1/|o_i| sum_t.
    """
    per_seq = (token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return per_seq.mean()


@AGGREGATIONS.register("token_mean")
def aggregate_token_mean(token_loss, mask, *, max_new_tokens: int):
    """DAPO token-level loss: sum over all tokens of the batch / number of tokens, so long responses
    weigh in proportion to their length. Yu et al. 2025 (arXiv 2503.14476) Eq. 12."""
    return (token_loss * mask).sum() / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq_sum_constant")
def aggregate_seq_sum_constant(token_loss, mask, *, max_new_tokens: int):
    """Dr. GRPO: sum over tokens of each sequence / a constant (max_new_tokens, never the padded
    width), mean over sequences. Liu et al. 2025 (arXiv 2503.20783), Eq. 3; authors' code divides by
    `generate_max_length`."""
    return ((token_loss * mask).sum(-1) / max_new_tokens).mean()
