"""The loop actually learns: from the cached warm start, a short GRPO run on the embedded default
raises in-distribution pass@1 by more than 3 paired standard errors (items are the unit; the same
fixed eval items before and after, so the SE of the per-item difference is the right one:
Miller 2024, arXiv 2411.00640)."""

from __future__ import annotations

import json
import math

import pytest

from harness.config import load_config
from harness.train import train

pytestmark = pytest.mark.slow


def test_grpo_on_the_default_config_learns(tmp_path, cache_dir):
    cfg = load_config("configs/default.yaml", [
        f"run.results_dir={tmp_path}", f"run.cache_dir={cache_dir}",
        "train.steps=60", "eval.every=60", "train.checkpoint_every=60",
        "eval.in_dist.n_items=256", "eval.held_out.n_items=128"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished"
    assert summary["warm_start"]["pass_rate"] >= cfg.warmup.target_pass_rate
    items = [json.loads(l) for l in (cfg.run_dir() / "eval_items.jsonl").read_text().splitlines()]
    before = next(r["correct"] for r in items if r["step"] == 0 and r["set"] == "in_dist")
    after = next(r["correct"] for r in items if r["step"] == 60 and r["set"] == "in_dist")
    d = [a - b for a, b in zip(after, before)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    print(f"in-dist pass@1 {sum(before)/n:.3f} -> {sum(after)/n:.3f}, gain {mean:+.3f} (paired SE {se:.3f})")
    assert mean > 3 * se, (mean, se)
    held = [r for r in items if r["set"] == "held_out"]
    assert len(held) == 2  # reported beside it, at the start and at the end
