"""Warm start: a short supervised warm-up on reference answers until the model reaches a configured
pass rate, so RL has signal. Cached by content hash: every run of a sweep that shares the model,
task and warm-up settings (whatever its RL seed or algorithm) loads the same checkpoint.

The warm-up's accuracy jumps suddenly and at different steps per seed, so it stops on a pass-rate
threshold, not after a fixed number of steps. The threshold is checked the way R0 is measured
(sampled at eval.temperature), on a validation split of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import torch
from tqdm import tqdm

from ..batch import encode_prompts
from ..config import Config, identity
from ..engines import HFEngine
from ..models import build_model, count_params, device_for, load_model, sequence_logprobs
from ..numerics import fingerprint
from ..scales import from_path
from ..storage import file_lock, write_json
from ..tasks import COMMON_KEYS, RL_ONLY_KEYS, TASKS
from .evaluate import evaluate
from .metrics import forward_flops, train_flops

WARM_START_VERSION = 2  # bump when the procedure changes, so old caches are not reused


WARM_START_MODEL_KEYS = ("scale", "arch", "path", "max_positions")


class WarmStartError(RuntimeError):
    """The warm-up did not reach its target pass rate within warmup.max_steps."""


def warm_start_key(cfg: Config, tok_name: str) -> str:
    # only what the warm-up itself uses: dtype, LoRA etc. are applied to the RL policy afterwards
    model = {k: v for k, v in dataclasses.asdict(cfg.model).items() if k in WARM_START_MODEL_KEYS}
    # the task keys the chosen task reads (TASKS property `keys`): any other one is at its default
    # (train_items only sizes the RL training set: the same warm start serves every size)
    reads = (set(COMMON_KEYS) | set(TASKS.meta(cfg.task.name).keys)) - set(RL_ONLY_KEYS)
    d = {"v": WARM_START_VERSION, "model": model,
         "task": identity({"task": {k: v for k, v in dataclasses.asdict(cfg.task).items()
                                    if k in reads}})["task"],
         "warmup": dataclasses.asdict(cfg.warmup),
         "max_new_tokens": cfg.rollout.max_new_tokens, "tokenizer": tok_name}
    if cfg.eval.held_out_sets:  # their items leave the warm-up split (absent: the key as before)
        d["held_out_sets"] = list(cfg.eval.held_out_sets)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _supervised_batch(tok, items, device):
    ids, mask = encode_prompts(tok, [it.prompt for it in items], device)
    resp = [tok.encode(it.reference, add_special_tokens=False) + [tok.eos_token_id] for it in items]
    width = max(len(r) for r in resp)
    rids = torch.full((len(resp), width), tok.pad_token_id, dtype=torch.long)
    rmask = torch.zeros((len(resp), width), dtype=torch.long)
    for i, r in enumerate(resp):
        rids[i, :len(r)] = torch.tensor(r)
        rmask[i, :len(r)] = 1
    return ids, mask, rids.to(device), rmask.to(device)


def run_warm_start(cfg: Config, tok, task, out_dir: Path, progress: bool = True) -> dict:
    """Train from random init (or the pretrained weights) on reference answers; save to out_dir."""
    w = cfg.warmup
    device = device_for(cfg)
    model = build_model(cfg, tok, init_seed=w.seed).to(device)
    n_params = count_params(model)
    engine = HFEngine(model, tok)
    check_items = task.eval_set("warmup_check", w.check_items)
    opt = torch.optim.AdamW(model.parameters(), lr=w.lr, weight_decay=0.0)
    cursor, step, flops, t0, pass_rate = 0, 0, 0.0, time.time(), 0.0
    history = []
    # no total: the warm-up stops on a pass rate, not at max_steps (an ETA to the cap misleads)
    bar = tqdm(desc=f"warm-up to pass rate {w.target_pass_rate:g} (cap {w.max_steps} steps)",
               unit="step", disable=not progress, dynamic_ncols=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(w.seed)
        while w.max_steps > 0:
            if step >= w.min_steps and (step > 0 or w.max_steps == 0) and \
                    (step % w.check_every == 0 or step == w.max_steps):
                ev = evaluate(engine, task, check_items, k=1, temperature=cfg.eval.temperature,
                              max_new_tokens=cfg.rollout.max_new_tokens, seed=w.seed)
                pass_rate = ev["pass@1"]
                flops += forward_flops(n_params, ev["gen_tokens"])
                history.append({"step": step, "pass@1": pass_rate})
                bar.set_postfix(pass_rate=f"{pass_rate:.3f}")
                if pass_rate >= w.target_pass_rate:
                    break
            if step >= w.max_steps:
                raise WarmStartError(
                    f"warm-up reached pass rate {pass_rate:.3f} < warmup.target_pass_rate = "
                    f"{w.target_pass_rate} after warmup.max_steps = {w.max_steps}; raise max_steps "
                    f"or lower the target")
            items, cursor = task.take("warmup", cursor, w.batch_size)
            ids, mask, rids, rmask = _supervised_batch(tok, items, device)
            logp, _ = sequence_logprobs(model, ids, mask, rids, rmask)
            loss = -(logp * rmask).sum() / rmask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            flops += train_flops(n_params, int(mask.sum() + rmask.sum()))
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", pass_rate=f"{pass_rate:.3f}")
    bar.close()
    info = {"steps": step, "pass_rate": pass_rate, "wall_s": time.time() - t0, "flops": flops,
            "n_params": n_params, "history": history, "target_pass_rate": w.target_pass_rate,
            "numerics": fingerprint(device)}  # another CPU's numerics build another warm start
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    write_json(tmp / "warmstart.json", info)
    shutil.rmtree(out_dir, ignore_errors=True)  # a partial entry left by a killed writer
    os.replace(tmp, out_dir)  # the cache entry appears whole or not at all
    return info


def get_warm_start(cfg: Config, tok, task, progress: bool = True) -> tuple[Path, dict]:
    """Path of the cached warm-start model for this config (built under a lock if missing)."""
    if from_path(cfg.model.scale) and cfg.warmup.max_steps == 0:
        return Path(cfg.model.path), {"steps": 0, "flops": 0.0, "wall_s": 0.0, "pass_rate": None}
    tok_name = Path(getattr(tok, "name_or_path", "tok")).name
    out = Path(cfg.run.cache_dir) / "warmstart" / warm_start_key(cfg, tok_name)
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.parent / f".{out.name}.lock"):
        if not (out / "warmstart.json").exists():
            run_warm_start(cfg, tok, task, out, progress=progress)
    info = json.loads((out / "warmstart.json").read_text())
    return out, info


def load_warm_model(path: Path, device) -> torch.nn.Module:
    return load_model(path).to(device)
