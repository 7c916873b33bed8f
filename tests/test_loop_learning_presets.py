"""Each preset added by issue 18 runs the real loop on the embedded default and learns: from the
cached warm start, one seed of 60 steps raises in-distribution pass@1 by more than 2 paired standard
errors on the same 256 fixed eval items (the criterion of test_loop_learning.py for one GRPO seed).
Measured numbers: LOG.md, issue 18."""

from __future__ import annotations

import json

import pytest

from harness.config import load_config
from harness.loop import train
from test_loop_learning import _paired_gain

pytestmark = pytest.mark.slow
STEPS = 60


@pytest.mark.parametrize("preset", ["sapo", "gmpo", "dppo_tv", "dppo_kl", "luspo", "vespo"])
def test_new_preset_learns_on_the_default_config(preset, tmp_path, cache_dir):
    cfg = load_config("configs/default.yaml", [
        f"algo.preset={preset}", f"run.results_dir={tmp_path}", f"run.cache_dir={cache_dir}",
        "run.sweep=learn", f"train.steps={STEPS}", "eval.every=30", f"train.checkpoint_every={STEPS}",
        "eval.in_dist.n_items=256", "eval.held_out.n_items=64", "run.threads=1"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished"
    r0, final, gain, se = _paired_gain(cfg.run_dir(), STEPS)
    print(f"{preset}: in-dist pass@1 {r0:.3f} -> {final:.3f}, gain {gain:+.3f} (paired SE {se:.3f})")
    assert gain > 2 * se, (preset, gain, se)
    rows = [json.loads(line) for line in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss/policy"] is not None for r in rows if r["kind"] == "train" and r["rollout/kept_groups"])
