"""Checkpoints: everything a run needs to continue bit-identically from its last saved step.

`last.pt` is written atomically and the previous one is kept as `prev.pt` (a fallback if last.pt
is ever unreadable); both carry a checksum (`storage.save_checkpoint_file`). A checkpoint holds the
policy, its optimizer and scheduler, both RNG states, the counters, and the state of the optional
parts (the critic and its optimizer, the lagged sampler's snapshots, a finite training set's
per-item history). Rank 0 writes; every rank
resumes from it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from ..models import load_policy_state, policy_state
from ..storage import CheckpointError, load_checkpoint_file, save_checkpoint_file
from .metrics import Counters
from .parts import Parts


def save(p: Parts, ckpt_dir: Path) -> None:
    if not p.dp.is_main:  # under data parallel every rank holds the same weights
        return
    extra = {} if p.critic is None else {"critic": p.critic.model.state_dict(),
                                         "critic_optim": p.critic.optimizer.state_dict()}
    if p.lagged is not None:
        extra["lag_snapshots"] = list(p.lagged.snapshots)
    if p.train_set is not None and p.train_set.finite:  # per-item history (prompt retirement)
        extra["train_set"] = p.train_set.state_dict()
    obj = {"model": policy_state(p.policy), "optim": p.optimizer.state_dict(),
           "sched": p.scheduler.state_dict(), "rng_torch": torch.get_rng_state(),
           "rng_python": random.getstate(), "state": p.counters.to_dict(), **extra}
    save_checkpoint_file(obj, ckpt_dir / "last.pt", ckpt_dir / "prev.pt", step=p.counters.step)


def load(ckpt_dir: Path) -> dict | None:
    """last.pt, else prev.pt: the first that loads and matches its checksum; each one refused is
    one line on stderr. None (start over: same seed, same result) if neither is usable."""
    for name in ("last.pt", "prev.pt"):
        path = ckpt_dir / name
        if path.exists():
            try:
                return load_checkpoint_file(path)
            except CheckpointError as e:  # truncated or corrupted: fall back, say so
                tqdm.write(f"rlablate: warning: checkpoint {e}; "
                           + ("trying prev.pt" if name == "last.pt" else "starting the run over"),
                           file=sys.stderr)
    return None


def restore(p: Parts, ckpt: dict) -> None:
    """Put every part back to the checkpoint's state (then engines with their own copy of the
    weights are synced by the caller)."""
    load_policy_state(p.policy, ckpt["model"])
    if p.critic is not None:
        p.critic.model.load_state_dict(ckpt["critic"])
        p.critic.optimizer.load_state_dict(ckpt["critic_optim"])
    if p.lagged is not None:
        p.lagged.snapshots.clear()
        p.lagged.snapshots.extend(ckpt["lag_snapshots"])
    if "train_set" in ckpt:
        p.train_set.load_state_dict(ckpt["train_set"])
    p.optimizer.load_state_dict(ckpt["optim"])
    p.scheduler.load_state_dict(ckpt["sched"])
    torch.set_rng_state(ckpt["rng_torch"])
    random.setstate(ckpt["rng_python"])
    p.counters = Counters.from_dict(ckpt["state"])
