"""The design space: one registry per independent axis, one small pure function per choice.

An algorithm is a preset (YAML data) that picks one name per axis; the loop calls
`ADVANTAGES[cfg.algo.advantage](...)` etc. and never branches on algorithm names.

Shapes: B sequences (= prompts x G, grouped contiguously: rows g*G .. g*G+G-1 share a prompt),
T response tokens. `mask` is (B, T) with 1 on tokens the policy chose.

Every function of an axis shares one signature:

- advantage   (rewards (B,), mask, *, group_size, eps, token_rewards, values, gamma, lam) -> (B, T)
- ratio       (logp (B,T), logp_old (B,T), mask) -> log importance ratio (B, T)
- surrogate   (log_ratio, adv, logp, *, clip_low, clip_high, dual_clip) -> SurrogateOut
- aggregation (mask, *, group_size, max_new_tokens) -> token weights (B, T); loss = sum(w * loss_t)
- kl          (logp, logp_ref) -> per-token estimate of KL(pi || pi_ref) (B, T)
- rollout_correction (logp_train, logp_sampler, mask, *, cap, floor) -> token-loss weights (B, T)

Aggregations return *weights*, not a scalar: every normaliser is computed once over the whole
minibatch, so splitting it into micro-batches cannot change the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Registry

ADVANTAGES: Registry = Registry("algo.advantage")
RATIOS: Registry = Registry("algo.ratio")
SURROGATES: Registry = Registry("algo.surrogate")
AGGREGATIONS: Registry = Registry("algo.aggregation")
KL_ESTIMATORS: Registry = Registry("algo.kl")
ROLLOUT_CORRECTIONS: Registry = Registry("algo.rollout_correction")

REGISTRIES = {"advantage": ADVANTAGES, "ratio": RATIOS, "surrogate": SURROGATES,
              "aggregation": AGGREGATIONS, "kl": KL_ESTIMATORS,
              "rollout_correction": ROLLOUT_CORRECTIONS}
OPTIONAL_AXES = {"kl", "rollout_correction"}  # axes whose config value may also be "none" (off)

# Properties of choices that config validation needs (never consulted by name in the loop).
ADVANTAGE_NEEDS_GROUP: dict[str, bool] = {}
ADVANTAGE_NEEDS_CRITIC: dict[str, bool] = {}
ADVANTAGE_GROUP_LOCAL: dict[str, bool] = {}          # a function of each group alone (data parallel)
RATIO_CONSTANT_PER_RESPONSE: dict[str, bool] = {}    # one value per response (GSPO)
AGGREGATION_WEIGHTS_BY_LENGTH: dict[str, bool] = {}  # a response's weight grows with its length
SURROGATE_USES_RATIO: dict[str, bool] = {}
SURROGATE_HAS_DUAL_CLIP: dict[str, bool] = {}


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


# ------------------------------------------------------------------------------------------------
# advantage -> (B, T)
# ------------------------------------------------------------------------------------------------
def _register_adv(name: str, needs_group: bool, needs_critic: bool = False, group_local: bool = False):
    ADVANTAGE_NEEDS_GROUP[name] = needs_group
    ADVANTAGE_NEEDS_CRITIC[name] = needs_critic
    ADVANTAGE_GROUP_LOCAL[name] = group_local
    return ADVANTAGES.register(name)


@_register_adv("group_norm", needs_group=True, group_local=True)
def compute_group_norm_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), std unbiased over the G samples of a prompt.

    Shao et al. 2024, DeepSeekMath (arXiv 2402.03300), outcome supervision, Eq. for A_hat_{i,t}.
    Per-token rewards (a KL penalty in the reward) are summed into r_i first.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    adv = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + eps)
    return _broadcast(adv.reshape(-1), mask)


@_register_adv("group_mean", needs_group=True, group_local=True)
def compute_group_mean_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """Dr. GRPO: A_i = r_i - mean_g r (no std division, which over-weights easy/hard prompts).

    Liu et al. 2025, "Understanding R1-Zero-Like Training" (arXiv 2503.20783), Sec. 3.2.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    return _broadcast((r - r.mean(-1, keepdim=True)).reshape(-1), mask)


@_register_adv("rloo", needs_group=True, group_local=True)
def compute_rloo_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                           values=None, gamma: float = 1.0, lam=1.0):
    """RLOO: A_i = r_i - (1/(G-1)) sum_{j != i} r_j  (= G/(G-1) (r_i - mean_g r)).

    Ahmadian et al. 2024, "Back to Basics" (arXiv 2402.14740), leave-one-out baseline; the whole
    response is one action, so per-token rewards are summed into r_i.
    """
    r = _seq_reward(rewards, mask, token_rewards).view(-1, group_size)
    others = (r.sum(-1, keepdim=True) - r) / (group_size - 1)
    return _broadcast((r - others).reshape(-1), mask)


@_register_adv("batch_norm", needs_group=False)
def compute_batch_norm_advantage(rewards, mask, *, group_size: int, eps: float, token_rewards=None,
                                 values=None, gamma: float = 1.0, lam=1.0):
    """REINFORCE++: A_t = r - sum_{i>=t} beta KL_i, whitened over all response tokens of the batch:
    (A_t - mean) / (std + eps).

    Hu 2025, REINFORCE++ (arXiv 2501.03262), "Global Advantage Normalization". The unit of the
    whitening is the token, as in OpenRLHF and verl (`masked_whiten`, unbiased std over tokens);
    with equal lengths and no per-token rewards it whitens the B rewards (up to Bessel's factor).
    """
    return _masked_whiten(_returns_to_go(rewards, mask, token_rewards), mask, eps)


@_register_adv("group_mean_batch_std", needs_group=True)
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
    nxt_v = torch.zeros(B, dtype=v.dtype)
    nxt_a = torch.zeros(B, dtype=v.dtype)
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
    out[torch.arange(len(rewards)), last] = rewards
    out = out * mask
    return out if token_rewards is None else out + token_rewards * mask


def length_adaptive_lambda(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """VAPO length-adaptive GAE: 1 / (1 - lam_policy) = alpha * l, i.e. lam_policy = 1 - 1/(alpha l),
    clamped at 0 (responses shorter than 1/alpha tokens get TD(0)). Yue et al. 2025, VAPO
    (arXiv 2504.05118); alpha = 0.05."""
    return (1 - 1 / (alpha * lengths.float().clamp(min=1))).clamp(min=0.0)


@_register_adv("gae", needs_group=False, needs_critic=True)
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
        return torch.zeros(len(lengths))
    y = lengths.float()
    soft = ((max_len - cache) - y) / cache
    return torch.where(y <= max_len - cache, torch.zeros_like(y),
                       torch.where(y <= max_len, soft, -torch.ones_like(y)))


# ------------------------------------------------------------------------------------------------
# ratio -> log importance ratio (B, T)
# ------------------------------------------------------------------------------------------------
@RATIOS.register("token")
def compute_token_log_ratio(logp, logp_old, mask):
    """PPO/GRPO token ratio: log rho_t = log pi(y_t|x,y_<t) - log pi_old(y_t|x,y_<t).

    Schulman et al. 2017, PPO (arXiv 1707.06347).
    """
    return (logp - logp_old) * mask


@RATIOS.register("sequence")
def compute_sequence_log_ratio(logp, logp_old, mask):
    """GSPO length-normalised sequence ratio, GSPO-token form (Zheng et al. 2025, arXiv 2507.18071):

        log s_i = (1/|y_i|) sum_t log rho_t,    log s_{i,t} = sg(log s_i) + log pi_t - sg(log pi_t)

    Every token carries the value s_i, so the clip acts on the whole response; the gradient of token
    t is s_i * grad log pi_t, which under a per-response mean (seq_mean_token_mean) equals GSPO's.
    """
    n = mask.sum(-1, keepdim=True).clamp(min=1)
    log_s = ((logp - logp_old) * mask).sum(-1, keepdim=True) / n
    return (log_s.detach() + logp - logp.detach()) * mask


@RATIOS.register("prefix_min")
def compute_prefix_min_log_ratio(logp, logp_old, mask):
    """MinPRO (Lei, Cheng, Tao 2026, arXiv 2601.22718): the correct correction of token t is the
    prefix ratio prod_{j<=t} rho_j; MinPRO replaces the cumulative product over the preceding prefix
    by the minimum token ratio observed there. Implemented form (ours; the paper's exact objective
    was not available, only its abstract - unverified: whether j < t or j <= t, any extra clipping):

        log r_t = log rho_t + sg(min_{j<t} log rho_j),   min over the empty prefix (t = 1) = 0

    i.e. the token ratio times a stop-gradient prefix weight; the surrogate then clips r_t.
    """
    lr = (logp - logp_old) * mask
    big = torch.finfo(lr.dtype).max
    masked = torch.where(mask > 0, lr.detach(), torch.full_like(lr, big))
    run_min = torch.cummin(masked, dim=-1).values                    # min_{j<=t}
    prev = torch.cat([torch.full_like(run_min[:, :1], big), run_min[:, :-1]], -1)  # min_{j<t}
    prefix = torch.where(prev >= big, torch.zeros_like(prev), prev)
    return (lr + prefix) * mask


RATIO_CONSTANT_PER_RESPONSE.update(token=False, sequence=True, prefix_min=False)


# ------------------------------------------------------------------------------------------------
# surrogate -> (token loss, clipped)
# ------------------------------------------------------------------------------------------------
@dataclass
class SurrogateOut:
    loss: torch.Tensor      # (B, T) per-token loss to minimise (before aggregation)
    clipped: torch.Tensor   # (B, T) bool: a clip was active on this token


def _register_sur(name: str, uses_ratio: bool, dual_clip: bool = False):
    SURROGATE_USES_RATIO[name] = uses_ratio
    SURROGATE_HAS_DUAL_CLIP[name] = dual_clip
    return SURROGATES.register(name)


@_register_sur("ppo_clip", uses_ratio=True, dual_clip=True)
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


@_register_sur("cispo", uses_ratio=True)
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


@_register_sur("reinforce", uses_ratio=False)
def compute_reinforce_loss(log_ratio, adv, logp, *, clip_low: float, clip_high: float,
                           dual_clip: float = 0.0):
    """Plain policy gradient, no ratio: L_t = -A_t log pi(y_t). On-policy only (one update per batch
    is the unbiased case). Williams 1992, REINFORCE."""
    return SurrogateOut(-adv * logp, torch.zeros_like(logp, dtype=torch.bool))


# ------------------------------------------------------------------------------------------------
# aggregation -> token weights (B, T); the loss is sum(weights * token_loss)
# ------------------------------------------------------------------------------------------------
def _register_agg(name: str, weights_by_length: bool):
    AGGREGATION_WEIGHTS_BY_LENGTH[name] = weights_by_length
    return AGGREGATIONS.register(name)


def _n_seqs(mask: torch.Tensor) -> torch.Tensor:
    """Responses with at least one token in the loss (a fully masked one is not in the mean)."""
    return (mask.sum(-1) > 0).sum().clamp(min=1)


@_register_agg("seq_mean_token_mean", weights_by_length=False)
def aggregate_seq_mean_token_mean(mask, *, group_size: int, max_new_tokens: int):
    """Original GRPO: mean over sequences of (mean over that sequence's tokens):
    w_{i,t} = 1 / (|o_i| N_seq). Shao et al. 2024 (arXiv 2402.03300), 1/G sum_i 1/|o_i| sum_t.
    """
    return mask / (mask.sum(-1, keepdim=True).clamp(min=1) * _n_seqs(mask))


@_register_agg("token_mean", weights_by_length=True)
def aggregate_token_mean(mask, *, group_size: int, max_new_tokens: int):
    """DAPO token-level loss: sum over all tokens of the (mini)batch / number of tokens, so long
    responses weigh in proportion to their length: w = 1 / sum|o_i|.
    Yu et al. 2025 (arXiv 2503.14476) Eq. 12."""
    return mask / mask.sum().clamp(min=1)


@_register_agg("seq_sum_constant", weights_by_length=True)
def aggregate_seq_sum_constant(mask, *, group_size: int, max_new_tokens: int):
    """Dr. GRPO: sum over tokens of each sequence / a constant (max_new_tokens, never the padded
    width), mean over sequences: w = 1 / (C N_seq). Liu et al. 2025 (arXiv 2503.20783), Eq. 3;
    authors' code divides by `generate_max_length`."""
    return mask / (max_new_tokens * _n_seqs(mask))


@_register_agg("prompt_mean", weights_by_length=True)
def aggregate_prompt_mean(mask, *, group_size: int, max_new_tokens: int):
    """ScaleRL prompt-level aggregation: token mean over all G responses of a prompt, then mean over
    prompts: w_{i,t} = 1 / (sum_{j in g(i)} |o_j| N_prompts). Khatri et al. 2025 (arXiv 2510.13786).
    Rows must hold whole groups, contiguously."""
    per_group = mask.view(-1, group_size, mask.shape[-1]).sum((1, 2))          # (P,)
    n_prompts = (per_group > 0).sum().clamp(min=1)
    denom = per_group.clamp(min=1).repeat_interleave(group_size).unsqueeze(-1)  # (B, 1)
    return mask / (denom * n_prompts)


def aggregate(name: str, token_loss: torch.Tensor, mask: torch.Tensor, *, group_size: int,
              max_new_tokens: int) -> torch.Tensor:
    """The scalar loss of one (mini)batch: sum(w * token_loss) with w from AGGREGATIONS[name]."""
    w = AGGREGATIONS[name](mask, group_size=group_size, max_new_tokens=max_new_tokens)
    return (token_loss * w).sum()


def positive_nll_weights(mask: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """VAPO positive-example LM loss weights: token mean over the correct responses of the
    (mini)batch (Yue et al. 2025, arXiv 2504.05118); loss = sum(w * -log pi_t)."""
    m = mask * correct.float().unsqueeze(-1)
    return m / m.sum().clamp(min=1)


# ------------------------------------------------------------------------------------------------
# kl: per-token estimate of KL(pi || pi_ref) from samples of pi, with u = log pi_ref - log pi
# ------------------------------------------------------------------------------------------------
@KL_ESTIMATORS.register("k1")
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


# ------------------------------------------------------------------------------------------------
# rollout_correction: the sampler (vLLM, bf16 kernels) and the trainer assign different
# probabilities to the same token under the same weights, so "on-policy" samples are off-policy
# by the ratio  rho^mis_t = pi_old,trainer(y_t) / pi_sampler(y_t).  The correction is a detached
# per-token weight on the policy loss; pi_old of the PPO ratio is the trainer's recomputed one.
# ------------------------------------------------------------------------------------------------
def mismatch_log_ratio(logp_train: torch.Tensor, logp_sampler: torch.Tensor,
                       mask: torch.Tensor) -> torch.Tensor:
    """log rho^mis_t = log pi_trainer(y_t) - log pi_sampler(y_t), 0 on padding (B, T)."""
    return (logp_train - logp_sampler) * mask


@ROLLOUT_CORRECTIONS.register("tis")
def compute_tis_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Truncated importance sampling (TIS): w_t = min(rho^mis_t, C), detached, so the update is

        grad = E_{y ~ pi_sampler} [ min(pi_old,trainer / pi_sampler, C) * grad L_t ]

    Yao et al. 2025 (F. Yao, L. Liu, D. Zhang, C. Dong, J. Shang, J. Gao), "Your Efficient RL
    Framework Secretly Brings You Off-Policy RL Training" (blog, fengyao.notion.site/off-policy-rl,
    Aug 2025; NeurIPS 2025 workshop paper "On the Rollout-Training Mismatch in Modern RL Systems"). verl's rollout_is=token with threshold 2.0 is this weight.
    """
    return torch.exp(mismatch_log_ratio(logp_train, logp_sampler, mask)).clamp(max=cap).detach() * mask


@ROLLOUT_CORRECTIONS.register("mask")
def compute_mismatch_mask_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Token masking: w_t = 1 if floor <= rho^mis_t <= cap else 0; tokens on which sampler and
    trainer disagree too much get no gradient (their loss weight is zeroed; the aggregation's
    normaliser is unchanged). IcePop, Ling Team 2025, "Every Step Evolves: Scaling RL for
    Trillion-Scale Thinking Model" (Ring-1T, arXiv 2510.18855): band [0.5, 5].
    """
    rho = torch.exp(mismatch_log_ratio(logp_train, logp_sampler, mask))
    return ((rho >= floor) & (rho <= cap)).to(mask.dtype) * mask
