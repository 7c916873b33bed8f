"""The shared RL loop. One function, read top to bottom; every algorithm runs through it.

    prompts -> G samples each -> verifier rewards -> advantages -> K epochs x M minibatch
    policy-gradient steps (ratio, surrogate, aggregation) -> periodic eval -> log, checkpoint

The design choices come from registries named in the config (`harness.algos`); this file never
branches on an algorithm's name. Run it with:

    rlablate train configs/default.yaml train.steps=50
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Callable

import torch
import yaml
from tqdm import tqdm

from . import algos, distributed, faults
from .config import Config, config_from_dict, dump_yaml
from .cpu import tune_malloc
from .critic import ValueModel, explained_variance, value_backward
from .evaluate import evaluate
from .storage import (CheckpointError, MetricsLog, atomic_write_text, file_lock, load_checkpoint_file,
                 remove_stale_tmp, save_checkpoint_file, write_json)
from .models import (count_params, get_tokenizer, is_lora, load_policy_state, policy_state,
                     prepare_policy, reference_context)
from .rollout import make_engine, require_engine, sequence_logprobs
from .tasks import make_task
from .filters import collect_groups, informative_groups, select_rows
from .update import StepBatch, policy_backward
from .warmstart import get_warm_start, load_warm_model


class Diverged(RuntimeError):
    """A non-finite reward, advantage or loss: the run stops with status `diverged`."""

    def __init__(self, what: str, step: int):
        super().__init__(f"non-finite {what} at step {step}")
        self.step = step


class RunInProgress(RuntimeError):
    """Another process holds this run's lock."""


def step_seed(seed: int, step: int) -> int:
    """Each step's randomness is a pure function of (seed, step): resuming from a checkpoint at
    step s replays steps s+1.. exactly, whatever happened before the crash."""
    return (seed * 1_000_003 + step * 7_919) % (2**63 - 1)


def _lr_lambda(cfg: Config, total_updates: int):
    o = cfg.optim

    def f(i: int) -> float:
        if o.warmup_steps and i < o.warmup_steps:
            return (i + 1) / o.warmup_steps
        if o.schedule == "cosine":
            p = (i - o.warmup_steps) / max(1, total_updates - o.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, p)))
        return 1.0
    return f


def _finite(name: str, t: torch.Tensor, step: int) -> None:
    # every rank stops together; poison is test-only (see faults.py)
    if distributed.any_rank(not bool(torch.isfinite(faults.poison(name, step, t)).all())):
        raise Diverged(name, step)


def train(cfg: Config, progress: bool = True, stop_requested: Callable[[], bool] | None = None) -> dict:
    """Run (or resume) the run described by `cfg`; returns its summary. `stop_requested` (issue 14:
    the sweep job's USR2) is polled after each step: when true, the loop saves a checkpoint and the
    summary (status running) and returns it as status `interrupted`, stop_reason `preempted`."""
    run_dir = cfg.run_dir()
    dp = distributed.setup("cuda" if cfg.run.device != "cpu" and torch.cuda.is_available() else "cpu")
    ckpt_dir = run_dir / "checkpoints"  # rank 0 writes it; every rank resumes from it
    if not dp.is_main:  # data parallel: other ranks log (identical evals) to a private directory
        run_dir, progress = run_dir / f".rank{dp.rank}", False
    run_dir.mkdir(parents=True, exist_ok=True)
    faults.set_run(cfg.run_id())
    with file_lock(run_dir / ".lock"):
        return _train_locked(cfg, run_dir, progress, dp, ckpt_dir, stop_requested)


def _train_locked(cfg: Config, run_dir: Path, progress: bool, dp: distributed.DistInfo,
                  ckpt_dir: Path, stop_requested: Callable[[], bool] | None = None) -> dict:
    # ----------------------------------------------------------------------------- setup
    cfg_path = run_dir / "config.yaml"
    distributed.check(cfg, dp.world)
    if cfg_path.exists():
        saved = config_from_dict(yaml.safe_load(cfg_path.read_text()))
        if saved.run_id() != cfg.run_id():  # pragma: no cover - the run_id is a hash of it
            raise RuntimeError(f"{run_dir} holds a different config")
    else:
        atomic_write_text(cfg_path, dump_yaml(cfg))
    summary_path, main_summary = run_dir / "summary.json", ckpt_dir.parent / "summary.json"
    if main_summary.exists():  # rank 0's record decides for every rank
        prev = json.loads(main_summary.read_text())
        if prev.get("status") == "finished":
            return prev  # never overwrite a finished result
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    for d in (run_dir, ckpt_dir):  # temp files of a killed writer are never data
        remove_stale_tmp(d)
    metrics = MetricsLog(run_dir / "metrics.jsonl")
    item_log = MetricsLog(run_dir / "eval_items.jsonl")  # per-item eval results (bootstrap)
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    if cfg.run.malloc_tuning:
        tune_malloc()
    device = torch.device(cfg.run.device if cfg.run.device != "auto" else
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and dp.world > 1:  # one GPU per process
        device = torch.device("cuda", dp.local_rank)
        torch.cuda.set_device(device)
    summary = {"status": "running", "step": 0, "total_steps": cfg.train.steps,
               "run_id": cfg.run_id(), "run_name": cfg.run_name()}

    try:
        compact = cfg.task.prompt_style == "compact" or (
            cfg.task.prompt_style == "auto" and cfg.model.scale != "pretrained")
        require_engine(cfg.rollout.engine)  # e.g. vLLM missing: say so before any warm-up
        task = make_task(cfg.task, compact=compact)
        if not dp.is_main:  # data parallel: rank 0 builds (or finds) the cached warm start first
            distributed.barrier()  # (transformers' save_pretrained writes nothing on rank > 0)
        tok = get_tokenizer(cfg, task.corpus)
        warm_path, warm_info = get_warm_start(cfg, tok, task, progress=progress)
        if dp.is_main:
            distributed.barrier()
        summary["warm_start"] = {k: warm_info.get(k) for k in ("steps", "pass_rate", "wall_s", "flops")}
        if cfg.task.chat_template:
            task.use_chat_template(tok)
        # dtype/autocast, fp32 head, gradient checkpointing, LoRA (models.prepare_policy)
        model = prepare_policy(load_warm_model(warm_path, device), cfg)
        model.train()
        n_params = count_params(model)
        ref_model = None  # the frozen warm start, only when a KL term needs it; with LoRA it is the
        if algos.KL_ESTIMATORS.meta(cfg.algo.kl).needs_reference:  # policy itself with its adapters disabled (reference_context)
            ref_model = model if is_lora(model) else \
                prepare_policy(load_warm_model(warm_path, device), cfg).eval().requires_grad_(False)
        critic = critic_opt = None  # a separate value model, only for critic-based advantages (gae)
        if algos.ADVANTAGES.meta(cfg.algo.advantage).needs_critic:
            critic = ValueModel(load_warm_model(warm_path, device)).to(device)
            critic_opt = torch.optim.AdamW(critic.parameters(), lr=cfg.algo.critic_lr, weight_decay=0.0,
                                           betas=(cfg.optim.beta1, cfg.optim.beta2))
        n_critic = count_params(critic) if critic is not None else 0
        engine = make_engine(cfg.rollout.engine, model, tok, model_path=warm_path, cfg=cfg)
        # PipelineRL-style asynchrony, simulated in-process: rollouts come from the policy of
        # `rollout_lag` optimizer updates ago (a second copy of the model loaded from a snapshot).
        sample_engine, lagged, snapshots = engine, None, None
        if cfg.algo.rollout_lag > 0:
            lagged = prepare_policy(load_warm_model(warm_path, device), cfg).eval().requires_grad_(False)
            sample_engine = make_engine(cfg.rollout.engine, lagged, tok)
            snapshots = deque([policy_state(model)], maxlen=cfg.algo.rollout_lag + 1)

        def extra_state() -> dict:
            """Checkpointed besides the policy: the critic and its optimizer, the lagged versions."""
            out = {} if critic is None else {"critic": critic.state_dict(),
                                             "critic_optim": critic_opt.state_dict()}
            if snapshots is not None:
                out["lag_snapshots"] = list(snapshots)
            return out

        def sync_engine() -> float:
            """Push the policy's weights to an engine that holds its own copy (vLLM); seconds."""
            t = time.time()
            for e in {id(engine): engine, id(sample_engine): sample_engine}.values():
                if hasattr(e, "sync_weights"):  # HFEngine samples with the policy object itself
                    e.sync_weights(model)
            return time.time() - t

        eval_sets = {s: task.eval_set(s, getattr(cfg.eval, s).n_items) for s in ("in_dist", "held_out")}
        a, r = cfg.algo, cfg.rollout
        updates_per_step = a.epochs * a.minibatches
        trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters
        # fused: one kernel over all parameters (CPU and CUDA): 1.7 ms vs 4.4 ms per step on the
        # tiny model (LOG.md); the same update up to float rounding
        opt = torch.optim.AdamW(trainable, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
                                betas=(cfg.optim.beta1, cfg.optim.beta2),
                                fused=device.type in ("cpu", "cuda") or None)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, _lr_lambda(cfg, cfg.train.steps * updates_per_step))
        state = {"step": 0, "cursor": 0, "flops": 0.0, "tokens": 0, "wall_s": 0.0, "eval_flops": 0.0}

        # ------------------------------------------------------------------------- resume
        ckpt = _load_checkpoint(ckpt_dir)
        if ckpt is not None:
            load_policy_state(model, ckpt["model"])
            if critic is not None:
                critic.load_state_dict(ckpt["critic"])
                critic_opt.load_state_dict(ckpt["critic_optim"])
            if snapshots is not None:
                snapshots.clear()
                snapshots.extend(ckpt["lag_snapshots"])
            opt.load_state_dict(ckpt["optim"])
            sched.load_state_dict(ckpt["sched"])
            torch.set_rng_state(ckpt["rng_torch"])
            random.setstate(ckpt["rng_python"])
            state = ckpt["state"]
            metrics.truncate_after(state["step"])
            item_log.truncate_after(state["step"])
        else:
            metrics.truncate_after(-1)
            item_log.truncate_after(-1)
        if ckpt is not None:  # an engine with its own copy was built from the warm start's files
            sync_engine()
        t_start, wall0 = time.time(), state["wall_s"]

        def compute_cols() -> dict:
            return {"compute/flops": state["flops"], "compute/tokens": state["tokens"],
                    "compute/wall_s": wall0 + time.time() - t_start,
                    "compute/eval_flops": state["eval_flops"]}

        def save_checkpoint() -> None:
            if dp.is_main:  # under data parallel every rank holds the same weights
                _save_checkpoint(ckpt_dir, model, opt, sched, state, extra_state())

        def run_eval(step: int) -> dict:
            row = {"kind": "eval", "step": step}
            for name, items in eval_sets.items():
                ec = getattr(cfg.eval, name)
                ev = evaluate(engine, task, items, k=ec.k, temperature=cfg.eval.temperature,
                              max_new_tokens=r.max_new_tokens, seed=cfg.eval.seed)
                state["eval_flops"] += 2 * n_params * ev["gen_tokens"]
                for key in ("pass@1", "stderr", "n_items", "k", "response_len", "response_len_incorrect"):
                    row[f"eval/{name}/{key}"] = ev[key]
                item_log.append({"step": step, "set": name, "correct": ev["per_item"]})
            row.update(compute_cols())
            metrics.append(row)
            return row

        if ckpt is None:
            last_eval = run_eval(0)  # the warm start: R0 of every curve
            save_checkpoint()
        else:
            rows = [x for x in metrics.read() if x.get("kind") == "eval"]
            last_eval = rows[-1] if rows else run_eval(state["step"])
        def sample() -> tuple:
            """One step's rollout: (every sampled row, their scores, kept row indices, rounds)."""
            if lagged is not None:  # the policy of min(rollout_lag, updates so far) updates ago
                load_policy_state(lagged, snapshots[0])
            def draw(n: int) -> list:  # data parallel: every rank draws all, keeps its share
                got, state["cursor"] = task.take("train", state["cursor"], n * dp.world)
                return got[dp.rank::dp.world]
            ro_all, _, scores_all, kept, rounds = collect_groups(
                lambda prompts: sample_engine.generate(prompts, max_new_tokens=r.max_new_tokens,
                                                temperature=r.temperature, top_p=r.top_p),
                draw, task.score, n_groups=r.prompts_per_step // dp.world, group_size=r.group_size,
                group_filter=algos.GROUP_FILTERS[a.group_filter], max_rounds=a.max_gen_rounds, pad_id=tok.pad_token_id)
            state["flops"] += 2 * n_params * (int(ro_all.prompt_mask.sum()) + ro_all.n_tokens)
            state["tokens"] += ro_all.n_tokens   # discarded generations cost compute too
            return ro_all, scores_all, kept, rounds

        def prepare(ro, rewards, scores, mask, loss_mask, step: int) -> tuple:
            """pi_old, the reference log-probs, critic values, advantages, the rollout/train
            mismatch correction: (StepBatch, explained var, mismatch stats)."""
            mis: dict = {}
            correction = None
            if not algos.OLD_LOGPROBS.meta(a.old_logprobs).trainer_forward:
                logp_old = ro.logprobs
            else:
                with torch.no_grad():
                    logp_old, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask,
                                                    ro.response_ids, ro.response_mask, r.temperature)
                state["flops"] += 2 * n_params * (int(ro.prompt_mask.sum()) + ro.n_tokens)
                if lag == 0:  # trainer vs sampler under the same weights: the mismatch itself
                    lr = algos.mismatch_log_ratio(logp_old, ro.logprobs, mask).abs()
                    mis = {"mean": (lr.sum() / mask.sum().clamp(min=1)).item(), "max": lr.max().item()}
                if algos.ROLLOUT_CORRECTIONS.meta(a.rollout_correction).active:
                    correction = algos.ROLLOUT_CORRECTIONS[a.rollout_correction](
                        logp_old, ro.logprobs, mask, cap=a.rollout_correction_cap,
                        floor=a.rollout_correction_floor)
                    mis["weight"] = ((correction * mask).sum() / mask.sum().clamp(min=1)).item()
            logp_ref = token_rewards = None
            if ref_model is not None:  # only when a KL term is configured
                with torch.no_grad(), reference_context(ref_model):
                    logp_ref, _ = sequence_logprobs(ref_model, ro.prompt_ids, ro.prompt_mask,
                                                    ro.response_ids, ro.response_mask, r.temperature)
                state["flops"] += 2 * n_params * (int(ro.prompt_mask.sum()) + ro.n_tokens)
                if algos.KL_MODES.meta(a.kl_mode).in_reward:  # -beta * kl_t per token, at the sampling policy
                    token_rewards = -a.kl_coef * algos.KL_ESTIMATORS[a.kl](logp_old, logp_ref) * mask
            values = value_targets = None
            lam = a.lam_policy
            if critic is not None:  # V(s_t) of the critic before this step's updates
                values, value_targets = critic_targets(ro, rewards, mask, token_rewards)
                if a.lam_alpha > 0:  # VAPO length-adaptive lambda_policy, one per response
                    lam = algos.length_adaptive_lambda(ro.lengths, a.lam_alpha)
            adv = algos.ADVANTAGES[a.advantage](rewards, mask, group_size=r.group_size, eps=a.adv_eps,
                                                token_rewards=token_rewards, values=values,
                                                gamma=a.gamma, lam=lam)
            _finite("advantage", adv, step)
            ev = explained_variance(values, value_targets, loss_mask) if critic is not None else None
            return StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                             loss_mask=loss_mask, adv=adv, logp_old=logp_old, correct=scores > 0,
                             logp_ref=logp_ref, value_targets=value_targets,
                             correction=correction), ev, mis

        def critic_targets(ro, rewards, mask, token_rewards) -> tuple:
            """Values of the critic (no grad) and its lambda_critic-return targets."""
            with torch.no_grad():
                values = critic(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
            state["flops"] += 2 * n_critic * (int(ro.prompt_mask.sum()) + ro.n_tokens)
            return values, algos.compute_value_targets(rewards, mask, values, token_rewards=token_rewards,
                                                       gamma=a.gamma, lam=a.lam_critic)

        def critic_step(mb: StepBatch, losses: list) -> None:
            """One critic update on a minibatch (0.5 * token-mean squared error to its targets)."""
            critic_opt.zero_grad(set_to_none=True)
            losses.append(value_backward(critic, mb, a.micro_batches)["value_loss"])
            torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.optim.grad_clip
                                           if cfg.optim.grad_clip > 0 else float("inf"))
            critic_opt.step()
            state["flops"] += 6 * n_critic * (int(mb.prompt_mask.sum()) + int(mb.response_mask.sum()))

        def group_rows(prompts: torch.Tensor) -> torch.Tensor:
            """Prompt indices -> their G contiguous rows."""
            return (prompts.unsqueeze(-1) * r.group_size + torch.arange(r.group_size)).reshape(-1)

        # ---- VAPO value pretraining: the critic alone, on rollouts of the fixed warm start
        pretrain_losses: list = []
        while critic is not None and state.get("value_pretrained", 0) < a.value_pretrain_steps:
            torch.manual_seed(step_seed(cfg.run.seed, -1 - state.get("value_pretrained", 0)))
            ro_all, scores_all, kept, _ = sample()
            ro, scores = select_rows(ro_all, kept), scores_all[kept]
            mask = ro.response_mask.float()
            if len(kept):
                rewards = scores + algos.overlong_penalty(ro.lengths, max_len=r.max_new_tokens,
                                                          cache=a.overlong_cache)
                _, targets = critic_targets(ro, rewards, mask, None)
                loss_mask = mask * (~ro.truncated).unsqueeze(-1) if a.mask_truncated else mask
                b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                              loss_mask=loss_mask, adv=torch.zeros_like(mask), logp_old=ro.logprobs,
                              correct=scores > 0, value_targets=targets)
                losses: list = []
                for _epoch in range(a.epochs):
                    for mb_prompts in torch.randperm(len(kept) // r.group_size).chunk(a.minibatches):
                        critic_step(b.rows(group_rows(mb_prompts)), losses)
                pretrain_losses.append(_mean(losses))
            state["value_pretrained"] = state.get("value_pretrained", 0) + 1
            if state["value_pretrained"] == a.value_pretrain_steps:
                save_checkpoint()

        _tb = _TB(run_dir / "tb", purge_step=state["step"] + 1)
        bar = tqdm(total=cfg.train.steps, initial=state["step"], desc=cfg.run_name()[:30],
                   disable=not progress, dynamic_ncols=True)
        stop_reason = "steps"

        # ------------------------------------------------------------------------- the loop
        for step in range(state["step"] + 1, cfg.train.steps + 1):
            t0 = time.time()
            torch.manual_seed(step_seed(cfg.run.seed, step) + dp.rank)
            flops0, tokens0 = state["flops"], state["tokens"]

            # ---- rollout: rounds of P prompts x G samples (group filter, DAPO refill), grouped
            lag = len(snapshots) - 1 if snapshots is not None else 0  # updates behind the policy
            ro_all, scores_all, kept, rounds = sample()
            faults.point("rollout", step)  # test-only hooks (faults.py): no-ops unless armed
            rewards_all = scores_all + algos.overlong_penalty(ro_all.lengths, max_len=r.max_new_tokens,
                                                              cache=a.overlong_cache)  # DAPO shaping
            _finite("reward", rewards_all, step)
            ro, rewards, scores = select_rows(ro_all, kept), rewards_all[kept], scores_all[kept]
            mask = ro.response_mask.float()                                      # (B, T)
            # overlong filtering: truncated responses count in group statistics, not in the loss
            loss_mask = mask * (~ro.truncated).unsqueeze(-1) if a.mask_truncated else mask

            stats = {"loss": [], "grad_norm": [], "value_loss": []}
            sums: dict = {}
            n_prompts = len(kept) // r.group_size  # a filtered step may keep no group: no update
            ev, mis = None, {}
            if n_prompts:
                batch, ev, mis = prepare(ro, rewards, scores, mask, loss_mask, step)

            # ---- K epochs x M minibatches of whole groups (x micro-batches inside policy_backward)
            for _epoch in range(a.epochs if n_prompts else 0):
                perm = torch.randperm(n_prompts)
                for mb_prompts in perm.chunk(a.minibatches):
                    idx = group_rows(mb_prompts)
                    opt.zero_grad(set_to_none=True)
                    st = policy_backward(model, batch.rows(idx), a, group_size=r.group_size,
                                         max_new_tokens=r.max_new_tokens, temperature=r.temperature)
                    distributed.sum_gradients(model)  # data parallel: the combined minibatch
                    st = distributed.sum_stats(st)
                    _finite("loss", torch.tensor(st["loss"]), step)
                    if not sums and not mis and lag == 0:  # first update, still the sampling weights:
                        mis = {"mean": st["abs_log_ratio"] / max(st["tokens"], 1.0),  # its ratio is
                               "max": st["max_abs_log_ratio"]}  # the mismatch (this minibatch's tokens)
                    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip
                                                        if cfg.optim.grad_clip > 0 else float("inf"))
                    opt.step()
                    sched.step()
                    faults.point("update", step)
                    if snapshots is not None:
                        snapshots.append(policy_state(model))
                    stats["loss"].append(st["loss"])
                    stats["grad_norm"].append(gn.item())
                    for k, v in st.items():
                        sums[k] = max(sums.get(k, 0.0), v) if k.startswith("max_") else sums.get(k, 0.0) + v
                    state["flops"] += 6 * n_params * (int(ro.prompt_mask[idx].sum()) + int(mask[idx].sum()))
                    if critic is not None:  # the critic's update on the same minibatch
                        critic_step(batch.rows(idx), stats["value_loss"])

            sync_s = sync_engine() if n_prompts else 0.0  # e.g. vLLM: load the updated weights

            # ---- compute accounting and the train row
            if dp.world > 1:  # every rank's FLOPs and tokens
                d = distributed.sum_stats({"flops": state["flops"] - flops0,
                                           "tokens": state["tokens"] - tokens0})
                state["flops"], state["tokens"] = flops0 + d["flops"], tokens0 + int(d["tokens"])
            state["step"] = step
            dt = time.time() - t0
            correct = scores_all > 0           # every sampled response, kept or filtered
            lens = ro_all.lengths.float()
            row = {"kind": "train", "step": step,
                   "rollout/reward_mean": rewards_all.mean().item(),
                   "rollout/pass_rate": correct.float().mean().item(),
                   "rollout/response_len": lens.mean().item(),
                   "rollout/response_len_correct": lens[correct].mean().item() if correct.any() else None,
                   "rollout/response_len_incorrect": lens[~correct].mean().item() if (~correct).any() else None,
                   "rollout/truncated_frac": ro_all.truncated.float().mean().item(),
                   "rollout/zero_var_groups": (~informative_groups(scores_all, r.group_size)).float().mean().item(),
                   "rollout/gen_rounds": rounds, "rollout/kept_groups": n_prompts,
                   "rollout/policy_lag": lag,
                   "loss/policy": _mean(stats["loss"]), "policy/entropy": _per_token(sums, "entropy"),
                   "policy/clip_frac": _per_token(sums, "clipped"),
                   "policy/approx_kl": _per_token(sums, "approx_kl"),
                   "policy/log_ratio_abs_mean": _per_token(sums, "abs_log_ratio"),
                   "policy/log_ratio_abs_max": sums.get("max_abs_log_ratio"),
                   "loss/kl": _per_token(sums, "kl_ref") if ref_model is not None else None,
                   "loss/value": _mean(stats["value_loss"]), "value/explained_var": ev,
                   "loss/pos_nll": sums["pos_nll"] / len(stats["loss"])
                   if a.pos_nll_coef > 0 and stats["loss"] else None,
                   "rollout/mismatch_log_ratio_abs_mean": mis.get("mean"),
                   "rollout/mismatch_log_ratio_abs_max": mis.get("max"),
                   "rollout/correction_weight_mean": mis.get("weight"),
                   "perf/weight_sync_s": sync_s,
                   "policy/grad_norm": _mean(stats["grad_norm"]), "optim/lr": sched.get_last_lr()[0],
                   "perf/step_s": dt, "perf/tokens_per_s": ro_all.n_tokens / max(dt, 1e-9)}
            if pretrain_losses:  # once, in the first row after VAPO value pretraining
                row["value/pretrain_loss_first"] = pretrain_losses[0]
                row["value/pretrain_loss_last"] = pretrain_losses[-1]
                pretrain_losses = []
            row.update(compute_cols())
            metrics.append(row)
            _tb.log(row)
            if step % cfg.eval.every == 0 or step == cfg.train.steps:
                last_eval = run_eval(step)
                _tb.log(last_eval)
            wall_up = distributed.any_rank(bool(cfg.train.max_wall_s) and
                                           (wall0 + time.time() - t_start) >= cfg.train.max_wall_s)
            # issue 14 (stop request): a preempted job stops here, at a step boundary, with its progress saved
            stop = (stop_requested is not None and step < cfg.train.steps and not wall_up
                    and distributed.any_rank(bool(stop_requested())))
            if step % cfg.train.checkpoint_every == 0 or step == cfg.train.steps or wall_up or stop:
                if wall_up and last_eval["step"] != step:
                    last_eval = run_eval(step)
                state["wall_s"] = wall0 + time.time() - t_start
                save_checkpoint()
                summary.update(step=step, status="running")
                write_json(summary_path, summary)
            bar.update(1)
            bar.set_postfix(reward=f"{row['rollout/reward_mean']:.2f}",
                            in_dist=f"{last_eval['eval/in_dist/pass@1']:.3f}",
                            held_out=f"{last_eval['eval/held_out/pass@1']:.3f}",
                            tok_s=f"{row['perf/tokens_per_s']:.0f}")
            if wall_up:
                stop_reason = "max_wall_s"
                break
            if stop:  # issue 14 (stop request): the file says running (it resumes); the caller hears why
                bar.close()
                _tb.close()
                return {**summary, "status": "interrupted", "stop_reason": "preempted"}
        bar.close()
        _tb.close()
        summary.update(status="finished", step=state["step"], stop_reason=stop_reason,
                       final=last_eval, wall_s=wall0 + time.time() - t_start)
        write_json(summary_path, summary)
        return summary
    except Diverged as e:
        summary.update(status="diverged", error=str(e), diverged_step=e.step)
        write_json(summary_path, summary)
        return summary
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            summary.update(status="failed", error="interrupted (KeyboardInterrupt)")
        else:
            summary.update(status="failed", error=f"{type(e).__name__}: {e}",
                           traceback=traceback.format_exc(limit=8))
        with contextlib.suppress(OSError):  # a full or read-only disk cannot take the record
            write_json(summary_path, summary)
        raise


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _per_token(sums: dict, key: str) -> float | None:
    """A per-token mean over every update of the step, from policy_backward's sums."""
    return sums[key] / sums["tokens"] if sums.get("tokens") else None


# ------------------------------------------------------------------------------------ checkpoints
def _save_checkpoint(ckpt_dir: Path, model, opt, sched, state: dict, extra: dict | None = None) -> None:
    """last.pt is written atomically; the previous one is kept as prev.pt (a fallback if last.pt is
    ever unreadable). `extra`: more state to keep (the critic, its optimizer, lagged policies)."""
    obj = {"model": policy_state(model), "optim": opt.state_dict(), "sched": sched.state_dict(),
           "rng_torch": torch.get_rng_state(), "rng_python": random.getstate(), "state": dict(state),
           **(extra or {})}
    save_checkpoint_file(obj, ckpt_dir / "last.pt", ckpt_dir / "prev.pt", step=state["step"])


def _load_checkpoint(ckpt_dir: Path) -> dict | None:
    """last.pt, else prev.pt: the first that loads and matches its checksum (io.py); each one
    refused is one line on stderr. None (start over: same seed, same result) if neither is usable."""
    for name in ("last.pt", "prev.pt"):
        p = ckpt_dir / name
        if p.exists():
            try:
                return load_checkpoint_file(p)
            except CheckpointError as e:  # truncated or corrupted: fall back, say so
                tqdm.write(f"rlablate: warning: checkpoint {e}; "
                           + ("trying prev.pt" if name == "last.pt" else "starting the run over"),
                           file=sys.stderr)
    return None


class _TB:
    """TensorBoard scalars (same names as metrics.jsonl)."""

    def __init__(self, path: Path, purge_step: int):
        from torch.utils.tensorboard import SummaryWriter
        # written to disk every 10 s and at close (not every step: ~1% of a tiny model's step);
        # metrics.jsonl, written every step, stays the record
        self.w = SummaryWriter(str(path), purge_step=purge_step, flush_secs=10)

    def log(self, row: dict) -> None:
        for k, v in row.items():
            if "/" in k and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.w.add_scalar(k, v, row["step"])

    def close(self) -> None:
        self.w.close()
