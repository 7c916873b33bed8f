"""Helpers of the fault-injection suite (tests/test_faults_*.py).

Runs are trained in child processes forked from a forkserver that has imported the harness once,
so a trial costs the training, not the ~10 s import of torch + transformers; a child that SIGKILLs
itself (harness/faults.py) dies like any killed process: no finally, no atexit, no flush.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
from pathlib import Path

import torch

from conftest import TINY

VOLATILE = ("perf/", "compute/wall_s")
_CTX = None

# The trial run: 6 steps, checkpoints after the step-0 eval and at steps 2, 4, 6; evals at 0, 3, 6.
STEPS = 6
COMMON = [x for x in TINY if not x.startswith(("train.steps", "eval.every"))] + [
    f"train.steps={STEPS}", "eval.every=3", "train.checkpoint_every=2"]


def overrides(root: Path, cache_dir: Path) -> list[str]:
    return COMMON + [f"run.results_dir={root}", f"run.cache_dir={cache_dir}"]


def train_reference(root: Path, cache_dir: Path) -> Path:
    """The uninterrupted run a trial must reproduce (trained in this process)."""
    from harness.config import load_config
    from harness.loop import train
    cfg = load_config(None, overrides(root, cache_dir))
    assert train(cfg, progress=False)["status"] == "finished"
    return cfg.run_dir()


def assert_same_as_reference(run_dir: Path, reference: Path) -> None:
    """Finished; every row once, every value equal; model, optimizer and torch RNG bit-identical;
    no temp file left; both checkpoints verify."""
    from harness.storage import load_checkpoint_file
    got, want = row_keys(run_dir), row_keys(reference)
    assert lost_and_duplicated(got, want) == (0, 0) and got == want
    assert stable(rows(run_dir)) == stable(rows(reference))
    assert lines(run_dir / "eval_items.jsonl") == lines(reference / "eval_items.jsonl")
    a, b = checkpoint(run_dir), checkpoint(reference)
    for c in (a, b):  # wall time; Python's `random` state (unseeded, unused by the loop: it
        c["state"].pop("wall_s"), c.pop("rng_python"), c.pop("sha256")  # differs per process)
    assert same_tensors(a, b), "parameters, optimizer or RNG state differ from the uninterrupted run"
    assert stale_tmp(run_dir) == []
    for f in ("last.pt", "prev.pt"):
        load_checkpoint_file(run_dir / "checkpoints" / f)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"


def _ctx():
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["harness.loop.train", "harness.config", "faultlib"])
    return _CTX


def _child(overrides: list[str], fault: str | None) -> None:
    from harness.config import load_config
    from harness.loop import train
    if fault:
        os.environ["RLABLATE_FAULT"] = fault
    else:
        os.environ.pop("RLABLATE_FAULT", None)
    summary = train(load_config(None, overrides), progress=False)
    os._exit({"finished": 0, "diverged": 3}.get(summary["status"], 1))


def run_child(overrides: list[str], fault: str | None = None, timeout: float = 300) -> int:
    """Train in a fresh process; its exit code (-9 when killed by SIGKILL)."""
    p = _ctx().Process(target=_child, args=(list(overrides), fault))
    p.start()
    p.join(timeout)
    if p.is_alive():  # pragma: no cover - a hang is a failure, not a wait
        p.kill()
        p.join()
        raise AssertionError(f"trial with fault {fault!r} did not end within {timeout} s")
    return p.exitcode


KILLED = -signal.SIGKILL


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in lines(run_dir / "metrics.jsonl")]


def stable(rs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rs]


def row_keys(run_dir: Path) -> list[tuple[str, int]]:
    return [(r["kind"], r["step"]) for r in rows(run_dir)]


def lost_and_duplicated(got: list[tuple], want: list[tuple]) -> tuple[int, int]:
    """(rows of `want` missing from `got`, rows of `got` present more than once)."""
    lost = len(set(want) - set(got))
    dup = len(got) - len(set(got))
    return lost, dup


def checkpoint(run_dir: Path, name: str = "last.pt") -> dict:
    return torch.load(run_dir / "checkpoints" / name, map_location="cpu", weights_only=True)


def same_tensors(a, b) -> bool:
    """Bit-identical nested state (model, optimizer, RNG): every tensor torch.equal, the rest ==."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same_tensors, a, b))
    return a == b


def stale_tmp(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob(".*.tmp*"))


def checksums(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


def tree(root: Path) -> list[str]:
    """Every path under `root` (to assert that nothing was created)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []
