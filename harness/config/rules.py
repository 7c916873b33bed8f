"""Combination rules: a config whose values are each valid can still be wrong or meaningless as a
whole. `validate(cfg)` runs one small check per section, in order; the first broken rule raises
`ConfigError` with one line, never a warning, and nothing is silently changed.

Two kinds of rule:
- a combination that cannot work (vLLM on the CPU, minibatches that split a group, ...);
- a key that has no effect under the chosen values must keep its default (`clip_high` under a
  surrogate without a clip, `adv_eps` under an estimator without a std, LoRA keys without LoRA,
  the warm-up's knobs when it does not run, ...): a record that shows a setting which did nothing
  would mislead its reader. docs/algorithms.md ("Keys that have no effect") lists every decision.

Rules ask the registries' properties (`algos.*`, `engines.ENGINES`, `tasks.TASKS`,
`scales.SCALES`), never a choice's name; each task's own rules are its `check` property.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .. import algos
from ..engines import ENGINES
from ..registry import suggest
from ..scales import SCALES, from_path
from ..tasks import COMMON_KEYS, TASKS
from .schema import (NAME_RE, AlgoCfg, Config, ConfigError, ModelCfg, OfflineCfg, RolloutCfg,
                     TaskCfg, WarmupCfg)

LORA_KEYS = ("lora_alpha", "lora_dropout", "lora_target_modules")
TINY_MODEL_KEYS = ("arch", "max_positions")  # shape a model built from a config, not a checkpoint
CRITIC_KEYS = ("gamma", "lam_policy", "lam_critic", "lam_alpha", "critic_lr", "value_pretrain_steps")
# every algo.* knob some surrogate reads (its `keys` property), in the schema's order
SURROGATE_KEYS = tuple(f.name for f in dataclasses.fields(AlgoCfg)
                       if any(f.name in algos.SURROGATES.meta(n).keys for n in algos.SURROGATES))
# the algo.* keys the offline paradigm reads; every other algo key belongs to the RL objective
OFFLINE_ALGO_KEYS = ("preset", "paradigm", "offline_loss", *algos.OFFLINE_KEYS, "epochs",
                     "minibatches", "fp32_lm_head", "deviates_from_preset")
ONLINE_ALGO_KEYS = tuple(f.name for f in dataclasses.fields(AlgoCfg) if f.name not in OFFLINE_ALGO_KEYS)
# rollout.* keys of the online sampler that the offline paradigm does not read
# (prompts_per_step = preference pairs per step and max_new_tokens = the self-play limit do act)
ONLINE_ROLLOUT_KEYS = ("group_size", "temperature", "top_p")
# the warm-up's knobs that act only while it trains (target_pass_rate and seed: see check_warmup)
WARMUP_LOOP_KEYS = ("min_steps", "lr", "batch_size", "check_every", "check_items")


def _default(section: type, key: str) -> Any:
    return getattr(section(), key)


def _unused(prefix: str, obj: Any, section: type, keys, why: str) -> None:
    """Each of `keys` must keep its default: under the chosen values it has no effect."""
    for key in keys:
        value = getattr(obj, key)
        if value != _default(section, key):
            raise ConfigError(f"{prefix}.{key} = {value!r}: {why}")


def _names(reg, **props) -> str:
    return " or ".join(reg.where(**props))


# ------------------------------------------------------------------------------------------------
# Per-section checks (in the order validate runs them)
# ------------------------------------------------------------------------------------------------
def check_choices(cfg: Config) -> None:
    """Every registry-backed algo.* field names a registered choice."""
    for f in dataclasses.fields(AlgoCfg):
        reg_name = f.metadata.get("choices_from")
        if reg_name and reg_name != "presets":
            reg = algos.REGISTRIES[reg_name]
            value = getattr(cfg.algo, f.name)
            if value not in reg:
                raise ConfigError(f"algo.{f.name} = {value!r}: allowed values are "
                                  f"{', '.join(reg.names())}" + suggest(value, reg.names()))


def check_run(cfg: Config) -> None:
    for key in ("results_dir", "cache_dir"):  # empty would write into the working directory
        if not getattr(cfg.run, key).strip():
            raise ConfigError(f"run.{key} = {getattr(cfg.run, key)!r}: must name a directory "
                              f"(default {_default(type(cfg.run), key)!r})")
    for key in ("name", "sweep"):  # they name directories under run.results_dir: no escaping it
        v = getattr(cfg.run, key)
        if v and not re.fullmatch(NAME_RE, v):
            raise ConfigError(f"run.{key} = {v!r}: letters, digits and _ . + - only, not starting "
                              f"with '.' (it names a directory under run.results_dir)")


def check_model(cfg: Config) -> None:
    """Where the weights come from, numerics and LoRA."""
    m = cfg.model
    loads = _names(SCALES, from_path=True)
    if from_path(m.scale):
        if not m.path:
            raise ConfigError(f"model.path = None: required when model.scale = {m.scale}")
        _unused("model", m, ModelCfg, TINY_MODEL_KEYS,
                f"only used by the tiny models built from a config (model.scale = "
                f"{', '.join(SCALES.where(from_path=False))}), not model.scale = {m.scale}")
    elif m.path:
        raise ConfigError(f"model.path = {m.path!r}: only allowed with model.scale = {loads} "
                          f"(got {m.scale})")
    if SCALES.meta(m.scale).moe:  # a Mixture-of-Experts shape is a Qwen2-MoE whatever the arch
        _unused("model", m, ModelCfg, ("arch",), f"no effect with model.scale = {m.scale} (a "
                f"Qwen2-MoE model)")
    if m.param_dtype == "bf16" and m.dtype != "bf16":
        raise ConfigError("model.param_dtype = 'bf16': needs model.dtype = bf16 (bf16 weights under "
                          "fp32 compute would only add casts)")
    if m.lora_rank == 0:
        _unused("model", m, ModelCfg, LORA_KEYS, "only used with LoRA (model.lora_rank > 0)")
    if not m.lora_target_modules or not all(isinstance(x, str) and x for x in m.lora_target_modules):
        raise ConfigError(f"model.lora_target_modules = {m.lora_target_modules!r}: expected a "
                          f"non-empty list of module names, e.g. [q_proj, v_proj]")


def check_engine(cfg: Config) -> None:
    """The rollout engine's properties (ENGINES) against the device and the algo keys."""
    name, a = cfg.rollout.engine, cfg.algo
    engine = ENGINES.meta(name)
    if engine.needs_cuda and cfg.run.device == "cpu":
        raise ConfigError(f"rollout.engine = {name!r}: the {name} engine needs a CUDA device; set "
                          f"run.device = cuda (or auto)")
    if engine.own_weights and a.rollout_lag > 0:
        raise ConfigError(f"algo.rollout_lag = {a.rollout_lag}: the simulated lag keeps a second "
                          f"HF model as sampler; use rollout.engine = {_names(ENGINES, own_weights=False)}")
    if a.fp32_lm_head and not engine.fp32_lm_head:
        raise ConfigError(f"algo.fp32_lm_head = true: the {name} engine computes its LM head in the "
                          f"model's dtype, so the switch would reach the trainer only; use "
                          f"rollout.engine = {_names(ENGINES, fp32_lm_head=True)}, or fp32_lm_head = "
                          f"false (and algo.rollout_correction)")
    if not engine.uses_gpu_memory_utilization:
        _unused("rollout", cfg.rollout, RolloutCfg, ("gpu_memory_utilization",),
                f"only used with rollout.engine = {_names(ENGINES, uses_gpu_memory_utilization=True)}")


def check_task(cfg: Config) -> None:
    """(a) a task.* key the chosen task does not read keeps its default; (b) the task's own rules."""
    t = cfg.task
    entry = TASKS.meta(t.name)
    for f in dataclasses.fields(TaskCfg):
        key = f.name
        if key in COMMON_KEYS or key in entry.keys:
            continue
        if getattr(t, key) != _default(TaskCfg, key):
            readers = [n for n in TASKS.names() if key in TASKS.meta(n).keys]
            raise ConfigError(f"task.{key} = {getattr(t, key)!r}: only used with task.name = "
                              f"{' or '.join(readers)}")
    msg = entry.check(cfg) if entry.check else None
    if msg:
        raise ConfigError(msg)


def check_eval(cfg: Config) -> None:
    """eval.held_out_sets names sets the task has (asked of the task: a fixed table, or for math
    the names task.held_out_paths defines), each once and not the one task.held_out evaluates."""
    entry = TASKS.meta(cfg.task.name)
    sets, allowed = cfg.eval.held_out_sets, tuple(entry.held_out_sets(cfg))
    for i, name in enumerate(sets):
        if not isinstance(name, str) or name not in allowed:
            raise ConfigError(f"eval.held_out_sets = {sets!r}: {name!r} is not a held-out set of "
                              f"task.name = {cfg.task.name} (allowed: {', '.join(allowed) or 'none'}"
                              f"{entry.held_out_sets_from})")
        if name in sets[:i] or ("held_out" in entry.keys and name == cfg.task.held_out):
            raise ConfigError(f"eval.held_out_sets = {sets!r}: {name!r} is listed twice (or is "
                              f"task.held_out, already evaluated as held_out)")
    if cfg.eval.temperature == 0:
        for s in ("in_dist", "held_out"):
            if getattr(cfg.eval, s).k != 1:
                raise ConfigError(f"eval.{s}.k = {getattr(cfg.eval, s).k}: greedy eval "
                                  f"(eval.temperature = 0) is deterministic, so k must be 1")


def check_warmup(cfg: Config) -> None:
    """With warmup.max_steps = 0 the supervised loop never runs: its knobs do nothing. Kept:
    target_pass_rate (recorded with a tiny warm start; the tests' tiny config sets 0 = no target)
    and, for a tiny model, seed (it seeds the random init)."""
    w = cfg.warmup
    if w.max_steps == 0:
        why = "the warm-up does not train when warmup.max_steps = 0"
        _unused("warmup", w, WarmupCfg, WARMUP_LOOP_KEYS, why)
        _unused("task", cfg.task, TaskCfg, ("held_out_in_warmup",), why)
        if from_path(cfg.model.scale):
            _unused("warmup", w, WarmupCfg, ("seed",), f"model.scale = {cfg.model.scale} with "
                    f"warmup.max_steps = 0 starts from model.path itself (no warm start is built)")
    elif w.min_steps > w.max_steps:
        raise ConfigError(f"warmup.min_steps = {w.min_steps}: must be <= warmup.max_steps "
                          f"({w.max_steps})")


def check_rollout(cfg: Config) -> None:
    """Batch shape: minibatches hold whole groups; group-relative estimators need groups."""
    r, a = cfg.rollout, cfg.algo
    if r.think_budget == 0:
        _unused("rollout", r, RolloutCfg, ("interrupt_phrase",), "only used when "
                "rollout.think_budget > 0 (forced length interruptions are off)")
    elif r.think_budget >= r.max_new_tokens:
        raise ConfigError(f"rollout.think_budget = {r.think_budget}: must be < "
                          f"rollout.max_new_tokens ({r.max_new_tokens}), which leaves the answer's "
                          f"budget after the interruption phrase")
    elif not ENGINES.meta(r.engine).interrupts:
        raise ConfigError(f"rollout.think_budget = {r.think_budget}: rollout.engine = {r.engine} "
                          f"has no forced length interruptions; use "
                          f"{_names(ENGINES, interrupts=True)}")
    if a.minibatches > r.prompts_per_step:
        raise ConfigError(f"algo.minibatches = {a.minibatches}: must be <= "
                          f"rollout.prompts_per_step ({r.prompts_per_step}); minibatches "
                          f"split by prompt so groups stay whole")
    if r.prompts_per_step % a.minibatches:
        raise ConfigError(f"algo.minibatches = {a.minibatches}: must divide "
                          f"rollout.prompts_per_step ({r.prompts_per_step}, "
                          f"{r.prompts_per_step * r.group_size} sequences) so every minibatch holds "
                          f"whole groups")
    seqs_per_mb = r.prompts_per_step // a.minibatches * r.group_size
    if a.micro_batches > seqs_per_mb:
        raise ConfigError(f"algo.micro_batches = {a.micro_batches}: must be <= the sequences per "
                          f"minibatch ({seqs_per_mb})")
    if algos.ADVANTAGES.meta(a.advantage).needs_group and r.group_size < 2:
        raise ConfigError(f"rollout.group_size = {r.group_size}: advantage {a.advantage!r} needs "
                          f"groups of >= 2 samples per prompt")
    if not algos.OLD_LOGPROBS.meta(a.old_logprobs).exact_under_top_p and r.top_p < 1.0:
        raise ConfigError(f"algo.old_logprobs = {a.old_logprobs!r}: the sampler's log-probs under "
                          f"top_p = {r.top_p} are not the policy's; use old_logprobs="
                          f"{_names(algos.OLD_LOGPROBS, exact_under_top_p=True)}")
    if a.overlong_cache >= r.max_new_tokens:
        raise ConfigError(f"algo.overlong_cache = {a.overlong_cache}: must be < "
                          f"rollout.max_new_tokens ({r.max_new_tokens}), the L_max of the soft "
                          f"overlong punishment")


def check_objective(cfg: Config) -> None:
    """Advantage, ratio, surrogate and aggregation: the keys each one reads, and how they combine."""
    a = cfg.algo
    adv = algos.ADVANTAGES.meta(a.advantage)
    sur = algos.SURROGATES.meta(a.surrogate)
    agg = algos.AGGREGATIONS.meta(a.aggregation)
    ratio_const = algos.RATIOS.meta(a.ratio).constant_per_response
    if (ratio_const or sur.constant_per_response) and agg.weights_by_length \
            and not agg.length_weight_intended:
        what = f"algo.ratio = {a.ratio!r}" if ratio_const else f"algo.surrogate = {a.surrogate!r}"
        raise ConfigError(f"algo.aggregation = {a.aggregation!r}: with {what} every "
                          f"token of a response carries the same response-level term, so this "
                          f"aggregation weights each response by its length; use seq_mean_token_mean "
                          f"(or {_names(algos.AGGREGATIONS, length_weight_intended=True)}, LUSPO's "
                          f"deliberate length weight)")
    if sur.token_ratio_only and ratio_const:
        raise ConfigError(f"algo.ratio = {a.ratio!r}: surrogate {a.surrogate!r} needs the per-token "
                          f"log-ratio (it clips each token before averaging); use a per-token ratio")
    if not adv.uses_eps:
        _unused("algo", a, AlgoCfg, ("adv_eps",), f"advantage {a.advantage!r} divides by no std "
                f"(adv_eps acts with {', '.join(algos.ADVANTAGES.where(uses_eps=True))})")
    for key in SURROGATE_KEYS:  # the knobs of other surrogates keep their defaults
        if key not in sur.keys and getattr(a, key) != _default(AlgoCfg, key):
            readers = [n for n in algos.SURROGATES.names() if key in algos.SURROGATES.meta(n).keys]
            raise ConfigError(f"algo.{key} = {getattr(a, key)!r}: surrogate {a.surrogate!r} does not "
                              f"read it (read by {', '.join(readers)})")
    if 0 < a.dual_clip <= 1:
        raise ConfigError(f"algo.dual_clip = {a.dual_clip}: must be > 1 (or 0 = off); the floor "
                          f"c*A binds only where the ratio exceeds c")
    if not sur.uses_ratio:
        if a.ratio != _default(AlgoCfg, "ratio"):
            raise ConfigError(f"algo.ratio = {a.ratio!r}: surrogate {a.surrogate!r} uses no "
                              f"importance ratio; leave algo.ratio = {_default(AlgoCfg, 'ratio')}")
        if a.epochs * a.minibatches > 1:
            raise ConfigError(f"algo.minibatches = {a.minibatches}, algo.epochs = {a.epochs}: surrogate "
                              f"{a.surrogate!r} has no importance ratio, so every update after the "
                              f"first would use off-policy samples uncorrected; use 1 and 1")


def check_critic(cfg: Config) -> None:
    a = cfg.algo
    if not algos.ADVANTAGES.meta(a.advantage).needs_critic:
        _unused("algo", a, AlgoCfg, CRITIC_KEYS, f"only used with a critic (algo.advantage = "
                f"{_names(algos.ADVANTAGES, needs_critic=True)}), not {a.advantage!r}")
    if a.lam_alpha > 0 and a.lam_policy != _default(AlgoCfg, "lam_policy"):
        raise ConfigError(f"algo.lam_policy = {a.lam_policy}: unused when algo.lam_alpha = "
                          f"{a.lam_alpha} (length-adaptive lambda_policy); leave it at its default")


def check_kl(cfg: Config) -> None:
    a = cfg.algo
    kl = algos.KL_ESTIMATORS.meta(a.kl)
    if not kl.needs_reference:
        if a.kl_coef > 0:
            raise ConfigError(f"algo.kl_coef = {a.kl_coef}: algo.kl = {a.kl} (no KL term); set an "
                              f"estimator ({', '.join(algos.KL_ESTIMATORS.where(needs_reference=True))}) "
                              f"or kl_coef = 0")
        _unused("algo", a, AlgoCfg, ("kl_mode",), f"algo.kl = {a.kl} (no KL term)")
        return
    if a.kl_coef == 0:
        raise ConfigError(f"algo.kl_coef = 0.0: algo.kl = {a.kl!r} needs a coefficient > 0 (or "
                          f"algo.kl = none, which also skips the reference model)")
    if not kl.gradient_as_loss and algos.KL_MODES.meta(a.kl_mode).in_loss:
        raise ConfigError(f"algo.kl = {a.kl!r}: as a loss term its expected gradient is zero "
                          "(E_pi[grad log pi] = 0), so it regularises nothing; use kl_mode = reward, "
                          "or k2/k3 as a loss")


def check_off_policy(cfg: Config) -> None:
    """pi_old, the simulated rollout lag and the rollout/train mismatch correction."""
    a = cfg.algo
    old = algos.OLD_LOGPROBS.meta(a.old_logprobs)
    if a.rollout_lag > 0 and old.trainer_forward:
        raise ConfigError(f"algo.old_logprobs = {a.old_logprobs!r}: with algo.rollout_lag = "
                          f"{a.rollout_lag} pi_old must be the behaviour policy (sampler); a "
                          f"recomputed pi_old would leave the lag uncorrected")
    if a.rollout_lag > 0 and not algos.SURROGATES.meta(a.surrogate).uses_ratio:
        raise ConfigError(f"algo.rollout_lag = {a.rollout_lag}: surrogate {a.surrogate!r} has no "
                          f"importance ratio to correct stale rollouts; use 0")
    if not algos.OFF_POLICY_MASKS.meta(a.off_policy_mask).active:
        _unused("algo", a, AlgoCfg, ("off_policy_mask_threshold",), f"only used when "
                f"algo.off_policy_mask is {_names(algos.OFF_POLICY_MASKS, active=True)} (it is "
                f"{a.off_policy_mask})")
    corr = algos.ROLLOUT_CORRECTIONS.meta(a.rollout_correction)
    if corr.active and not old.trainer_forward:
        raise ConfigError(f"algo.rollout_correction = {a.rollout_correction!r}: needs algo.old_logprobs "
                          f"= {', '.join(algos.OLD_LOGPROBS.where(trainer_forward=True))} (with the "
                          f"sampler's log-probs as pi_old the PPO ratio already "
                          f"is pi / pi_sampler, and there is no trainer pi_old to correct)")
    if not corr.uses_cap:
        _unused("algo", a, AlgoCfg, ("rollout_correction_cap",), f"only used when "
                f"algo.rollout_correction is {_names(algos.ROLLOUT_CORRECTIONS, uses_cap=True)} "
                f"(it is {a.rollout_correction})")
    if not corr.uses_floor:
        floor = _names(algos.ROLLOUT_CORRECTIONS, uses_floor=True)
        _unused("algo", a, AlgoCfg, ("rollout_correction_floor",), f"only used when "
                f"algo.rollout_correction is {floor} (it is {a.rollout_correction}); the floor is "
                f"used by {floor}")


def check_filter(cfg: Config) -> None:
    a = cfg.algo
    if algos.ADV_BATCH_SCOPES.meta(a.adv_batch_scope).counts_dropped:
        adv = algos.ADVANTAGES.meta(a.advantage)
        if not algos.GROUP_FILTERS.meta(a.group_filter).drops:
            raise ConfigError(f"algo.adv_batch_scope = {a.adv_batch_scope!r}: no effect with "
                              f"algo.group_filter = {a.group_filter} (nothing is dropped)")
        if adv.group_local:
            raise ConfigError(f"algo.adv_batch_scope = {a.adv_batch_scope!r}: advantage "
                              f"{a.advantage!r} is a function of each group alone (no batch statistic)")
        if adv.needs_critic or algos.KL_ESTIMATORS.meta(a.kl).needs_reference:
            raise ConfigError(f"algo.adv_batch_scope = {a.adv_batch_scope!r}: the dropped groups "
                              f"would need critic values / reference log-probs; use kept with "
                              f"advantage {a.advantage!r} or algo.kl = {a.kl}")
    if algos.ROUTING_REPLAYS.meta(a.routing_replay).replays:
        if not SCALES.meta(cfg.model.scale).moe:
            raise ConfigError(f"algo.routing_replay = {a.routing_replay!r}: model.scale = "
                              f"{cfg.model.scale} is dense (no router to replay); use "
                              f"{_names(SCALES, moe=True)}")
        if not ENGINES.meta(cfg.rollout.engine).records_routing:
            raise ConfigError(f"algo.routing_replay = {a.routing_replay!r}: rollout.engine = "
                              f"{cfg.rollout.engine} does not record the experts it chose"
                              f"{ENGINES.meta(cfg.rollout.engine).routing_why}; use "
                              f"{_names(ENGINES, records_routing=True)}")
    if algos.RETIREMENTS.meta(a.retire).active and cfg.task.train_items == 0:
        raise ConfigError(f"algo.retire = {a.retire!r}: needs a finite, cycling training set "
                          f"(task.train_items > 0); the default stream never repeats an item")
    if not algos.RETIREMENTS.meta(a.retire).active:
        _unused("algo", a, AlgoCfg, ("retire_threshold",), f"only used when algo.retire is "
                f"{_names(algos.RETIREMENTS, active=True)} (it is {a.retire})")
    if not algos.ENTROPY_CONTROLS.meta(a.entropy_control).adaptive:
        _unused("algo", a, AlgoCfg, ("entropy_target", "entropy_coef_step", "entropy_coef_max"),
                f"only used when algo.entropy_control is "
                f"{_names(algos.ENTROPY_CONTROLS, adaptive=True)} (it is {a.entropy_control})")
    elif a.entropy_coef > a.entropy_coef_max:
        raise ConfigError(f"algo.entropy_coef = {a.entropy_coef}: the start value of an adaptive "
                          f"coefficient must be <= algo.entropy_coef_max ({a.entropy_coef_max})")
    if a.max_gen_rounds > 1 and not algos.GROUP_FILTERS.meta(a.group_filter).drops:
        raise ConfigError(f"algo.max_gen_rounds = {a.max_gen_rounds}: refilling needs a filter "
                          f"(algo.group_filter = {_names(algos.GROUP_FILTERS, drops=True)}); with "
                          f"{a.group_filter} every round is kept")


def check_paradigm(cfg: Config) -> None:
    """Online vs offline (algo.paradigm): an offline loss only under the offline paradigm, which
    needs a finite training split; each side's keys keep their defaults on the other side."""
    a, off = cfg.algo, cfg.offline
    loss = algos.OFFLINE_LOSSES.meta(a.offline_loss)
    offline_names = _names(algos.PARADIGMS, offline=True)
    if not algos.PARADIGMS.meta(a.paradigm).offline:
        if loss.active:
            raise ConfigError(f"algo.offline_loss = {a.offline_loss!r}: an offline loss needs "
                              f"algo.paradigm = {offline_names} (it is {a.paradigm})")
        why = f"only used by the offline paradigm (algo.paradigm = {offline_names})"
        _unused("algo", a, AlgoCfg, algos.OFFLINE_KEYS, why)
        _unused("offline", off, OfflineCfg, [f.name for f in dataclasses.fields(OfflineCfg)], why)
        return
    if not loss.active:
        raise ConfigError(f"algo.offline_loss = {a.offline_loss!r}: algo.paradigm = {a.paradigm} "
                          f"needs an offline loss ({', '.join(algos.OFFLINE_LOSSES.where(active=True))})")
    if off.n_prompts == 0:
        raise ConfigError(f"offline.n_prompts = 0: algo.paradigm = {a.paradigm} trains on a finite "
                          f"training split (the prompts the self-play stage samples); set "
                          f"offline.n_prompts > 0")
    for key in algos.OFFLINE_KEYS:
        if key not in loss.keys and getattr(a, key) != _default(AlgoCfg, key):
            readers = [n for n in algos.OFFLINE_LOSSES.names() if key in algos.OFFLINE_LOSSES.meta(n).keys]
            raise ConfigError(f"algo.{key} = {getattr(a, key)!r}: offline loss {a.offline_loss!r} "
                              f"does not read it (read by {', '.join(readers)})")
    if not loss.selfplay:
        _unused("offline", off, OfflineCfg, ("samples", "temperature", "seed"),
                f"offline loss {a.offline_loss!r} trains on the reference answers (no self-play)")
    why = f"the offline paradigm does not run the RL objective (algo.paradigm = {a.paradigm})"
    _unused("algo", a, AlgoCfg, ONLINE_ALGO_KEYS, why)
    _unused("rollout", cfg.rollout, RolloutCfg, ONLINE_ROLLOUT_KEYS,
            f"{why}; the self-play stage samples with offline.samples and offline.temperature")


CHECKS = (check_choices, check_paradigm, check_run, check_model, check_engine, check_task, check_eval, check_warmup,
          check_rollout, check_objective, check_critic, check_kl, check_off_policy, check_filter)


def validate(cfg: Config) -> None:
    """Invalid combinations raise (the first broken rule, one line); nothing is silently changed."""
    for check in CHECKS:
        check(cfg)
