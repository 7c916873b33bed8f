"""Stage 3 of a step: K epochs x M minibatches of whole groups, one optimizer update each, and the
update's gradient accumulated over micro-batches (`policy_backward`).

The loop hands `policy_backward` one minibatch (whole groups). The token weights of the aggregation
(and of every other loss term) are computed once over the whole minibatch, then the minibatch is
split into `algo.micro_batches` chunks that are forwarded and back-propagated one at a time. Because
every loss term is `sum(weights * per-token loss)` with weights fixed beforehand, the accumulated
gradient is the gradient of the full minibatch whatever the split (up to float rounding): no
normaliser ever sees a micro-batch (verl #3741 and TRL #2995 are bugs of exactly this kind).

Rows whose every loss term is exactly zero whatever the policy (zero advantage on every token, e.g.
a GRPO group whose samples all got the same reward, and no KL or positive-NLL term) add exactly
zero to the gradient, so they are not forwarded at all: the gradient is the same, and on the
default task about 45% of the rows cost nothing. The logged drift and entropy statistics then cover
the tokens that carry gradient.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

import torch

from .. import algos, distributed, faults
from ..batch import StepBatch, minibatch_rows
from ..config import AlgoCfg
from ..models import sequence_logprobs
from ..moe import RouterTape
from .critic import critic_step
from .finite import check_finite
from .metrics import mismatch_stats
from .parts import Parts


@dataclass
class UpdateStats:
    """The step's updates: per-update losses and grad norms, and policy_backward's sums over all
    of them (`max_*` keys: the maximum)."""
    loss: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    value_loss: list = field(default_factory=list)
    sums: dict = field(default_factory=dict)

    def add(self, st: dict) -> None:
        for k, v in st.items():
            self.sums[k] = max(self.sums.get(k, 0.0), v) if k.startswith("max_") else self.sums.get(k, 0.0) + v


def update(p: Parts, b: StepBatch, n_groups: int, step: int, lag: int, mismatch: dict,
           entropy_coef: float | None = None) -> UpdateStats:
    """Every optimizer update of one step (and the critic's, on the same minibatches). With the
    sampler's log-probs as pi_old and no lag, the first update's ratio is the rollout/train
    mismatch: it is recorded in `mismatch` unless prepare measured it already. `entropy_coef`: the
    step's entropy bonus coefficient (None = algo.entropy_coef)."""
    a, r, o = p.cfg.algo, p.cfg.rollout, p.cfg.optim
    out = UpdateStats()
    for idx in minibatch_rows(n_groups, a.epochs, a.minibatches, r.group_size):
        mb = b.rows(idx)
        p.optimizer.zero_grad(set_to_none=True)
        st = policy_backward(p.policy, mb, a, group_size=r.group_size, max_new_tokens=r.max_new_tokens,
                             temperature=r.temperature, entropy_coef=entropy_coef)
        distributed.sum_gradients(p.policy)  # data parallel: the combined minibatch
        st = distributed.sum_stats(st)
        check_finite("loss", torch.tensor(st["loss"]), step)
        if not out.sums and not mismatch and lag == 0:  # first update, still the sampling weights
            mismatch.update(mismatch_stats(st["abs_log_ratio"], st["tokens"], st["max_abs_log_ratio"]))
        gn = torch.nn.utils.clip_grad_norm_(p.policy.parameters(), o.grad_clip
                                            if o.grad_clip > 0 else float("inf"))
        p.optimizer.step()
        p.scheduler.step()
        faults.point("update", step)  # test-only hooks (faults.py): no-ops unless armed
        if p.lagged is not None:
            p.lagged.record(p.policy)
        out.loss.append(st["loss"])
        out.grad_norm.append(gn.item())
        out.add(st)
        p.meter.trained(p.n_params, mb)
        if p.critic is not None:  # the critic's update on the same minibatch
            critic_step(p, mb, out.value_loss)
    return out


def policy_backward(model, b: StepBatch, a: AlgoCfg, *, group_size: int, max_new_tokens: int,
                    temperature: float, entropy_coef: float | None = None) -> dict:
    """Accumulate d(loss)/d(params) of one minibatch into `.grad` (the caller zeroes and steps).

    loss = sum(w * (c_t * M_i * surrogate_t + kl_coef * kl_t [KL as a loss]))
           - entropy_coef * sum(w * H_t)              [entropy bonus]
           + pos_nll_coef * sum(w_pos * -log pi_t)   [VAPO positive-example LM loss]

    c_t is the rollout/train mismatch correction (algo.rollout_correction; 1 when off), M_i the
    loss-time off-policy sequence mask (algo.off_policy_mask; 1 when off), entropy_coef the step's
    coefficient (argument; None = algo.entropy_coef; moved between steps by algo.entropy_control).
    Under data parallel (harness.distributed) the weights are those of the minibatch of all ranks,
    so summing the ranks' gradients gives the single-process gradient of the combined minibatch.
    Returns sums over the minibatch for logging (the loss itself is exact, not a sum of means);
    the statistics cover the rows that were forwarded (see `inert_rows`).
    """
    # every normaliser over the whole minibatch: of this process, or of all data-parallel ranks
    w = distributed.global_weights(lambda m: algos.AGGREGATIONS[a.aggregation](
        m, group_size=group_size, max_new_tokens=max_new_tokens), b.loss_mask)      # (B, T)
    w_pos = distributed.global_weights(  # VAPO: the correct rows' mask, token-mean weights
        lambda m: algos.positive_nll_weights(m, torch.ones(len(m), dtype=torch.bool, device=m.device)),
        b.loss_mask * b.correct.float().unsqueeze(-1)) \
        if a.pos_nll_coef > 0 else None
    kl_fn = algos.KL_ESTIMATORS[a.kl] if algos.KL_ESTIMATORS.meta(a.kl).needs_reference else None
    kl_coef_loss = a.kl_coef if algos.KL_MODES.meta(a.kl_mode).in_loss else 0.0
    knobs = algos.surrogate_knobs(a.surrogate, a)
    ratio_weight = algos.RATIOS.meta(a.ratio).loss_weight
    opm_fn = algos.OFF_POLICY_MASKS[a.off_policy_mask] \
        if algos.OFF_POLICY_MASKS.meta(a.off_policy_mask).active else None
    st = {"loss": 0.0, "tokens": 0.0, "clipped": 0.0, "entropy": 0.0, "abs_log_ratio": 0.0,
          "max_abs_log_ratio": 0.0, "approx_kl": 0.0, "kl_ref": 0.0, "pos_nll": 0.0}
    ent_coef = a.entropy_coef if entropy_coef is None else entropy_coef
    # an adaptive coefficient measures the entropy of every loss token, whatever its value now
    skip = inert_rows(b, w, w_pos, a, entropy_acts=ent_coef > 0 or
                      algos.ENTROPY_CONTROLS.meta(a.entropy_control).adaptive)
    forwarded = False
    keep = ~skip.cpu()  # row indices stay on the CPU (they index the device tensors fine)
    for j in torch.arange(len(b)).chunk(a.micro_batches):
        j = j[keep[j]]
        if len(j) == 0:
            continue
        forwarded = True
        micro = b.rows(j)
        m = micro.loss_mask
        routing = None if micro.routing_prompt is None else (  # MoE: replay or measure routing
            micro.routing_prompt, micro.routing_resp, algos.ROUTING_REPLAYS[a.routing_replay])
        logp, ent = sequence_logprobs(model, micro.prompt_ids, micro.prompt_mask, micro.response_ids,
                                      micro.response_mask, temperature, with_entropy=True,
                                      routing=routing)
        if routing is not None:  # tokens whose expert set differs from the sampler's
            changed, counted = RouterTape.attach(model).last
            st["routing_changed"] = st.get("routing_changed", 0.0) + changed
            st["routing_counted"] = st.get("routing_counted", 0.0) + counted
        log_ratio = algos.RATIOS[a.ratio](logp, micro.logp_old, m)
        out = algos.SURROGATES[a.surrogate](log_ratio, micro.adv, logp, mask=m, **knobs)
        token_loss = out.loss if micro.correction is None else out.loss * micro.correction
        if ratio_weight is not None:  # a ratio whose weight acts outside the clip (MinPRO reading)
            token_loss = token_loss * ratio_weight(logp, micro.logp_old, m)
        if opm_fn is not None:  # loss-time sequence mask (DeepSeek-V3.2), from the current policy
            keep = opm_fn(logp, micro.logp_sampler, micro.adv, m, threshold=a.off_policy_mask_threshold)
            token_loss = token_loss * keep
            has = (m.sum(-1) > 0).float()
            st["opm_masked"] = st.get("opm_masked", 0.0) + ((1 - keep.squeeze(-1)) * has).sum().item()
            st["opm_seqs"] = st.get("opm_seqs", 0.0) + has.sum().item()
        if kl_fn is not None:
            kl = kl_fn(logp, micro.logp_ref)
            if kl_coef_loss > 0:  # in the reward, the estimate is only logged here
                token_loss = token_loss + kl_coef_loss * kl
            st["kl_ref"] += (kl.detach() * m).sum().item()
        loss = (token_loss * w[j]).sum()
        if ent_coef > 0:  # entropy bonus, aggregated like the policy loss (verl)
            ent_term = (ent * m * w[j]).sum()
            loss = loss - ent_coef * ent_term
            st["entropy_bonus"] = st.get("entropy_bonus", 0.0) + ent_term.item()
        if w_pos is not None:
            nll = (-logp * w_pos[j]).sum()
            loss = loss + a.pos_nll_coef * nll
            st["pos_nll"] += nll.item()
        loss.backward()
        # drift statistics on the token ratio pi / pi_old, whatever ratio the surrogate uses
        tok_lr = ((logp.detach() - micro.logp_old) * m)
        st["loss"] += loss.item()
        st["tokens"] += m.sum().item()
        st["clipped"] += (out.clipped.float() * m).sum().item()
        st["entropy"] += (ent.detach() * m).sum().item()
        st["abs_log_ratio"] += tok_lr.abs().sum().item()
        st["max_abs_log_ratio"] = max(st["max_abs_log_ratio"], tok_lr.abs().max().item())
        st["approx_kl"] += (((tok_lr.exp() - 1) - tok_lr) * m).sum().item()  # k3 of KL(pi_old||pi)
    if not forwarded:  # an all-zero gradient, as a backward pass would have left (Adam still steps)
        for p in model.parameters():
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    return st


def inert_rows(b: StepBatch, w: torch.Tensor, w_pos: Optional[torch.Tensor], a: AlgoCfg,
               entropy_acts: bool | None = None) -> torch.Tensor:
    """(B,) bool: rows that add exactly zero to the loss and its gradient whatever the policy, so
    `policy_backward` need not forward them. A row is inert when no KL term is configured, its
    positive-NLL weights are zero, and either its aggregation weights are all zero or its advantage
    is zero on every token, no entropy bonus acts, and the surrogate vanishes identically at A = 0
    (checked on the registered function, `_vanishes_at_zero_advantage`). Ratios are per row, so
    skipping a row changes no other row's loss."""
    none = torch.zeros(len(b), dtype=torch.bool)
    if entropy_acts is None:  # whether an entropy bonus acts (or is measured for its control)
        entropy_acts = a.entropy_coef > 0
    if algos.KL_ESTIMATORS.meta(a.kl).needs_reference:
        return none
    inert = (w == 0).all(-1)
    knobs = tuple(sorted(algos.surrogate_knobs(a.surrogate, a).items()))
    if not entropy_acts and _vanishes_at_zero_advantage(a.surrogate, knobs):
        inert |= (b.adv == 0).all(-1)
    if w_pos is not None:
        inert &= (w_pos == 0).all(-1)
    return inert


@functools.lru_cache(maxsize=None)
def _vanishes_at_zero_advantage(surrogate: str, knobs: tuple) -> bool:
    """Whether the surrogate's token loss and its gradient are exactly 0 where A = 0, probed on
    ratios inside and outside the clip range (true of every registered surrogate: each is a
    multiple of A). `knobs`: the surrogate's (key, value) pairs, sorted."""
    logp = torch.tensor([[-0.1, -0.7, -1.5, -3.0, -6.0]], requires_grad=True)
    log_ratio = torch.tensor([[0.0, 0.05, -0.5, 0.5, 2.0]]) + logp - logp.detach()
    out = algos.SURROGATES[surrogate](log_ratio, torch.zeros_like(logp), logp,
                                      mask=torch.ones_like(logp), **dict(knobs))
    (grad,) = torch.autograd.grad(out.loss.sum(), logp, allow_unused=True)
    return bool((out.loss == 0).all()) and (grad is None or bool((grad == 0).all()))
