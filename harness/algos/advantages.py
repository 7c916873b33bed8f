"""advantage: (rewards (B,), mask, *, group_size, eps, token_rewards, values, gamma, lam) -> (B, T).

Also the pieces estimators share (returns-to-go, whitening, GAE), the critic's targets, VAPO's
length-adaptive lambda and DAPO's overlong reward shaping. Properties of each estimator:
needs_group (G >= 2 samples per prompt), needs_critic (a value model), group_local (a function of
each group alone: data parallel can shard by group), uses_eps (divides by a std, so `algo.adv_eps`
acts).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

ADVANTAGES = Registry("algo.advantage", needs_group=False, needs_critic=False, group_local=False,
                      uses_eps=False)


def _broadcast(adv_seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) sequence advantage -> (B, T) on the response tokens."""
    return adv_seq.unsqueeze(-1) * mask


def _seq_reward(rewards: torch.Tensor, mask: torch.Tensor, token_rewards) -> torch.Tensor:
    """A response-level estimator treats the whole response as one action: per-token rewards (a KL
    penalty in the reward) are summed into its reward, as RLOO does (Ahmadian et al. 2024, Sec. 3)."""
    if token_rewards is None:
        return rewards
    return rewards + (token_rewards * mask).sum(-1)


def _returns_to_go(rewards: torch.Tensor, mask: torch.Tensor, token_rewards) -> torch.Tensor:
    """(B, T) undiscounted return from token t: the outcome reward plus sum_{i>=t} token_rewards_i
    (REINFORCE++: A_t = r - beta sum_{i>=t} KL_i)."""
    ret = rewards.unsqueeze(-1) * mask
    if token_rewards is not None:
        tr = token_rewards * mask
        ret = ret + tr.flip(-1).cumsum(-1).flip(-1) * mask
    return ret


def _masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
    """(x - mean) / (std + eps) over the masked tokens of the whole batch (unbiased std), 0 on pad."""
    n = mask.sum().clamp(min=2)
    mean = (x * mask).sum() / mask.sum().clamp(min=1)
    var = (((x - mean) * mask) ** 2).sum() / (n - 1)
    return (x - mean) / (var.sqrt() + eps) * mask


@ADVANTAGES.register("group_norm", needs_group=True, group_local=True, uses_eps=True)
def compute_group_norm_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), std unbiased over the G samples of a prompt.

    Shao et al. 2024, DeepSeekMath (arXiv 2402.03300), outcome supervision, Eq. for A_hat_{i,t}.
    Per-token rewards (a KL penalty in the reward) are summed into r_i first.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    adv = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)
    return _broadcast(adv.reshape(-1), mask)


@ADVANTAGES.register("group_mean", needs_group=True, group_local=True)
def compute_group_mean_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """Dr. GRPO: A_i = r_i - mean_g r (no std division, which over-weights easy/hard prompts).

    Liu et al. 2025, "Understanding R1-Zero-Like Training" (arXiv 2503.20783), Sec. 3.2.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    return _broadcast((r - r.mean(-1, keepdim=True)).reshape(-1), mask)


@ADVANTAGES.register("rloo", needs_group=True, group_local=True)
def compute_rloo_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                           values=None, gamma: float = 1.0, lam=1.0):
    """RLOO: A_i = r_i - (1/(G-1)) sum_{j != i} r_j  (= G/(G-1) (r_i - mean_g r)).

    Ahmadian et al. 2024, "Back to Basics" (arXiv 2402.14740), leave-one-out baseline; the whole
    response is one action, so per-token rewards are summed into r_i.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    others = (r.sum(-1, keepdim=True) - r) / (group_size - 1)
    return _broadcast((r - others).reshape(-1), mask)


@ADVANTAGES.register("batch_norm", uses_eps=True)
def compute_batch_norm_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """REINFORCE++: A_t = r - sum_{i>=t} beta KL_i, whitened over all response tokens of the batch:
    (A_t - mean) / (std + eps).

    Hu 2025, REINFORCE++ (arXiv 2501.03262), "Global Advantage Normalization". The unit of the
    whitening is the token, as in OpenRLHF and verl (`masked_whiten`, unbiased std over tokens);
    with equal lengths and no per-token rewards it whitens the B rewards (up to Bessel's factor).
    """
    return _masked_whiten(_returns_to_go(rewards, mask, token_rewards), mask, eps)


@ADVANTAGES.register("group_mean_batch_std", needs_group=True, uses_eps=True)
def compute_group_mean_batch_std_advantage(rewards, mask, *, group_size: int, eps: float,
                                           token_rewards=None, values=None, gamma: float = 1.0,
                                           lam=1.0):
    """REINFORCE++-baseline / ScaleRL batch-level normalisation: subtract the group mean, then whiten
    over the whole batch: A_t = (r_i - mean_g r) - sum_{i>=t} beta KL_i, then (A - mean) / (std + eps)
    over all response tokens of the batch.

    Hu 2025 (arXiv 2501.03262v9), "w/ Baseline" variant (as in OpenRLHF `reinforce_baseline` and
    verl `reinforce_plus_plus_baseline`); Khatri et al. 2025, ScaleRL (arXiv 2510.13786): the std
    is taken over the batch, not the group.
    """
    r = rewards.view(-1, group_size)
    centred = (r - r.mean(-1, keepdim=True)).reshape(-1)
    return _masked_whiten(_returns_to_go(centred, mask, token_rewards), mask, eps)


@ADVANTAGES.register("group_mean_batch_std_seq", needs_group=True, uses_eps=True)
def compute_group_mean_batch_std_seq_advantage(rewards, mask, *, group_size: int, eps: float,
                                               token_rewards=None, values=None, gamma: float = 1.0,
                                               lam=1.0):
    """ScaleRL's batch-level normalisation with the RESPONSE as the unit of the std:
    A_i = (r_i - mean_g r) / (std_i (r_j - mean_g(j) r) + eps), the unbiased std over the B
    responses of the batch (not over their tokens), broadcast to the response's tokens.

    Khatri et al. 2025, ScaleRL (arXiv 2510.13786): "the advantage is normalised by the standard
    deviation of the batch"; the text does not say over responses or over tokens.
    `group_mean_batch_std` takes the tokens (as OpenRLHF/verl `masked_whiten`), this one the
    responses, as TRL `scale_rewards=batch` does (whose std is of the batch's rewards; which
    quantity's std ScaleRL takes is not stated either; here: of the group-centred rewards, not
    re-centred). The two units differ when lengths differ: a token-std counts a long response
    once per token. Per-token rewards (a KL in the
    reward) are summed into the response's reward first, as the response-level estimators do.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    centred = (r - r.mean(-1, keepdim=True)).reshape(-1)
    std = centred.std() if len(centred) > 1 else torch.zeros(())
    return _broadcast(centred / (std + eps), mask)


def compute_gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *,
                gamma: float, lam) -> torch.Tensor:
    """Generalised advantage estimation over one response (Schulman et al. 2016, arXiv 1506.02438):

        delta_t = r_t + gamma V_{t+1} - V_t,   A_t = sum_k (gamma lam)^k delta_{t+k}

    with V = 0 after the last response token. `lam` is a float or a (B,) tensor (one per response).
    token_rewards, values, mask: (B, T); returns (B, T), 0 on padding.
    """
    B, T = mask.shape
    lam_t = torch.as_tensor(lam, dtype=values.dtype).expand(B) if not torch.is_tensor(lam) \
        else lam.to(values.dtype)
    v = values * mask
    adv = torch.zeros_like(v)
    nxt_v = torch.zeros(B, dtype=v.dtype, device=v.device)
    nxt_a = torch.zeros(B, dtype=v.dtype, device=v.device)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * nxt_v - v[:, t]
        a_t = delta + gamma * lam_t * nxt_a
        adv[:, t] = a_t * m
        nxt_v = torch.where(m > 0, v[:, t], nxt_v)   # padding passes the next value through
        nxt_a = torch.where(m > 0, a_t, nxt_a)
    return adv


def outcome_token_rewards(rewards: torch.Tensor, mask: torch.Tensor, token_rewards) -> torch.Tensor:
    """(B, T): the outcome reward on the last response token, plus any per-token rewards."""
    last = mask.sum(-1).long().clamp(min=1) - 1
    out = torch.zeros_like(mask, dtype=rewards.dtype)
    out[torch.arange(len(rewards), device=last.device), last] = rewards
    out = out * mask
    return out if token_rewards is None else out + token_rewards * mask


def length_adaptive_lambda(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """VAPO length-adaptive GAE: 1 / (1 - lam_policy) = alpha * l, i.e. lam_policy = 1 - 1/(alpha l),
    clamped at 0 (responses shorter than 1/alpha tokens get TD(0)). Yue et al. 2025, VAPO
    (arXiv 2504.05118); alpha = 0.05."""
    return (1 - 1 / (alpha * lengths.float().clamp(min=1))).clamp(min=0.0)


@ADVANTAGES.register("gae", needs_critic=True, uses_eps=True)
def compute_gae_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                          values=None, gamma: float = 1.0, lam=1.0):
    """PPO with a critic: GAE(gamma, lam) on the outcome reward at the last token plus per-token
    rewards, then whitened over the batch's response tokens (as verl and OpenRLHF do).

    Schulman et al. 2016 (arXiv 1506.02438); Ouyang et al. 2022 (arXiv 2203.02155) for the LM
    setting; lam may be per response (VAPO's length-adaptive lam_policy, arXiv 2504.05118).
    """
    if values is None:
        raise ValueError("gae needs the critic's values")
    tr = outcome_token_rewards(rewards, mask, token_rewards)
    return _masked_whiten(compute_gae(tr, values, mask, gamma=gamma, lam=lam), mask, eps)


def compute_value_targets(rewards, mask, values, *, token_rewards=None, gamma: float,
                          lam: float) -> torch.Tensor:
    """Critic regression targets: GAE(lam_critic) advantages + V (the lambda-return). VAPO decouples
    lam_critic = 1.0 (Monte Carlo returns, unbiased) from lam_policy (arXiv 2504.05118)."""
    tr = outcome_token_rewards(rewards, mask, token_rewards)
    return (compute_gae(tr, values, mask, gamma=gamma, lam=lam) + values) * mask


def overlong_penalty(lengths: torch.Tensor, *, max_len: int, cache: int) -> torch.Tensor:
    """DAPO soft overlong punishment (Yu et al. 2025, arXiv 2503.14476, Eq. 13), added to the reward:
    0 if |y| <= L_max - L_cache; ((L_max - L_cache) - |y|) / L_cache up to L_max; -1 beyond.
    L_max = the generation limit; cache = 0 turns it off."""
    if cache <= 0:
        return torch.zeros(len(lengths), device=lengths.device)
    y = lengths.float()
    soft = ((max_len - cache) - y) / cache
    return torch.where(y <= max_len - cache, torch.zeros_like(y),
                       torch.where(y <= max_len, soft, -torch.ones_like(y)))
