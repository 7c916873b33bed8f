"""surrogate: (log_ratio, adv, logp, *, mask, <its keys>) -> SurrogateOut.

Each surrogate reads only the `algo.*` knobs it lists in its `keys` property (the loop passes
exactly those, `surrogate_knobs`); a knob another surrogate reads must keep its default (a config
rule), so a record never shows a setting that did nothing. Knobs and their meaning per surrogate:

- clip_low/clip_high: the ratio band [1 - eps_low, 1 + eps_high] (ppo_clip, cispo_band); the
  log-ratio band [-eps_low, eps_high] (gmpo: GMPO clips log rho, its paper's (e^-0.4, e^0.4));
- dual_clip: ppo_clip's floor c*A for A < 0;
- weight_cap: an ABSOLUTE cap of a detached importance weight, sg(min(rho, cap)): CISPO as
  MiniMax-M1/ScaleRL/TRL write it (eps_max; TRL `epsilon_high` 5), DPPO's truncation (verl
  `clip_ratio_c`, 20 in its code);
- tau_pos/tau_neg: SAPO's gate temperatures; div_low/div_high: DPPO's divergence thresholds;
- vespo_k_pos/lambda_pos/k_neg/lambda_neg: VESPO's Gamma kernel of the sequence weight.

Other properties: uses_ratio (an importance ratio enters the loss; without one, only on-policy
updates are unbiased), constant_per_response (every token of a response carries one value, GMPO:
a length-weighting aggregation would weight the response by its length), token_ratio_only (it
needs the per-token log-ratio; a response-constant ratio such as GSPO's is refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

SURROGATES = Registry("algo.surrogate", uses_ratio=True, keys=("clip_low", "clip_high"),
                      constant_per_response=False, token_ratio_only=False)


@dataclass
class SurrogateOut:
    loss: torch.Tensor      # (B, T) per-token loss to minimise (before aggregation)
    clipped: torch.Tensor   # (B, T) bool: a clip / cap / mask was active on this token


def surrogate_knobs(name: str, algo) -> dict:
    """The keyword arguments of surrogate `name`: the algo.* keys it declares, from `algo`."""
    return {k: getattr(algo, k) for k in SURROGATES.meta(name).keys}


@SURROGATES.register("ppo_clip", keys=("clip_low", "clip_high", "dual_clip"))
def compute_ppo_clip_loss(log_ratio, adv, logp, *, mask=None, clip_low: float, clip_high: float,
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


@SURROGATES.register("cispo", keys=("weight_cap",))
def compute_cispo_loss(log_ratio, adv, logp, *, mask=None, weight_cap: float):
    """CISPO with the absolute cap the papers write: L_t = -sg(min(rho_t, eps_max)) A_t log pi_t.

    MiniMax et al. 2025, MiniMax-M1 (arXiv 2506.13585), Eq. 4-5 (no lower bound, eps_high tuned);
    Khatri et al. 2025, ScaleRL (arXiv 2510.13786): sg(min(rho, eps_max)), eps_max in {4, 5, 8};
    TRL `loss_type=cispo`: `clamp(coef, max=epsilon_high)` (5 recommended). `algo.weight_cap` is
    eps_max itself: the weight of a token with rho = 10 and eps_max = 4 is exactly 4. Every token
    keeps its gradient (A_t w_t grad log pi_t). verl's `cispo` is the band form: `cispo_band`.
    `clipped` marks tokens whose weight was capped (they still get a gradient).
    """
    ratio = torch.exp(log_ratio)
    w = torch.clamp(ratio, max=weight_cap).detach()
    return SurrogateOut(-w * adv * logp, ratio > weight_cap)


@SURROGATES.register("cispo_band")
def compute_cispo_band_loss(log_ratio, adv, logp, *, mask=None, clip_low: float, clip_high: float):
    """CISPO in verl's form: L_t = -sg(clip(rho_t, 1 - eps_low, 1 + eps_high)) A_t log pi_t, a
    band around 1 (verl `loss_mode=cispo`, `clip_ratio_low/high`; ROLL and NeMo-RL likewise).
    MiniMax-M1 (arXiv 2506.13585) writes the same clip with no lower bound, which here is
    clip_low >= 1; the cap is then 1 + clip_high (clip_high = 4 caps at 5), unlike `cispo`.
    `clipped` marks tokens whose weight was truncated (they still get a gradient).
    """
    ratio = torch.exp(log_ratio)
    w = torch.clamp(ratio, 1 - clip_low, 1 + clip_high).detach()
    return SurrogateOut(-w * adv * logp, (ratio < 1 - clip_low) | (ratio > 1 + clip_high))


@SURROGATES.register("reinforce", uses_ratio=False, keys=())
def compute_reinforce_loss(log_ratio, adv, logp, *, mask=None):
    """Plain policy gradient, no ratio: L_t = -A_t log pi(y_t). On-policy only (one update per batch
    is the unbiased case). Williams 1992, REINFORCE."""
    return SurrogateOut(-adv * logp, torch.zeros_like(logp, dtype=torch.bool))


@SURROGATES.register("sapo", keys=("tau_pos", "tau_neg"))
def compute_sapo_loss(log_ratio, adv, logp, *, mask=None, tau_pos: float, tau_neg: float):
    """SAPO soft gate: L_t = -f_tau(rho_t) A_t,  f_tau(r) = (4 / tau) sigmoid(tau (r - 1)),
    tau = tau_pos where A_t > 0, tau_neg otherwise. The gradient is
    -A_t 4 s (1 - s) rho_t grad log pi_t with s = sigmoid(tau (rho_t - 1)): exactly the policy
    gradient at rho = 1, decaying smoothly away from it (never cut to zero at a band edge), faster for larger tau.

    Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv 2511.20347). verl `loss_mode=sapo`
    (tau_pos 1.0, tau_neg 1.05; A = 0 takes tau_neg, as here) and TRL `loss_type=sapo` agree on the
    gate; both aggregate per sequence then mean (our preset: seq_mean_token_mean). No clip is hard,
    so `clipped` is all false.
    """
    ratio = torch.exp(log_ratio)
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1)) * (4.0 / tau)
    return SurrogateOut(-gate * adv, torch.zeros_like(logp, dtype=torch.bool))


@SURROGATES.register("gmpo", constant_per_response=True, token_ratio_only=True)
def compute_gmpo_loss(log_ratio, adv, logp, *, mask, clip_low: float, clip_high: float):
    """GMPO: maximise the geometric mean of the token terms, with a sign-aware token clip in log
    space. Per response i (A_i its advantage, the mean of A over its tokens):

        c_t = sgn(A) min(sgn(A) log rho_t, sgn(A) clip(log rho_t, -eps_low, eps_high))
        L_i = -A_i exp( (1/|o_i|) sum_t c_t ),  carried by every token of the response

    Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv 2507.20673; its range
    (e^-0.4, e^0.4) is eps = 0.4 here). As verl `loss_mode=geo_mean` (clip_ratio_low/high are the
    log-space bounds there too); verl takes a plain mean over sequences: use seq_mean_token_mean,
    which weights each response 1/N_seq. For A > 0 only log rho above eps_high is clipped, for
    A < 0 only below -eps_low (PPO's pessimism, per token). `clipped`: tokens the clip stopped.
    """
    sgn = torch.sign(adv)
    clamped = torch.clamp(log_ratio, -clip_low, clip_high)
    c = sgn * torch.minimum(sgn * log_ratio, sgn * clamped)
    n = mask.sum(-1, keepdim=True).clamp(min=1)
    geo = torch.exp((c * mask).sum(-1, keepdim=True) / n)                    # (B, 1)
    a_seq = (adv * mask).sum(-1, keepdim=True) / n
    was = ((adv > 0) & (log_ratio > clip_high)) | ((adv < 0) & (log_ratio < -clip_low))
    return SurrogateOut((-a_seq * geo).expand_as(logp) * mask, was)


def _dppo(adv, logp, log_ratio, keep, weight_cap):
    ratio = torch.exp(log_ratio)
    w = torch.clamp(ratio, max=weight_cap).detach()
    keep = keep.detach()
    return SurrogateOut(-adv * w * logp * keep.to(logp.dtype), ~keep)


@SURROGATES.register("dppo_tv", keys=("div_low", "div_high", "weight_cap"))
def compute_dppo_tv_loss(log_ratio, adv, logp, *, mask=None, div_low: float, div_high: float,
                         weight_cap: float):
    """DPPO-Binary-TV: a trust region on the sampled token's probability instead of the ratio.
    With p = pi(y_t), p_old = pi_old(y_t) (the binary total variation |p - p_old|):

        keep_t = (p - p_old <= delta_high) if A_t > 0 else (p - p_old >= -delta_low)
        L_t = -A_t sg(min(rho_t, C)) log pi_t keep_t

    i.e. the gradient of rho A (an IS-weighted policy gradient) masked once the update has moved
    p by more than delta in the direction the advantage pushes. Qi et al. 2026, "Rethinking the
    Trust Region in LLM Reinforcement Learning" (arXiv 2602.04879). Follows verl `dppo_tv`
    (keep, the detached truncated weight C = `clip_ratio_c`, A = 0 under the negative rule);
    verl's recipe uses delta = 0.15 and switches the truncation off (C = 1e4).
    `clipped`: tokens masked out.
    """
    p, p_old = torch.exp(logp), torch.exp(logp - log_ratio)
    keep = torch.where(adv > 0, p - p_old <= div_high, p - p_old >= -div_low)
    return _dppo(adv, logp, log_ratio, keep, weight_cap)


@SURROGATES.register("dppo_kl", keys=("div_low", "div_high", "weight_cap"))
def compute_dppo_kl_loss(log_ratio, adv, logp, *, mask=None, div_low: float, div_high: float,
                         weight_cap: float):
    """DPPO-Binary-KL: as dppo_tv with the binary KL of the sampled token's Bernoulli,

        D_t = p_old log(p_old / p) + (1 - p_old) log((1 - p_old) / (1 - p))
        keep_t = (D_t <= delta_high or p <= p_old) if A_t > 0 else (D_t <= delta_low or p >= p_old)
        L_t = -A_t sg(min(rho_t, C)) log pi_t keep_t

    Qi et al. 2026 (arXiv 2602.04879); verl `dppo_kl` (its 1e-8 inside the second log kept, so
    p -> 1 stays finite; recipe delta = 0.05). `clipped`: tokens masked out.
    """
    p, p_old = torch.exp(logp), torch.exp(logp - log_ratio)
    d = p_old * (-log_ratio) + (1 - p_old) * torch.log((1 - p_old + 1e-8) / (1 - p + 1e-8))
    keep = torch.where(adv > 0, (d <= div_high) | (p <= p_old), (d <= div_low) | (p >= p_old))
    return _dppo(adv, logp, log_ratio, keep, weight_cap)


@SURROGATES.register("vespo", token_ratio_only=True,
                     keys=("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"))
def compute_vespo_loss(log_ratio, adv, logp, *, mask, vespo_k_pos: float, vespo_lambda_pos: float,
                       vespo_k_neg: float, vespo_lambda_neg: float):
    """VESPO: a detached Gamma-shaped reshaping of the SEQUENCE importance weight scales a
    REINFORCE term. Per response i, with w_i = exp(sum_t clamp(log rho_t, -20, 20)) clamped to
    [1e-8, e^20] (no length normalisation):

        phi_i = w_i^k exp(lambda (1 - w_i)) = exp(lambda + k log w_i - lambda w_i),
        L_t = -sg(phi_i) A_t log pi_t,

    (k, lambda) = (k_pos, lambda_pos) where A >= 0, (k_neg, lambda_neg) where A < 0 (TRL defaults
    2, 3 and 3, 2). phi(1) = 1 (on-policy: the policy gradient), phi peaks at w = k / lambda and
    vanishes for w -> 0 and w -> inf, so stale or mismatched responses fade instead of being clipped.

    Shen et al. 2026, VESPO: Variational Sequence-level Soft Policy Optimization (arXiv
    2602.10693). The kernel and clamps as TRL `loss_type=vespo` (`get_gamma_weights`, read in a
    mirror of it); the paper's own derivation was not read. `clipped`: responses whose sequence
    log-weight hit a clamp.
    """
    lower = -18.420680743952367  # log(1e-8)
    seq = (torch.clamp(log_ratio, -20.0, 20.0) * mask).sum(-1, keepdim=True)
    log_w = torch.clamp(seq, lower, 20.0)
    pos = adv >= 0
    k = torch.where(pos, torch.full_like(adv, vespo_k_pos), torch.full_like(adv, vespo_k_neg))
    lam = torch.where(pos, torch.full_like(adv, vespo_lambda_pos), torch.full_like(adv, vespo_lambda_neg))
    phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w)).detach()
    hit = ((seq <= lower) | (seq >= 20.0)).expand_as(logp)
    return SurrogateOut(-phi * adv * logp, hit & mask.bool())
