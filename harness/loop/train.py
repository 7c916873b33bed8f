"""The shared RL loop, as a story. Every algorithm runs through it:

    resume -> per step: sample -> prepare -> epochs x minibatches of update -> train row
           -> eval -> checkpoint

Each stage is one call into its own module (sample.py, prepare.py, update.py, critic.py,
checkpoint.py, metrics.py) with the run's parts handed over as a dataclass (`parts.Parts`). The
design choices come from registries named in the config (`harness.algos`); this file never
branches on a choice's name. Run it with:

    rlablate train configs/default.yaml train.steps=50
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import yaml
from tqdm import tqdm

from .. import algos, distributed, faults
from ..config import Config, config_from_dict, dump_yaml
from ..cpu import tune_malloc
from ..numerics import fingerprint
from ..storage import MetricsLog, atomic_write_text, file_lock, remove_stale_tmp, write_json
from . import checkpoint
from .critic import pretrain
from .evaluate import evaluate
from .finite import Diverged, check_finite
from .metrics import TensorBoard, WandbLog, train_row
from .offline import offline_step
from .parts import Parts, build_parts, eval_set_cfg
from .prepare import Prepared, prepare
from .sample import sample
from .update import UpdateStats, update


def step_seed(seed: int, step: int) -> int:
    """Each step's randomness is a pure function of (seed, step): resuming from a checkpoint at
    step s replays steps s+1.. exactly, whatever happened before the crash."""
    return (seed * 1_000_003 + step * 7_919) % (2**63 - 1)


@dataclass
class RunFiles:
    """Where a run writes, and its clock (wall time adds up across attempts)."""
    run_dir: Path
    ckpt_dir: Path
    metrics: MetricsLog
    items: MetricsLog                  # per-item eval results (the bootstrap's unit)
    summary_path: Path
    summary: dict
    t_start: float = field(default_factory=time.time)
    wall0: float = 0.0

    def wall_s(self) -> float:
        return self.wall0 + time.time() - self.t_start

    def write_summary(self, **kw) -> None:
        self.summary.update(kw)
        write_json(self.summary_path, self.summary)


def train(cfg: Config, progress: bool = True, stop_requested: Callable[[], bool] | None = None,
          pause_at: int | None = None) -> dict:
    """Run (or resume) the run described by `cfg`; returns its summary. `stop_requested` is asked
    after every step (a job scheduler's preemption signal): when it says yes, the run saves a
    checkpoint and returns with status `interrupted`, to be resumed by the next attempt."""
    run_dir = cfg.run_dir()
    dp = distributed.setup("cuda" if cfg.run.device != "cpu" and torch.cuda.is_available() else "cpu")
    ckpt_dir = run_dir / "checkpoints"  # rank 0 writes it; every rank resumes from it
    if not dp.is_main:  # data parallel: other ranks log (identical evals) to a private directory
        run_dir, progress = run_dir / f".rank{dp.rank}", False
    run_dir.mkdir(parents=True, exist_ok=True)
    faults.set_run(cfg.run_id())
    def say_waiting() -> None:
        print(f"rlablate: another process is running this run ({run_dir} is locked); waiting "
              f"for it to end, then this one resumes it or reports its result", file=sys.stderr,
              flush=True)
    with file_lock(run_dir / ".lock", on_wait=say_waiting):
        return _train_locked(cfg, run_dir, ckpt_dir, dp, progress, stop_requested or (lambda: False),
                             pause_at)


def _open_run(cfg: Config, run_dir: Path, ckpt_dir: Path, dp) -> RunFiles | dict:
    """The run directory: its config record (written once, checked on resume), its logs; the
    finished summary instead, if rank 0 already finished this run."""
    distributed.check(cfg, dp.world)
    cfg_path = run_dir / "config.yaml"
    if cfg_path.exists():
        saved = config_from_dict(yaml.safe_load(cfg_path.read_text()))
        if saved.run_id() != cfg.run_id():  # pragma: no cover - the run_id is a hash of it
            raise RuntimeError(f"{run_dir} holds a different config")
    else:
        atomic_write_text(cfg_path, dump_yaml(cfg))
    main_summary = ckpt_dir.parent / "summary.json"
    if main_summary.exists():  # rank 0's record decides for every rank
        prev = json.loads(main_summary.read_text())
        if prev.get("status") == "finished":
            return prev  # never overwrite a finished result
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    for d in (run_dir, ckpt_dir):  # temp files of a killed writer are never data
        remove_stale_tmp(d)
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    if cfg.run.malloc_tuning:
        tune_malloc()
    return RunFiles(run_dir, ckpt_dir, MetricsLog(run_dir / "metrics.jsonl"),
                    MetricsLog(run_dir / "eval_items.jsonl"), run_dir / "summary.json",
                    {"status": "running", "step": 0, "total_steps": cfg.train.steps,
                     "run_id": cfg.run_id(), "run_name": cfg.run_name()})


def _previous_numerics(path: Path) -> dict | None:
    """The fingerprint an earlier attempt of this run recorded (a resume), if any."""
    try:
        prev = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return prev.get("numerics_before_resume") or prev.get("numerics")


def _train_locked(cfg: Config, run_dir: Path, ckpt_dir: Path, dp, progress: bool,
                  stop_requested: Callable[[], bool], pause_at: int | None = None) -> dict:
    f = _open_run(cfg, run_dir, ckpt_dir, dp)
    if isinstance(f, dict):
        return f
    try:
        p = build_parts(cfg, dp, progress)
        f.summary["warm_start"] = {k: p.warm_info.get(k) for k in ("steps", "pass_rate", "wall_s", "flops",
                                                                   "numerics")}
        f.summary["numerics"] = now = fingerprint(p.device)  # determinism holds per numerics only
        before = _previous_numerics(f.summary_path)
        if before and before.get("summary") != now["summary"]:  # resumed on other numerics
            f.summary["numerics_before_resume"] = before
        last_eval = _resume(p, f)
        if pause_at is not None and p.counters.step >= pause_at:  # already at the rung
            f.summary.update(status="interrupted", stop_reason="paused", step=p.counters.step)
            return dict(f.summary)
        if p.counters.value_pretrained < cfg.algo.value_pretrain_steps:  # VAPO, before step 1
            pretrain_losses = pretrain(p, step_seed)
            checkpoint.save(p, f.ckpt_dir)
        else:
            pretrain_losses = []
        tb = TensorBoard(f.run_dir / "tb", purge_step=p.counters.step + 1)
        wb = WandbLog.from_env(f.run_dir, cfg.to_dict(), cfg.run_id(), cfg.run_name()) \
            if dp.is_main else None
        if p.counters.step == 0:  # a fresh run: the config and the step-0 eval (R0 of the curve)
            tb.log_config(cfg.to_dict(), dump_yaml(cfg))
            tb.log(last_eval)
            if wb:
                wb.log(last_eval)
        bar = tqdm(total=cfg.train.steps, initial=p.counters.step, desc=cfg.run_name()[:30],
                   disable=not progress, dynamic_ncols=True)
        stop_reason = "steps"
        # the paradigm's step: online RL (sample, prepare, update) or an offline loss on a fixed set
        step_fn = _offline_step if algos.PARADIGMS.meta(cfg.algo.paradigm).offline else _step
        for step in range(p.counters.step + 1, cfg.train.steps + 1):
            row = step_fn(p, step, pretrain_losses) | _compute_cols(p, f)
            pretrain_losses = []
            f.metrics.append(row)
            tb.log(row)
            if step % cfg.eval.every == 0 or step == cfg.train.steps:
                last_eval = _eval(p, f, step)
                tb.log(last_eval)
            if wb:  # one W&B step per RL step: the train row and, at eval steps, the eval row
                wb.log(row | (last_eval if last_eval["step"] == step else {}))
            wall_up = distributed.any_rank(bool(cfg.train.max_wall_s) and f.wall_s() >= cfg.train.max_wall_s)
            # a stop request on the last step: the run simply finishes
            paused = pause_at is not None and step >= pause_at
            stop = step < cfg.train.steps and not wall_up and (
                paused or distributed.any_rank(stop_requested()))
            if step % cfg.train.checkpoint_every == 0 or step == cfg.train.steps or wall_up or stop:
                if wall_up and last_eval["step"] != step:
                    last_eval = _eval(p, f, step)
                p.counters.wall_s = f.wall_s()
                checkpoint.save(p, f.ckpt_dir)
                f.write_summary(step=step, status="running")
            bar.update(1)
            bar.set_postfix(**({"reward": f"{row['rollout/reward_mean']:.2f}"}
                               if "rollout/reward_mean" in row else
                               {"loss": f"{row['loss/offline']:.3f}"}),
                            in_dist=f"{last_eval['eval/in_dist/pass@1']:.3f}",
                            held_out=f"{last_eval['eval/held_out/pass@1']:.3f}",
                            tok_s=f"{row['perf/tokens_per_s']:.0f}")
            if wall_up or stop:
                stop_reason = "max_wall_s" if wall_up else "paused" if paused else "preempted"
                break
        bar.close()
        tb.close()
        if wb:
            wb.close()
        if stop_reason in ("preempted", "paused"):  # the next attempt resumes from this checkpoint
            f.summary.update(status="interrupted", stop_reason=stop_reason)
            return dict(f.summary)
        f.write_summary(status="finished", step=p.counters.step, stop_reason=stop_reason,
                        final=last_eval, wall_s=f.wall_s())
        return f.summary
    except Diverged as e:
        f.write_summary(status="diverged", error=str(e), diverged_step=e.step)
        return f.summary
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            f.summary.update(status="failed", error="interrupted (KeyboardInterrupt)")
        else:
            f.summary.update(status="failed", error=f"{type(e).__name__}: {e}",
                             traceback=traceback.format_exc(limit=8))
        with contextlib.suppress(OSError):  # a full or read-only disk cannot take the record
            write_json(f.summary_path, f.summary)
        raise


def _resume(p: Parts, f: RunFiles) -> dict:
    """Restore the last checkpoint (logs cut back to it), or evaluate the warm start (R0 of every
    curve) and save step 0. Returns the latest eval row."""
    ckpt = checkpoint.load(f.ckpt_dir)
    if ckpt is None:
        f.metrics.truncate_after(-1)
        f.items.truncate_after(-1)
        f.t_start, f.wall0 = time.time(), 0.0
        last_eval = _eval(p, f, 0)
        checkpoint.save(p, f.ckpt_dir)
        return last_eval
    checkpoint.restore(p, ckpt)
    f.metrics.truncate_after(p.counters.step)
    f.items.truncate_after(p.counters.step)
    p.sync_engines()  # an engine with its own copy was built from the warm start's files
    f.t_start, f.wall0 = time.time(), p.counters.wall_s
    rows = [x for x in f.metrics.read() if x.get("kind") == "eval"]
    return rows[-1] if rows else _eval(p, f, p.counters.step)


def _step(p: Parts, step: int, pretrain_losses: list) -> dict:
    """One RL step: sample, prepare, update, and its train row (without the compute columns)."""
    cfg, dp, c = p.cfg, p.dp, p.counters
    t0 = time.time()
    torch.manual_seed(step_seed(cfg.run.seed, step) + dp.rank)
    flops0, tokens0 = c.flops, c.tokens
    lag = p.lag                                   # updates the sampling policy is behind
    sampled = sample(p)                           # rounds of P prompts x G samples, filtered
    faults.point("rollout", step)                 # test-only hooks (faults.py): no-ops unless armed
    check_finite("reward", sampled.rewards, step)
    ro, rewards, scores = sampled.kept_rows()
    n_groups = len(sampled.kept) // cfg.rollout.group_size  # a filtered step may keep no group
    prep, upd = Prepared(batch=None), UpdateStats()
    ent_coef = cfg.algo.entropy_coef if c.entropy_coef is None else c.entropy_coef
    if n_groups:
        prep = prepare(p, ro, rewards, scores, step, dropped=_dropped(sampled, cfg.algo))
        upd = update(p, prep.batch, n_groups, step, lag, prep.mismatch, entropy_coef=ent_coef)
    t_sync = time.time()
    if n_groups:
        p.sync_engines()                          # e.g. vLLM: load the updated weights
    sync_s = time.time() - t_sync if n_groups else 0.0
    if dp.world > 1:  # every rank's FLOPs and tokens
        d = distributed.sum_stats({"flops": c.flops - flops0, "tokens": c.tokens - tokens0})
        c.flops, c.tokens = flops0 + d["flops"], tokens0 + int(d["tokens"])
    c.step = step
    row = train_row(step, sampled, n_groups, lag, upd, prep, group_size=cfg.rollout.group_size,
                    with_reference=p.reference is not None, pos_nll=cfg.algo.pos_nll_coef > 0,
                    sync_s=sync_s, optimizer_lr=p.scheduler.get_last_lr()[0], dt=time.time() - t0)
    row |= p.train_set.stats()  # a finite training set: retired / seen items (else nothing)
    row |= _entropy_control(p, ent_coef, upd)
    if pretrain_losses:  # once, in the first row after VAPO value pretraining
        row["value/pretrain_loss_first"] = pretrain_losses[0]
        row["value/pretrain_loss_last"] = pretrain_losses[-1]
    return row


def _entropy_control(p: Parts, coef: float, upd: UpdateStats) -> dict:
    """The next step's entropy bonus coefficient (algo.entropy_control) from this step's and the
    mean token entropy of its updates (unchanged by a step without updates); an adaptive one is
    logged as the coefficient this step used."""
    a, c = p.cfg.algo, p.counters
    tokens = upd.sums.get("tokens", 0.0)
    if tokens:
        c.entropy_coef = algos.ENTROPY_CONTROLS[a.entropy_control](
            coef, upd.sums["entropy"] / tokens, target=a.entropy_target, step=a.entropy_coef_step,
            max_coef=a.entropy_coef_max)
    return {"policy/entropy_coef": coef} if algos.ENTROPY_CONTROLS.meta(a.entropy_control).adaptive else {}


def _offline_step(p: Parts, step: int, pretrain_losses: list) -> dict:
    """One offline step (loop/offline.py) under the step's seed (its minibatch order: the same
    on every data-parallel process, which each take their share of every minibatch)."""
    torch.manual_seed(step_seed(p.cfg.run.seed, step))
    return offline_step(p, step)


def _dropped(sampled, a):
    """(response_mask, rewards) of the rows the group filter dropped, when a batch-level advantage's
    statistics count them (the scope's `counts_dropped`, algo.adv_batch_scope); else None."""
    kept = torch.zeros(len(sampled.rewards), dtype=torch.bool, device=sampled.rewards.device)
    kept[sampled.kept] = True
    return algos.ADV_BATCH_SCOPES[a.adv_batch_scope](sampled.rollout.response_mask, sampled.rewards, kept)


def _compute_cols(p: Parts, f: RunFiles) -> dict:
    c = p.counters
    return {"compute/flops": c.flops, "compute/tokens": c.tokens, "compute/wall_s": f.wall_s(),
            "compute/eval_flops": c.eval_flops}


def _eval(p: Parts, f: RunFiles, step: int) -> dict:
    """pass@1 on every eval set with the current policy; one metrics row, per-item results."""
    cfg = p.cfg
    row = {"kind": "eval", "step": step}
    for name, items in p.eval_sets.items():
        ec = eval_set_cfg(cfg, name)
        ev = evaluate(p.engine, p.task, items, k=ec.k, temperature=cfg.eval.temperature,
                      max_new_tokens=cfg.rollout.max_new_tokens, seed=cfg.eval.seed)
        p.meter.evaluated(p.n_params, ev["gen_tokens"])
        for key in ("pass@1", "stderr", "n_items", "k", "response_len", "response_len_incorrect"):
            row[f"eval/{name}/{key}"] = ev[key]
        f.items.append({"step": step, "set": name, "correct": ev["per_item"]})
    row.update(_compute_cols(p, f))
    f.metrics.append(row)
    return row
