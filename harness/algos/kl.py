"""kl: (logp, logp_ref) -> per-token estimate of KL(pi || pi_ref) (B, T), from samples of pi, with
u = log pi_ref - log pi; and kl_mode: where that estimate goes (a loss term or a reward penalty).

Properties: needs_reference (a frozen reference model is loaded and forwarded; `none` has none),
gradient_as_loss (as a loss term its expected gradient is not zero: false for k1). kl_mode:
in_loss (added to the token loss with kl_coef), in_reward (-kl_coef * kl_t per token in the reward).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

KL_ESTIMATORS = Registry("algo.kl", needs_reference=True, gradient_as_loss=True)
KL_MODES = Registry("algo.kl_mode", in_loss=False, in_reward=False)


@KL_ESTIMATORS.register("none", needs_reference=False, gradient_as_loss=False)
def kl_none(logp, logp_ref):
    """No KL term: no reference model is loaded, nothing is added to the loss or the reward
    (algo.kl_coef must then be 0). DAPO drops the KL term for verifiable rewards (Yu et al. 2025,
    arXiv 2503.14476, Sec. 2.3), as Dr. GRPO and most RLVR recipes do."""
    return torch.zeros_like(logp)


@KL_ESTIMATORS.register("k1", gradient_as_loss=False)
def kl_k1(logp, logp_ref):
    """k1 = log pi - log pi_ref = -u: unbiased, high variance, can be negative (Schulman 2020,
    "Approximating KL divergence"). In the reward it is the classic RLHF penalty (Ouyang et al.
    2022, arXiv 2203.02155); as a loss its expected gradient is zero."""
    return logp - logp_ref


@KL_ESTIMATORS.register("k2")
def kl_k2(logp, logp_ref):
    """k2 = u^2 / 2: biased, low variance, >= 0 (Schulman 2020). As a loss its gradient equals that
    of k1 in the reward, on-policy (Tang & Munos 2025, "On a few pitfalls in KL divergence gradient
    estimation for RL")."""
    return 0.5 * (logp_ref - logp) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logp, logp_ref):
    """k3 = exp(u) - 1 - u: unbiased, low variance, >= 0 (Schulman 2020). GRPO's KL loss term:
    Shao et al. 2024, DeepSeekMath (arXiv 2402.03300), Eq. 4."""
    u = logp_ref - logp
    return torch.exp(u) - 1 - u


@KL_MODES.register("loss", in_loss=True)
def kl_in_loss(kl, mask, coef):
    """A loss term aggregated like the policy loss: L_t += kl_coef * kl_t (GRPO, Shao et al. 2024,
    arXiv 2402.03300, Eq. 3). Adds nothing to the reward (returns None)."""
    return None


@KL_MODES.register("reward", in_reward=True)
def kl_in_reward(kl, mask, coef):
    """A per-token penalty in the reward, r_t -= kl_coef * kl_t at the sampling policy (PPO-RLHF,
    Ouyang et al. 2022, arXiv 2203.02155; REINFORCE++, arXiv 2501.03262); response-level
    estimators sum it into the response's reward. Returns the token rewards (B, T)."""
    return -coef * kl * mask
