"""Synthetic run directories in the contract format (docs/run_format.md), with known curves.

Used by the tests, the benchmark and for trying ``rlablate analyze`` without a GPU::

    python -c "from analysis.synth import write_demo_sweep; write_demo_sweep('results/demo')"

Each run's eval pass rate follows the ScaleRL curve (arXiv 2510.13786, Eq. 1)
``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` plus eval noise; with ``n_items`` set, the noise
comes from simulated items (k samples each; each item has its own start and ceiling, averaging
to R0 and A) and the per-item fractions are written to ``eval_items.jsonl``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from analysis.fit import predict_reward


@dataclass(frozen=True)
class CurveSpec:
    """True curve of one eval set: pass rate R0 at step 0 rising to A (C_mid in FLOPs)."""

    A: float
    B: float
    C_mid: float
    R0: float


@dataclass
class RunSpec:
    """One synthetic run: its config, per-set true curves and how it was logged."""

    config: dict
    curves: dict[str, CurveSpec]
    steps: int = 400
    eval_every: int = 20
    flops_per_step: float = 1e12
    noise: float = 0.01  # eval noise sd when n_items is None
    n_items: int | None = None
    k: int = 4
    seed: int = 0
    status: str = "finished"
    diverged_step: int | None = None
    extra: dict = field(default_factory=dict)
    train: Callable[[int], dict] | None = None  # step -> extra metrics of its train row


def simulate_items(frac: float, r0_i: np.ndarray, a_i: np.ndarray, k: int, rng) -> np.ndarray:
    """Per-item fraction of k samples correct at curve progress ``frac`` in [0, 1].

    Item i succeeds with probability r0_i + (a_i - r0_i) * frac: its own start and ceiling, the
    shared sigmoid in compute. The item-population mean is then exactly the ScaleRL curve with
    R0 = mean(r0_i) and A = mean(a_i), so the synthetic truth is known."""
    return rng.binomial(k, np.clip(r0_i + (a_i - r0_i) * frac, 0.0, 1.0)) / k


def draw_items(curve: CurveSpec, n_items: int, rng, spread: float = 0.15):
    """Item starts and ceilings around (R0, A), kept inside [0, 1] and centred exactly."""
    r0_i = np.clip(curve.R0 + rng.normal(0, spread, n_items), 0.02, 0.98)
    r0_i += curve.R0 - r0_i.mean()
    gain = np.clip(curve.A - curve.R0 + rng.normal(0, spread, n_items), 0.0, 1.0 - r0_i)
    gain *= (curve.A - curve.R0) / max(gain.mean(), 1e-9)
    return r0_i, np.minimum(r0_i + gain, 1.0)


def write_run(run_dir: str | Path, spec: RunSpec) -> Path:
    """Write config.yaml, metrics.jsonl, summary.json (and eval_items.jsonl) for ``spec``."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(spec.config, sort_keys=True))
    last = spec.steps if spec.diverged_step is None else spec.diverged_step
    items = {s: draw_items(c, spec.n_items, rng) for s, c in spec.curves.items()} if spec.n_items else {}
    rows, item_rows, final = [], [], None
    for step in range(0, last + 1):
        flops = step * spec.flops_per_step
        base = {"step": step, "compute/flops": flops, "compute/tokens": step * 1000.0,
                "compute/wall_s": step * 2.0}
        if step > 0:
            rows.append({"kind": "train", **base, "rollout/reward_mean": 0.0, "loss/policy": 0.0,
                         **(spec.train(step) if spec.train else {})})
        if step % spec.eval_every:
            continue
        row = {"kind": "eval", **base}
        for name, c in spec.curves.items():
            p = float(predict_reward(flops, c.A, c.B, c.C_mid, c.R0))
            if spec.n_items:
                frac = float(predict_reward(flops, 1.0, c.B, c.C_mid, 0.0))
                correct = simulate_items(frac, *items[name], spec.k, rng)
                item_rows.append({"step": step, "set": name, "correct": correct.round(4).tolist()})
                rate, se, n = correct.mean(), correct.std(ddof=1) / np.sqrt(correct.size), correct.size
            else:
                rate, se, n = p + rng.normal(0, spec.noise), spec.noise, 500
            row.update({f"eval/{name}/pass@1": float(rate), f"eval/{name}/stderr": float(se),
                        f"eval/{name}/n_items": int(n), f"eval/{name}/k": spec.k,
                        f"eval/{name}/response_len": 300.0})
        rows.append(row)
        final = row
    with open(run_dir / "metrics.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    if item_rows:
        with open(run_dir / "eval_items.jsonl", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in item_rows)
    summary = {"status": spec.status, "step": last, "total_steps": spec.steps, "final": final,
               "error": None, "diverged_step": spec.diverged_step, **spec.extra}
    if spec.status == "diverged":
        summary["error"] = f"loss became NaN at step {spec.diverged_step}"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


SYNTH_ADVANTAGE = {"dr_grpo": "group_mean"}  # the presets' advantage where it is not group_norm


def make_config(algo: str, scale: str, seed: int, **extra) -> dict:
    """A resolved-config-shaped dict, nested and with the harness's own keys (a subset of what
    `rlablate config` prints)."""
    cfg = {"algo": {"preset": algo, "advantage": SYNTH_ADVANTAGE.get(algo, "group_norm"),
                    "kl": "none", "kl_coef": 0.0},
           "model": {"scale": scale},
           "run": {"seed": seed, "name": f"{algo}-{scale}-s{seed}"},
           "optim": {"lr": 1e-6},
           "rollout": {"prompts_per_step": 64}}
    for key, value in extra.items():
        cfg.setdefault(key.split(".")[0], {})[key.split(".")[1]] = value
    return cfg


def write_demo_sweep(root: str | Path, *, algos: dict | None = None, scales=("0.5B", "1.5B"),
                     seeds=(0, 1, 2), n_items: int | None = 200, steps: int = 400,
                     eval_every: int = 20, a_jitter: float = 0.005) -> list[Path]:
    """A multi-algorithm, multi-scale, multi-seed sweep with known curves under ``root``.

    ``algos`` maps name -> (A_in_dist, B, A_held_out) at the smallest scale; larger scales add
    +0.05 to R0 and A, and the two last algorithms swap order at the largest scale so that the
    scale analysis has a rank inversion to find. Each seed's A is jittered by ``a_jitter``.
    Compute is ~1e12 FLOPs per step and C_mid is at a fifth of the run.
    """
    algos = algos or {"grpo": (0.62, 1.8, 0.41), "dapo": (0.66, 1.6, 0.42),
                      "cispo": (0.70, 2.0, 0.43), "dr_grpo": (0.64, 1.2, 0.42)}
    names = list(algos)
    paths = []
    c_mid = 0.2 * steps * 1e12  # the runs end at 5 x C_mid (ScaleRL's ran to ~4-10 x)
    for si, scale in enumerate(scales):
        for ai, algo in enumerate(names):
            a_in, b, a_out = algos[algo]
            if si == len(scales) - 1 and len(names) >= 2 and len(scales) > 1 and ai >= len(names) - 2:
                partner = names[-1] if ai == len(names) - 2 else names[-2]
                a_in = algos[partner][0]  # swap the last two at the largest scale
            for seed in seeds:
                rng = np.random.default_rng(1000 * si + 100 * ai + seed)
                shift = 0.05 * si
                curves = {"in_dist": CurveSpec(a_in + shift + rng.normal(0, a_jitter), b,
                                               c_mid, 0.30 + shift),
                          "held_out": CurveSpec(a_out + shift + rng.normal(0, a_jitter), b,
                                                c_mid, 0.35 + shift)}
                spec = RunSpec(config=make_config(algo, scale, seed), curves=curves, steps=steps,
                               eval_every=eval_every, flops_per_step=1e12 * (1 + 0.01 * seed),
                               n_items=n_items, seed=int(rng.integers(1 << 31)))
                paths.append(write_run(Path(root) / f"{algo}-{scale}-s{seed}", spec))
    return paths
