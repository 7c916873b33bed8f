"""`rlablate analyze --up-to-step N`: every run as it stood at step N. Checked against the same runs
physically cut at N (their metrics and per-item rows after N deleted): the tables must be the same
byte for byte, the sequential replay included."""
from __future__ import annotations

import pytest

from analysis.cli import main
from sweeplib import cut_runs, synthetic_sweep

TRUE_A = {"grpo": 0.60, "cispo": 0.72, "rloo": 0.50}


def _sweep(root):
    synthetic_sweep(root, TRUE_A)


def test_up_to_step_is_the_sweep_cut_there(tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    _sweep(full)
    cut_runs(full, cut, 200)
    assert sum(1 for _ in (cut / "grpo-s0" / "metrics.jsonl").open()) < \
        sum(1 for _ in (full / "grpo-s0" / "metrics.jsonl").open())
    common = ["--bootstrap", "200", "--calibrate", "0", "--plan", "0", "--margin", "0.05",
              "--halving-replay", "100", "--halving-rule", "resolved"]
    assert main([str(full), "--up-to-step", "200", "--out", str(tmp_path / "a")] + common) == 0
    assert main([str(cut), "--out", str(tmp_path / "b")] + common) == 0
    for name in ("fits.csv", "effects.csv", "leaderboard.csv", "claims.csv", "halving.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert "**Every run as it stood at step 200**" in (tmp_path / "a" / "report.md").read_text()
    # and the cut changes what is read: the full sweep's fits differ
    assert main([str(full), "--out", str(tmp_path / "c")] + common) == 0
    assert (tmp_path / "c" / "fits.csv").read_bytes() != (tmp_path / "a" / "fits.csv").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--up-to-step", "0"], "--up-to-step = 0: must be a positive step"),
    (["--up-to-step", "200", "--halving-replay", "100,200"],
     "--halving-replay 200: at or past --up-to-step 200"),
])
def test_up_to_step_refuses_what_cannot_act(tmp_path, capsys, args, message):
    _sweep(tmp_path)
    assert main([str(tmp_path)] + args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.count("\n") == 0, err
    assert not (tmp_path / "analysis").exists()
