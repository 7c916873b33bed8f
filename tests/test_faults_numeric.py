"""Fault injection, numerics: NaN or Inf in the rewards, the advantages or the loss stops the run
as `diverged` with the step (exit code 3), keeps the last good checkpoint, and the analysis
excludes the run from every fit and says so in the report.

The non-finite values are injected by the test-only hook `RLABLATE_FAULT=nan=reward:3`
(harness/faults.py) at the loop's own checks; test_loop_train.py has a NaN that a (test-only)
advantage estimator really produces.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from faultlib import overrides, row_keys
from harness.cli import main
from harness.config import load_config
from harness.storage import load_checkpoint_file
from harness.loop import train

pytestmark = pytest.mark.faults


@pytest.mark.parametrize("what", ["reward", "advantage", "loss"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_value_stops_the_run_as_diverged_with_its_step(tmp_path, cache_dir, monkeypatch,
                                                                  what, value):
    monkeypatch.setenv("RLABLATE_FAULT", f"{value}={what}:3")
    cfg = load_config(None, overrides(tmp_path / "results", cache_dir))
    summary = train(cfg, progress=False)
    d = cfg.run_dir()
    on_disk = json.loads((d / "summary.json").read_text())
    for s in (summary, on_disk):
        assert s["status"] == "diverged" and s["diverged_step"] == 3
        assert s["error"] == f"non-finite {what} at step 3"
    assert row_keys(d) == [("eval", 0), ("train", 1), ("train", 2)]   # nothing logged for step 3
    assert load_checkpoint_file(d / "checkpoints" / "last.pt")["state"]["step"] == 2


def test_cli_exit_code_3_and_one_line(tmp_path, cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("RLABLATE_FAULT", "nan=loss:2")
    rc = main(["train", *overrides(tmp_path / "results", cache_dir), "--quiet"])
    captured = capsys.readouterr()
    assert rc == 3
    assert captured.out.startswith("diverged: ")
    assert [x for x in captured.err.splitlines() if x.startswith("rlablate:")] == [
        "rlablate: non-finite loss at step 2"]


def test_analysis_excludes_a_diverged_run_from_fits_and_says_so(tmp_path, cache_dir, monkeypatch,
                                                                capsys):
    from analysis.synth import write_demo_sweep
    sweep = tmp_path / "an" / "sw"
    write_demo_sweep(sweep, algos={"grpo": (0.6, 1.5, 0.4), "dapo": (0.7, 1.5, 0.4)},
                     scales=("0.5B",), seeds=(0, 1), n_items=100, steps=120, eval_every=20)
    monkeypatch.setenv("RLABLATE_FAULT", "nan=reward:3")
    cfg = load_config(None, overrides(tmp_path / "results", cache_dir))
    assert train(cfg, progress=False)["status"] == "diverged"
    shutil.copytree(cfg.run_dir(), sweep / cfg.run_id())
    assert main(["analyze", str(sweep), "--out", str(tmp_path / "out"), "--bootstrap", "50"]) == 0
    capsys.readouterr()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "1 run(s) excluded from fits" in report
    row = next(x for x in report.splitlines() if cfg.run_id() in x and "diverged at step 3" in x)
    assert "non-finite reward at step 3" in row
    fits = pd.read_csv(tmp_path / "out" / "fits.csv")
    assert not fits.astype(str).apply(lambda c: c.str.contains(cfg.run_id())).any().any()
    assert len(fits) > 0  # the other runs were fitted
