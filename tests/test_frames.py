"""analysis/frames.py, the DataFrame API: `from analysis import load` gives tidy runs / evals /
train frames with the resolved config as columns; `rlablate export` writes them as Parquet or CSV;
every CSV the analysis writes, even of an empty table, reads back with pd.read_csv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.synth import write_demo_sweep

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("frames") / "sw"
    write_demo_sweep(root, algos={"grpo": (0.6, 1.4, 0.4), "dapo": (0.66, 1.8, 0.41)},
                     scales=("0.5B",), seeds=(0, 1), n_items=40, steps=60, eval_every=20)
    return root


def test_load_is_the_documented_two_liner(sweep):
    from analysis import load
    r = load(sweep)
    assert len(r.runs) == 4 and set(r.runs["algo.preset"]) == {"grpo", "dapo"}
    assert sorted(r.runs["run.seed"].unique()) == [0, 1]
    # evals: 4 runs x 4 eval points (0, 20, 40, 60) x 2 sets, config as columns
    assert len(r.evals) == 32 and set(r.evals["eval_set"]) == {"in_dist", "held_out"}
    assert {"step", "compute", "pass_rate", "stderr", "algo.preset", "optim.lr"} <= set(r.evals)
    # train: every training row with every metric of metrics.jsonl under its own name
    rows = [json.loads(x) for x in (sweep / "grpo-0.5B-s0" / "metrics.jsonl").read_text().splitlines()]
    train_rows = [x for x in rows if x["kind"] == "train"]
    mine = r.train[r.train["run_id"] == "grpo-0.5B-s0"].sort_values("step")
    assert list(mine["step"]) == [x["step"] for x in train_rows]
    metric = next(k for k in train_rows[0] if k not in ("kind", "step"))
    assert list(mine[metric]) == pytest.approx([x[metric] for x in train_rows])
    assert set(mine["algo.preset"]) == {"grpo"} and "model.scale" in r.train.columns
    # the same module still holds the loader the analysis uses
    from analysis.load import load_results
    assert len(load_results(sweep).runs) == 4


@pytest.mark.parametrize("flag,reader", [("--parquet", pd.read_parquet), ("--csv", pd.read_csv)])
def test_export_writes_the_three_frames(sweep, tmp_path, flag, reader):
    from analysis import load
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "export", str(sweep), flag,
                        "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    frames = load(sweep)
    ext = flag[2:]
    for name in ("runs", "evals", "train"):
        back = reader(out / f"{name}.{ext}")
        want = getattr(frames, name)
        assert back.shape == want.shape, name
        assert list(back.columns) == list(want.columns)
    evals = reader(out / f"evals.{ext}")
    assert evals["pass_rate"].to_numpy() == pytest.approx(frames.evals["pass_rate"].to_numpy())


def test_export_of_nothing_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "export", str(tmp_path / "empty")],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "no run directories under" in r.stderr
    assert list((tmp_path / "empty").iterdir()) == []


def test_an_empty_table_still_reads_back_with_read_csv(tmp_path):
    from analysis.frames import write_frame
    write_frame(pd.DataFrame(), tmp_path / "a.csv")
    write_frame(pd.DataFrame(columns=["x", "y"]), tmp_path / "b.csv")
    assert pd.read_csv(tmp_path / "a.csv").empty
    assert list(pd.read_csv(tmp_path / "b.csv").columns) == ["x", "y"]
