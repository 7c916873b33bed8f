"""Helpers shared by the sweep tests (test_sweep_*.py): tiny specs written to a tmp dir; and by
the analysis tests of finished sweeps (test_halving.py, test_up_to_step.py, test_plan.py):
synthetic sweeps with known ceilings, and copies of a sweep cut at a step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import yaml

from conftest import TINY

TINY_SET = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in TINY)}


def write_spec(tmp_path: Path, spec: dict, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def tiny_spec(tmp_path: Path, cache_dir: Path, **extra) -> dict:
    spec = {"name": "t", "base": "grpo",
            "set": {**TINY_SET, "run.results_dir": str(tmp_path / "results"),
                    "run.cache_dir": str(cache_dir)}}
    spec.update(extra)
    return spec


def drop_swept(spec: dict) -> dict:
    """The tiny `set` fixes model.scale etc.; a test that sweeps a key takes it out of `set`."""
    swept = set(spec.get("grid", {})) | {k for g in spec.get("zip", []) for k in g}
    spec["set"] = {k: v for k, v in spec["set"].items() if k not in swept}
    return spec


def synthetic_sweep(root: Path, true_a: dict[str, float], steps: int = 400,
                    seeds=(0, 1, 2)) -> None:
    """One synthetic run per arm and seed under ``root`` (analysis.synth): the ScaleRL curve with
    ceiling ``true_a[arm]`` (+ a seed effect of sd 0.005), B 1.6, C_mid 30e12, R0 0.3, eval every
    10 steps on 256 items x 4 samples."""
    from analysis.synth import CurveSpec, RunSpec, make_config, write_run
    for ai, (algo, A) in enumerate(true_a.items()):
        for seed in seeds:
            rng = np.random.default_rng(10 * ai + seed)
            spec = RunSpec(config=make_config(algo, "1m", seed),
                           curves={"in_dist": CurveSpec(A + rng.normal(0, 0.005), 1.6, 30e12, 0.3)},
                           steps=steps, eval_every=10, n_items=256, k=4, seed=100 * ai + seed)
            write_run(root / f"{algo}-s{seed}", spec)


def cut_runs(src: Path, dst: Path, step: int) -> None:
    """A copy of the sweep ``src`` whose runs end at ``step``: metrics and per-item rows after it
    deleted, everything else kept (what `--up-to-step` must read the same as)."""
    shutil.copytree(src, dst)
    for path in list(dst.glob("*/metrics.jsonl")) + list(dst.glob("*/eval_items.jsonl")):
        rows = [line for line in path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= step]
        path.write_text("\n".join(rows) + "\n")
