"""The loop actually learns, and the analysis reads what it wrote.

From the cached warm start, short GRPO runs (2 seeds x 60 steps) on the embedded default raise
in-distribution pass@1: each seed by more than 2 paired standard errors and their mean by more
than 4 (items are the unit; the same fixed eval items before and after, so the SE of the per-item
difference is the right one: Miller 2024, arXiv 2411.00640). 40 steps were borderline when the
warm start's threshold check passed early (a seed gained 2.6 SE: LOG.md).
Then `rlablate analyze` on that real two-run sweep writes the report, tables and plots, with a
fitted curve.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

from harness.config import load_config
from harness.loop import train

pytestmark = pytest.mark.slow
STEPS = 60


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, cache_dir):
    root = tmp_path_factory.mktemp("learn")
    cfgs = []
    for seed in (0, 1):
        cfg = load_config("configs/default.yaml", [
            f"run.results_dir={root}", f"run.cache_dir={cache_dir}", "run.sweep=learn",
            f"run.seed={seed}", f"train.steps={STEPS}", "eval.every=10",
            f"train.checkpoint_every={STEPS}", "eval.in_dist.n_items=256", "eval.held_out.n_items=128"])
        summary = train(cfg, progress=False)
        assert summary["status"] == "finished"
        assert summary["warm_start"]["pass_rate"] >= cfg.warmup.target_pass_rate
        cfgs.append(cfg)
    return root / "learn", cfgs


def _paired_gain(run_dir, step):
    items = [json.loads(l) for l in (run_dir / "eval_items.jsonl").read_text().splitlines()]
    before = next(r["correct"] for r in items if r["step"] == 0 and r["set"] == "in_dist")
    after = next(r["correct"] for r in items if r["step"] == step and r["set"] == "in_dist")
    d = [a - b for a, b in zip(after, before)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return sum(before) / n, sum(after) / n, mean, se


def test_grpo_on_the_default_config_learns(sweep):
    _, cfgs = sweep
    gains, ses = [], []
    for cfg in cfgs:
        r0, final, gain, se = _paired_gain(cfg.run_dir(), STEPS)
        print(f"seed {cfg.run.seed}: in-dist pass@1 {r0:.3f} -> {final:.3f}, gain {gain:+.3f} "
              f"(paired SE {se:.3f})")
        assert gain > 2 * se, (gain, se)
        gains.append(gain)
        ses.append(se)
        rows = [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
        evals = [r for r in rows if r["kind"] == "eval"]
        assert [r["step"] for r in evals] == list(range(0, STEPS + 1, 10))
        assert all("eval/held_out/pass@1" in r for r in evals)  # reported beside it
    mean, se_mean = sum(gains) / 2, math.sqrt(ses[0] ** 2 + ses[1] ** 2) / 2
    assert mean > 4 * se_mean, (gains, ses)


def test_analyze_a_real_sweep_of_the_loop(sweep, tmp_path):
    sweep_dir, _ = sweep
    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "analyze", str(sweep_dir), "--out", str(out),
                        "--bootstrap", "200"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for name in ("report.md", "report.html", "leaderboard.csv", "fits.csv", "curves_in_dist.png",
                 "gains.png"):
        assert (out / name).stat().st_size > 0, name
    board = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert len(board) == 1 and int(board[0]["n_runs"]) == 2
    r0, a = float(board[0]["R0"]), float(board[0]["A"])
    assert 0 < r0 < a <= 1  # a rising curve was fitted above the warm start
    report = (out / "report.md").read_text()
    assert "in_dist" in report and "held_out" in report
