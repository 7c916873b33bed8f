"""The design space: one registry per independent axis, one small pure function per choice.

An algorithm is a preset (YAML data) that picks one name per axis; the loop calls
`ADVANTAGES[cfg.algo.advantage](...)` etc. and asks an entry's properties
(`ADVANTAGES.meta(name).needs_critic`); it never branches on a choice's name.

Shapes: B sequences (= prompts x G, grouped contiguously: rows g*G .. g*G+G-1 share a prompt),
T response tokens. `mask` is (B, T) with 1 on tokens the policy chose.

Every function of an axis shares one signature (each module's docstring has it and its properties):

- advantage   (rewards (B,), mask, *, group_size, eps, token_rewards, values, gamma, lam) -> (B, T)
- ratio       (logp (B,T), logp_old (B,T), mask) -> log importance ratio (B, T)
- surrogate   (log_ratio, adv, logp, *, mask, <the algo keys in its `keys` property>) -> SurrogateOut
- aggregation (mask, *, group_size, max_new_tokens) -> token weights (B, T); loss = sum(w * loss_t)
- kl          (logp, logp_ref) -> per-token estimate of KL(pi || pi_ref) (B, T)
- kl_mode     (kl (B, T), mask, coef) -> token rewards (B, T) or None
- old_logprobs (sampler_logprobs, recompute) -> pi_old (B, T)
- rollout_correction (logp_train, logp_sampler, mask, *, cap, floor) -> token-loss weights or None
- group_filter (scores (B,), group_size) -> (P,) bool, the groups kept
- off_policy_mask (logp, logp_sampler, adv, mask, *, threshold) -> (B, 1) keep weights or None
- adv_batch_scope (response_mask, rewards, kept) -> the dropped rows a batch statistic counts, or None
- retire      (passes (N,), attempts (N,), *, threshold) -> (N,) bool, items of a finite train set never drawn again
- routing_replay (natural (N, k), recorded (N, k)) -> the MoE experts the trainer's forward uses
- entropy_control (coef, entropy, *, target, step, max_coef) -> the next step's entropy-bonus coefficient
- paradigm    online | offline (properties only: `offline`)
- offline_loss (PairLogps, *, <the algo keys in its `keys` property>, state) -> OfflineOut

An axis that can be off (kl, rollout_correction, group_filter, off_policy_mask) has a registered `none` entry with
properties saying what it needs (e.g. `needs_reference=False`), not a string sentinel.
"""

from __future__ import annotations

from ..registry import Registry
from .advantages import (ADVANTAGES, compute_gae, compute_value_targets, length_adaptive_lambda,
                         outcome_token_rewards, overlong_penalty)
from .aggregations import AGGREGATIONS, positive_nll_weights
from .entropy import ENTROPY_CONTROLS
from .filters import ADV_BATCH_SCOPES, GROUP_FILTERS, informative_groups
from .kl import KL_ESTIMATORS, KL_MODES
from .offline import OFFLINE_KEYS, OFFLINE_LOSSES, PARADIGMS, OfflineOut, PairLogps, offline_knobs
from .off_policy import OFF_POLICY_MASKS, OLD_LOGPROBS, ROLLOUT_CORRECTIONS, mismatch_log_ratio
from .ratios import RATIOS
from .retire import RETIREMENTS
from .routing import ROUTING_REPLAYS
from .surrogates import SURROGATES, SurrogateOut, surrogate_knobs

# config field (algo.<axis>) -> its registry
REGISTRIES: dict[str, Registry] = {
    "advantage": ADVANTAGES, "ratio": RATIOS, "surrogate": SURROGATES, "aggregation": AGGREGATIONS,
    "kl": KL_ESTIMATORS, "kl_mode": KL_MODES, "old_logprobs": OLD_LOGPROBS,
    "rollout_correction": ROLLOUT_CORRECTIONS, "group_filter": GROUP_FILTERS,
    "off_policy_mask": OFF_POLICY_MASKS, "adv_batch_scope": ADV_BATCH_SCOPES,
    "retire": RETIREMENTS, "routing_replay": ROUTING_REPLAYS, "entropy_control": ENTROPY_CONTROLS,
    "paradigm": PARADIGMS, "offline_loss": OFFLINE_LOSSES,
}

__all__ = ["OFFLINE_KEYS", "OFFLINE_LOSSES", "PARADIGMS", "OfflineOut", "PairLogps", "offline_knobs",
           "ADV_BATCH_SCOPES", "ADVANTAGES", "AGGREGATIONS", "ENTROPY_CONTROLS", "GROUP_FILTERS", "KL_ESTIMATORS", "KL_MODES",
           "OFF_POLICY_MASKS", "OLD_LOGPROBS", "RETIREMENTS", "ROUTING_REPLAYS", "surrogate_knobs",
           "RATIOS", "REGISTRIES", "ROLLOUT_CORRECTIONS", "SURROGATES", "SurrogateOut", "compute_gae",
           "compute_value_targets", "informative_groups", "length_adaptive_lambda",
           "mismatch_log_ratio", "outcome_token_rewards", "overlong_penalty", "positive_nll_weights"]
