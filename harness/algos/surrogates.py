"""surrogate: (log_ratio, adv, logp, *, clip_low, clip_high, dual_clip) -> SurrogateOut.

Properties: uses_ratio (an importance ratio enters the loss; without one, only on-policy updates
are unbiased), uses_clip (algo.clip_low/clip_high act), has_dual_clip (algo.dual_clip acts).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

SURROGATES = Registry("algo.surrogate", uses_ratio=True, uses_clip=True, has_dual_clip=False)


@dataclass
class SurrogateOut:
    loss: torch.Tensor      # (B, T) per-token loss to minimise (before aggregation)
    clipped: torch.Tensor   # (B, T) bool: a clip was active on this token


@SURROGATES.register("ppo_clip", has_dual_clip=True)
def compute_ppo_clip_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float,
                          dual_clip: float = 0.0):
    """PPO clipped surrogate, asymmetric bounds (DAPO clip-higher when clip_high > clip_low):

        L_t = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    and, with dual_clip = c > 1, for A_t < 0 the objective is floored at c A_t (no gradient once
    rho_t > c). Schulman et al. 2017 (arXiv 1707.06347) Eq. 7; Yu et al. 2025, DAPO
    (arXiv 2503.14476) Eq. 10; dual clip: Ye et al. 2020 (arXiv 1912.09729).
    `clipped` marks tokens that get no gradient.
    """
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv
    obj = torch.minimum(unclipped, clipped)
    was_clipped = clipped < unclipped
    if dual_clip > 0:
        floor = dual_clip * adv
        dual = (adv < 0) & (obj < floor)
        obj = torch.where(dual, floor, obj)
        was_clipped = was_clipped | dual
    return SurrogateOut(-obj, was_clipped)


@SURROGATES.register("cispo")
def compute_cispo_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float,
                       dual_clip: float = 0.0):
    """CISPO: L_t = -sg(clip(rho_t, 1 - eps_low, 1 + eps_high)) A_t log pi_t. The importance weight
    is clipped and detached, so every token keeps its gradient (A_t w_t grad log pi_t).

    MiniMax et al. 2025, MiniMax-M1 (arXiv 2506.13585). MiniMax imposed no lower bound
    and tuned only eps_high: express that with clip_low >= 1 (a floor at <= 0 never binds).
    `clipped` marks tokens whose weight was truncated (they still get a gradient).
    """
    ratio = torch.exp(log_ratio)
    w = torch.clamp(ratio, 1 - clip_low, 1 + clip_high).detach()
    return SurrogateOut(-w * adv * logp, (ratio < 1 - clip_low) | (ratio > 1 + clip_high))


@SURROGATES.register("reinforce", uses_ratio=False, uses_clip=False)
def compute_reinforce_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float,
                           dual_clip: float = 0.0):
    """Plain policy gradient, no ratio: L_t = -A_t log pi(y_t). On-policy only (one update per batch
    is the unbiased case). Williams 1992, REINFORCE."""
    return SurrogateOut(-adv * logp, torch.zeros_like(logp, dtype=torch.bool))
