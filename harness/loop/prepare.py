"""Stage 2 of a step: turn the kept rollout into the update's `StepBatch`.

pi_old (the sampler's log-probs or a recomputed forward pass: `algo.old_logprobs`), the frozen
reference's log-probs (when the KL entry needs a reference), a KL penalty in the reward (when the
KL mode puts it there), the critic's values and targets (when the advantage needs a critic), the
advantages, and the rollout/train mismatch correction. Each is asked of the chosen entry's
properties; nothing branches on a name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import algos
from ..batch import Rollout, StepBatch, loss_mask_of, sampled_mask
from ..models import reference_context, sequence_logprobs
from .critic import critic_targets, explained_variance
from .finite import check_finite
from .metrics import recomputed_mismatch
from .parts import Parts


@dataclass
class Prepared:
    batch: StepBatch
    explained_var: float | None = None
    mismatch: dict = field(default_factory=dict)   # mean / max / weight (metrics.mismatch_stats)


def prepare(p: Parts, ro: Rollout, rewards: torch.Tensor, scores: torch.Tensor, step: int,
            dropped: tuple | None = None) -> Prepared:
    """`dropped`: (response_mask, rewards) of the rows the group filter dropped, when the advantage's
    batch statistics are taken before the filter (algo.adv_batch_scope = sampled)."""
    a, r = p.cfg.algo, p.cfg.rollout
    mask = sampled_mask(ro)                   # (B, T) sampled tokens (a forced phrase is not)
    loss_mask = loss_mask_of(ro, a.mask_truncated)
    out = Prepared(batch=None)

    routing = None if ro.routing_prompt is None else (  # MoE: the sampler's experts, the choice
        ro.routing_prompt, ro.routing_resp, algos.ROUTING_REPLAYS[a.routing_replay])

    def trainer_logprobs() -> torch.Tensor:
        with torch.no_grad():
            logp, _ = sequence_logprobs(p.policy, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                        ro.response_mask, r.temperature, routing=routing)
        p.meter.forward(p.n_params, ro)
        return logp

    logp_old = algos.OLD_LOGPROBS[a.old_logprobs](ro.logprobs, trainer_logprobs)
    correction = None
    if algos.OLD_LOGPROBS.meta(a.old_logprobs).trainer_forward:
        if p.lag == 0:  # trainer vs sampler under the same weights: the mismatch itself
            out.mismatch = recomputed_mismatch(logp_old, ro.logprobs, mask)
        correction = algos.ROLLOUT_CORRECTIONS[a.rollout_correction](
            logp_old, ro.logprobs, mask, cap=a.rollout_correction_cap, floor=a.rollout_correction_floor)
        if correction is not None:
            out.mismatch["weight"] = ((correction * mask).sum() / mask.sum().clamp(min=1)).item()
    logp_ref = token_rewards = None
    if p.reference is not None:  # only when the KL entry needs a reference
        with torch.no_grad(), reference_context(p.reference):
            logp_ref, _ = sequence_logprobs(p.reference, ro.prompt_ids, ro.prompt_mask,
                                            ro.response_ids, ro.response_mask, r.temperature)
        p.meter.forward(p.n_params, ro)
        if algos.KL_MODES.meta(a.kl_mode).in_reward:  # -beta * kl_t per token, at the sampling policy
            token_rewards = algos.KL_MODES[a.kl_mode](algos.KL_ESTIMATORS[a.kl](logp_old, logp_ref),
                                                      mask, a.kl_coef)
    values = value_targets = None
    lam = a.lam_policy
    if p.critic is not None:  # V(s_t) of the critic before this step's updates
        values, value_targets = critic_targets(p, ro, rewards, mask, token_rewards)
        if a.lam_alpha > 0:  # VAPO length-adaptive lambda_policy, one per response
            lam = algos.length_adaptive_lambda(ro.lengths, a.lam_alpha)
    if dropped is not None and len(dropped[1]):  # statistics over kept + dropped rows (no KL, critic)
        all_mask = torch.cat([mask, dropped[0].float()])
        adv = algos.ADVANTAGES[a.advantage](torch.cat([rewards, dropped[1]]), all_mask,
                                            group_size=r.group_size, eps=a.adv_eps)[:len(rewards)]
    else:
        adv = algos.ADVANTAGES[a.advantage](rewards, mask, group_size=r.group_size, eps=a.adv_eps,
                                            token_rewards=token_rewards, values=values,
                                            gamma=a.gamma, lam=lam)
    check_finite("advantage", adv, step)
    if p.critic is not None:
        out.explained_var = explained_variance(values, value_targets, loss_mask)
    out.batch = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                          loss_mask=loss_mask, adv=adv, logp_old=logp_old, correct=scores > 0,
                          logp_ref=logp_ref, value_targets=value_targets, correction=correction,
                          logp_sampler=ro.logprobs if algos.OFF_POLICY_MASKS.meta(
                              a.off_policy_mask).active else None,
                          routing_prompt=ro.routing_prompt, routing_resp=ro.routing_resp)
    return out
