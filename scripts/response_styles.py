"""What a chain_sum run's policy writes: how many times its responses work the chain, at the warm
start and at the run's last checkpoint (task.recheck_share, LOG.md session 29).

    .venv/bin/python scripts/response_styles.py RUN_DIR [--items 1024] [--split in_dist]

Samples one response per item of the split's eval set (the run's eval seed and temperature; the
hard share's items are left out, as no length of theirs is a choice) and prints, per snapshot, the
share of responses that work the chain once, twice, otherwise (other) or never finish (cut off),
with each class's pass rate and mean length, and the mean length of the incorrect responses.
"""
from __future__ import annotations

import argparse
import collections
from pathlib import Path

import torch

import yaml

from harness.config.load import config_from_dict
from harness.distributed import DistInfo
from harness.loop import checkpoint
from harness.loop.parts import build_parts
from harness.models import load_policy_state


def passes(prompt: str, response: str) -> str:
    """'once', 'twice', 'other' (another count of '=' per operator) or 'cut off' (no '.')."""
    if "." not in response:
        return "cut off"
    ops = sum(prompt.count(c) for c in "+-")
    n = response.split(".", 1)[0].count("=")
    return {ops: "once", 2 * ops: "twice"}.get(n, "other")


def table(p, items) -> list[str]:
    torch.manual_seed(p.cfg.eval.seed)
    ro = p.engine.generate([it.prompt for it in items], max_new_tokens=p.cfg.rollout.max_new_tokens,
                           temperature=p.cfg.eval.temperature)
    rows = collections.defaultdict(list)
    wrong = []
    for it, text, n in zip(items, ro.texts, ro.lengths.tolist()):
        ok = p.task.score(text, it)
        rows[passes(it.prompt, text)].append((ok, n))
        if not ok:
            wrong.append(n)
    out = [f"  {k:8s} share {len(v) / len(items):.3f}  pass {sum(o for o, _ in v) / len(v):.3f}  "
           f"len {sum(n for _, n in v) / len(v):5.1f}" for k, v in sorted(rows.items())]
    out.append(f"  incorrect: {len(wrong)} responses, mean length "
               f"{sum(wrong) / max(len(wrong), 1):.2f} tokens")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--items", type=int, default=1024)
    ap.add_argument("--split", default="in_dist")
    a = ap.parse_args()
    cfg = config_from_dict(yaml.safe_load((a.run_dir / "config.yaml").read_text()))
    torch.set_num_threads(1)
    p = build_parts(cfg, DistInfo(), progress=False)
    items = [it for it in p.task.take(a.split, 0, a.items)[0]
             if it.entry["metadata"]["expression"].count(" ") < 2 * cfg.task.n_terms]
    print(f"{a.run_dir.name}: {len(items)} {a.split} items (hard share left out)")
    print("warm start"), print("\n".join(table(p, items)))
    ckpt = checkpoint.load(a.run_dir / "checkpoints")
    if ckpt is not None:
        load_policy_state(p.policy, ckpt["model"])
        print(f"step {ckpt['state'].get('step')}"), print("\n".join(table(p, items)))


if __name__ == "__main__":
    main()
