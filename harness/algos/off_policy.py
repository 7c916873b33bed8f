"""Which policy the samples came from, and how the loss corrects for it.

old_logprobs: (sampler_logprobs, recompute) -> pi_old (B, T): the sampler's own log-probs, or a
teacher-forced forward pass of the trainer before the update (`recompute()`, a zero-argument
callable the loop passes in). Properties: trainer_forward (an extra forward pass, whose values are
the trainer's), exact_under_top_p (the values are the policy's even when the sampler used top_p).

rollout_correction: the sampler (vLLM, bf16 kernels) and the trainer assign different
probabilities to the same token under the same weights, so "on-policy" samples are off-policy by
the ratio  rho^mis_t = pi_old,trainer(y_t) / pi_sampler(y_t).  The correction is a detached
per-token weight on the policy loss; pi_old of the PPO ratio is the trainer's recomputed one.
(logp_train, logp_sampler, mask, *, cap, floor) -> weights (B, T), or None for `none`.
Properties: active, uses_cap, uses_floor. The sequence-level values (seq_tis, seq_mask) use the
response's ratio rho^mis_i = exp(sum_t log rho^mis_t), as TRL's `sequence_*` modes and verl's
`rollout_is=sequence` do (NeMo-RL PR #2269: this product collapses on ~9k-token responses).

off_policy_mask: a mask computed at loss time from the CURRENT policy and the sampler's log-probs
(so it sees both the optimizer's drift and the rollout/train mismatch):
(logp, logp_sampler, adv, mask, *, threshold) -> (B, 1) keep weights. Property: active.
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

OLD_LOGPROBS = Registry("algo.old_logprobs", trainer_forward=False, exact_under_top_p=False)
ROLLOUT_CORRECTIONS = Registry("algo.rollout_correction", active=True, uses_cap=False,
                               uses_floor=False)
OFF_POLICY_MASKS = Registry("algo.off_policy_mask", active=True)


@OLD_LOGPROBS.register("sampler")
def old_logprobs_from_sampler(sampler_logprobs, recompute):
    """pi_old = the sampler's own log-probs of the tokens it chose (no extra forward pass). Under
    rollout_lag they are the behaviour policy's, as the ratio needs; under top_p < 1 they are the
    nucleus-renormalised distribution's, not the policy's. PipelineRL / ScaleRL (Khatri et al.
    2025, arXiv 2510.13786) train on the sampler's log-probs."""
    return sampler_logprobs


@OLD_LOGPROBS.register("recompute", trainer_forward=True, exact_under_top_p=True)
def old_logprobs_recomputed(sampler_logprobs, recompute):
    """pi_old = a teacher-forced forward pass of the trainer before the step's first update (verl,
    OpenRLHF): the trainer's numerics, so the sampler/trainer mismatch can be measured and
    corrected (algo.rollout_correction; Yao et al. 2025, "Your Efficient RL Framework Secretly
    Brings You Off-Policy RL Training")."""
    return recompute()


@ROLLOUT_CORRECTIONS.register("none", active=False)
def no_rollout_correction(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """No correction: every token's loss weight is 1, as in PPO's original setting where sampler
    and learner are one network (Schulman et al. 2017, arXiv 1707.06347)."""
    return None


def mismatch_log_ratio(logp_train: torch.Tensor, logp_sampler: torch.Tensor,
                       mask: torch.Tensor) -> torch.Tensor:
    """log rho^mis_t = log pi_trainer(y_t) - log pi_sampler(y_t), 0 on padding (B, T)."""
    return (logp_train - logp_sampler) * mask


@ROLLOUT_CORRECTIONS.register("tis", uses_cap=True)
def compute_tis_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Truncated importance sampling (TIS): w_t = min(rho^mis_t, C), detached, so the update is

        grad = E_{y ~ pi_sampler} [ min(pi_old,trainer / pi_sampler, C) * grad L_t ]

    Yao et al. 2025 (F. Yao, L. Liu, D. Zhang, C. Dong, J. Shang, J. Gao), "Your Efficient RL
    Framework Secretly Brings You Off-Policy RL Training" (blog, fengyao.notion.site/off-policy-rl,
    Aug 2025; NeurIPS 2025 workshop paper "On the Rollout-Training Mismatch in Modern RL Systems"). verl's rollout_is=token with threshold 2.0 is this weight.
    """
    return torch.exp(mismatch_log_ratio(logp_train, logp_sampler, mask)).clamp(max=cap).detach() * mask


@ROLLOUT_CORRECTIONS.register("mask", uses_cap=True, uses_floor=True)
def compute_mismatch_mask_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Token masking: w_t = 1 if floor <= rho^mis_t <= cap else 0; tokens on which sampler and
    trainer disagree too much get no gradient (their loss weight is zeroed; the aggregation's
    normaliser is unchanged). IcePop, Ling Team 2025, "Every Step Evolves: Scaling RL for
    Trillion-Scale Thinking Model" (Ring-1T, arXiv 2510.18855): band [0.5, 5].
    """
    rho = torch.exp(mismatch_log_ratio(logp_train, logp_sampler, mask))
    return ((rho >= floor) & (rho <= cap)).to(mask.dtype) * mask


def _seq_mismatch_ratio(logp_train, logp_sampler, mask) -> torch.Tensor:
    """(B, 1) rho^mis_i = exp(sum_t log rho^mis_t): the response's probability ratio."""
    return torch.exp(mismatch_log_ratio(logp_train, logp_sampler, mask).sum(-1, keepdim=True))


@ROLLOUT_CORRECTIONS.register("seq_tis", uses_cap=True)
def compute_seq_tis_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Sequence-level truncated IS: every token of response i carries w_i = min(rho^mis_i, C),
    rho^mis_i = prod_t pi_old,trainer(y_t) / pi_sampler(y_t), detached. The unbiased correction of
    a sequence-level objective, truncated (the sequence form of TIS: Yao et al. 2025, "Your
    Efficient RL Framework Secretly Brings You Off-Policy RL Training",
    fengyao.notion.site/off-policy-rl). TRL `vllm_importance_sampling_mode=
    sequence_truncate`, verl `rollout_is=sequence`, OpenRLHF `seq-mask-tis` (its truncation part).
    """
    return _seq_mismatch_ratio(logp_train, logp_sampler, mask).clamp(max=cap).detach() * mask


@ROLLOUT_CORRECTIONS.register("seq_mask", uses_cap=True)
def compute_seq_mask_weight(logp_train, logp_sampler, mask, *, cap: float, floor: float):
    """Sequence masking as TRL's default `vllm_importance_sampling_mode=sequence_mask` does it:
    w_i = rho^mis_i if rho^mis_i <= C else 0 (TRL `vllm_importance_sampling_cap` 3): a response the
    sampler and trainer disagree on by more than C gets no gradient, the others keep their IS
    weight (unlike the token `mask`, IcePop's band, whose kept weight is 1). Detached. The
    sequence-level form of the masking Yao et al. 2025 discuss for the rollout/train mismatch
    (fengyao.notion.site/off-policy-rl); OpenRLHF `seq-mask-tis` masks the same way.
    """
    rho = _seq_mismatch_ratio(logp_train, logp_sampler, mask)
    return torch.where(rho <= cap, rho, torch.zeros_like(rho)).detach() * mask


@OFF_POLICY_MASKS.register("none", active=False)
def no_off_policy_mask(logp, logp_sampler, adv, mask, *, threshold: float):
    """Every response keeps its gradient (no loss-time masking), as in PPO (Schulman et al. 2017,
    arXiv 1707.06347)."""
    return None


@OFF_POLICY_MASKS.register("dsv32")
def compute_dsv32_sequence_mask(logp, logp_sampler, adv, mask, *, threshold: float):
    """DeepSeek-V3.2 off-policy sequence masking (DeepSeek-AI 2025, arXiv 2512.02556, Sec. 3.1):

        M_i = 0 if A_i < 0 and (1/|o_i|) sum_t log(pi_sampler(o_t) / pi_theta(o_t)) > delta, else 1

    pi_sampler is the inference engine's policy (the sampler's log-probs), pi_theta the current one
    (detached): a response that is both bad and far off-policy, from either the optimizer's drift
    or the rollout/train mismatch, is dropped. As TRL `get_off_policy_mask`
    (`off_policy_mask_threshold`; A_i >= 0 is kept). Returns (B, 1) keep weights.
    """
    n = mask.sum(-1, keepdim=True).clamp(min=1)
    seq_kl = ((logp_sampler - logp.detach()) * mask).sum(-1, keepdim=True) / n
    a_seq = (adv * mask).sum(-1, keepdim=True)
    return ((a_seq >= 0) | (seq_kl <= threshold)).to(mask.dtype)
