"""What a chain_sum run's policy writes: how many times its responses work the chain, at the warm
start and at the run's last checkpoint (task.recheck_share, LOG.md session 29).

    .venv/bin/python scripts/response_styles.py RUN_DIR [RUN_DIR ...] [--items 1024] [--csv FILE]

Samples one response per item of the in-dist eval set (the run's eval seed and temperature; the
hard share's items are left out, as no length of theirs is a choice) and prints, per snapshot, the
share of responses that work the chain once, twice, otherwise (other) or never finish (cut off),
with each class's pass rate and mean length, and the mean length of the incorrect responses.
``--csv`` also writes one row per run, snapshot and class.
"""
from __future__ import annotations

import argparse
import collections
import csv
from pathlib import Path

import torch
import yaml

from harness.config.load import config_from_dict
from harness.distributed import DistInfo
from harness.loop import checkpoint
from harness.loop.parts import build_parts
from harness.models import load_policy_state

CLASSES = ("once", "twice", "other", "cut off")


def passes(prompt: str, response: str) -> str:
    """'once', 'twice', 'other' (another count of '=' per operator) or 'cut off' (no '.')."""
    if "." not in response:
        return "cut off"
    ops = sum(prompt.count(c) for c in "+-")
    n = response.split(".", 1)[0].count("=")
    return {ops: "once", 2 * ops: "twice"}.get(n, "other")


def sample(p, items) -> list[dict]:
    """One row per class: share, pass rate, mean length (nan where the class is empty); plus
    the row 'incorrect' (share of incorrect responses, their mean length)."""
    torch.manual_seed(p.cfg.eval.seed)
    ro = p.engine.generate([it.prompt for it in items], max_new_tokens=p.cfg.rollout.max_new_tokens,
                           temperature=p.cfg.eval.temperature)
    by = collections.defaultdict(list)
    for it, text, n in zip(items, ro.texts, ro.lengths.tolist()):
        ok = p.task.score(text, it)
        by[passes(it.prompt, text)].append((ok, n))
        if not ok:
            by["incorrect"].append((ok, n))
    nan = float("nan")
    return [{"class": k, "share": len(by[k]) / len(items),
             "pass": sum(o for o, _ in by[k]) / len(by[k]) if by[k] else nan,
             "len": sum(n for _, n in by[k]) / len(by[k]) if by[k] else nan}
            for k in (*CLASSES, "incorrect")]


def run_styles(run_dir: Path, n_items: int) -> list[dict]:
    """Rows (run, snapshot, class, share, pass, len) at the warm start and the last checkpoint."""
    cfg = config_from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
    p = build_parts(cfg, DistInfo(), progress=False)
    items = [it for it in p.task.eval_set("in_dist", n_items)
             if it.entry["metadata"]["expression"].count(" ") < 2 * cfg.task.n_terms]
    rows = [{"run": run_dir.name, "snapshot": "warm start", "items": len(items), **r}
            for r in sample(p, items)]
    ckpt = checkpoint.load(run_dir / "checkpoints")
    if ckpt is not None:
        load_policy_state(p.policy, ckpt["model"])
        step = f"step {ckpt['state'].get('step')}"
        rows += [{"run": run_dir.name, "snapshot": step, "items": len(items), **r}
                 for r in sample(p, items)]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dirs", type=Path, nargs="+")
    ap.add_argument("--items", type=int, default=1024)
    ap.add_argument("--csv", type=Path)
    a = ap.parse_args()
    torch.set_num_threads(1)
    out = []
    for d in a.run_dirs:
        rows = run_styles(d, a.items)
        out += rows
        print(f"{d.name}: {rows[0]['items']} in_dist items (hard share left out)")
        for snap in dict.fromkeys(r["snapshot"] for r in rows):
            print(f" {snap}")
            for r in rows:
                if r["snapshot"] == snap and r["share"] > 0:
                    print(f"  {r['class']:9s} share {r['share']:.3f}  pass {r['pass']:.3f}  "
                          f"len {r['len']:5.1f}")
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)


if __name__ == "__main__":
    main()
