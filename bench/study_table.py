"""The per-arm tables of a small multi-seed study (LOG.md, issue 18 part 3: sweeps/moe-gspo.yaml,
sweeps/countdown.yaml): for each run, the mean over its train steps of some train metrics and its
in-dist / held-out pass@1 gain from step 0 to its last eval; for each arm (the runs that share the
swept keys except run.seed), the mean over seeds with a 95% t interval; and paired contrasts
between two values of one key at equal other keys and seed (mean difference, 95% t interval).

    python bench/study_table.py results/moe-gspo --arm algo.preset,algo.routing_replay \
        --metrics moe/routing_changed_frac,policy/log_ratio_abs_max \
        --contrast algo.routing_replay=r3:none
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import yaml
from scipy import stats


def _get(cfg: dict, dotted: str):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def run_table(root: Path, arm_keys: list[str], metrics: list[str], sds: list[str] = ()) -> list[dict]:
    """One dict per finished run: its arm keys, seed, per-run metric means (and, for `sds`, the
    standard deviation over steps, `<metric>:sd`) and eval gains."""
    out = []
    for d in sorted(p for p in root.iterdir() if (p / "summary.json").exists()):
        if json.loads((d / "summary.json").read_text()).get("status") != "finished":
            continue
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if r.get("kind") == "train"]
        evals = [r for r in rows if r.get("kind") == "eval"]
        r = {k: _get(cfg, k) for k in arm_keys} | {"seed": cfg["run"]["seed"], "run": d.name}
        for m in metrics:
            vals = [t[m] for t in train if t.get(m) is not None]
            r[m] = statistics.fmean(vals) if vals else float("nan")
        for m in sds:
            vals = [t[m] for t in train if t.get(m) is not None]
            r[f"{m}:sd"] = statistics.stdev(vals) if len(vals) > 1 else float("nan")
        for s in ("in_dist", "held_out"):
            key = f"eval/{s}/pass@1"
            r[f"{s}_r0"], r[f"{s}_final"] = evals[0][key], evals[-1][key]
            r[f"{s}_gain"] = evals[-1][key] - evals[0][key]
        r["wall_s"] = rows[-1].get("compute/wall_s")
        out.append(r)
    return out


def interval(xs: list[float]) -> tuple[float, float, float]:
    """Mean and its 95% t interval (n - 1 degrees of freedom); a single value has none."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, float("nan"), float("nan")
    h = stats.t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5
    return m, m - h, m + h


def fmt(t: tuple[float, float, float], digits: int = 4) -> str:
    return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--arm", required=True, help="comma-separated config keys that define an arm")
    ap.add_argument("--metrics", default="", help="comma-separated train metrics (mean over steps)")
    ap.add_argument("--sd", default="", help="comma-separated train metrics: their spread over steps")
    ap.add_argument("--contrast", action="append", default=[],
                    help="KEY=A:B, the paired difference A - B at equal other arm keys and seed")
    ap.add_argument("--digits", type=int, default=4)
    a = ap.parse_args(argv)
    arm_keys, metrics = a.arm.split(","), [m for m in a.metrics.split(",") if m]
    sds = [m for m in a.sd.split(",") if m]
    runs = run_table(a.root, arm_keys, metrics, sds)
    cols = metrics + [f"{m}:sd" for m in sds] + ["in_dist_gain", "held_out_gain"]
    arms: dict = {}
    for r in runs:
        arms.setdefault(tuple(r[k] for k in arm_keys), []).append(r)
    print(f"{len(runs)} finished runs in {a.root}; wall per run (s): "
          f"median {statistics.median(r['wall_s'] for r in runs):.0f}")
    print("| " + " | ".join(arm_keys + ["seeds", "in-dist R0 -> final"] + cols) + " |")
    print("|" + "---|" * (len(arm_keys) + 2 + len(cols)))
    for arm, rs in arms.items():
        r0 = statistics.fmean(r["in_dist_r0"] for r in rs)
        fin = statistics.fmean(r["in_dist_final"] for r in rs)
        print("| " + " | ".join([str(v) for v in arm] + [str(len(rs)), f"{r0:.3f} -> {fin:.3f}"]
                                + [fmt(interval([r[c] for r in rs]), a.digits) for c in cols]) + " |")
    for c in a.contrast:
        key, vals = c.split("=", 1)
        va, vb = vals.split(":")
        rest = [k for k in arm_keys if k != key]
        print(f"\npaired {key}: {va} - {vb} (same {', '.join(rest)} and seed)")
        print("| " + " | ".join(rest + ["pairs"] + cols) + " |")
        print("|" + "---|" * (len(rest) + 1 + len(cols)))
        groups: dict = {}
        for r in runs:
            if str(r[key]) in (va, vb):
                groups.setdefault(tuple(r[k] for k in rest), {}).setdefault(r["seed"], {})[str(r[key])] = r
        for g, seeds in groups.items():
            pairs = [s for s in seeds.values() if va in s and vb in s]
            if not pairs:  # the other keys have no run at one of the two values
                continue
            diffs = {col: [p[va][col] - p[vb][col] for p in pairs] for col in cols}
            print("| " + " | ".join([str(v) for v in g] + [str(len(pairs))]
                                    + [fmt(interval(diffs[col]), a.digits) for col in cols]) + " |")


if __name__ == "__main__":
    main()
