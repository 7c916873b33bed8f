"""The planner's wall-clock estimate (analysis/wall.py): each part worked by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from types import SimpleNamespace

from analysis import wall
from analysis.schedule import Group

ROOT = Path(__file__).resolve().parents[1]


def _rows(steps=4, step_s=0.5, every=2, n_items=100, k=2, eval_s=0.25):
    """Metrics rows as the loop writes them: an eval at 0 and every `every` steps, each taking
    `eval_s`, and `steps` train steps of `step_s`; compute/wall_s is cumulative."""
    rows, t = [], 0.0
    for step in range(steps + 1):
        if step:
            t += step_s
            rows.append({"kind": "train", "step": step, "perf/step_s": step_s, "compute/wall_s": t})
        if step % every == 0:
            t += eval_s
            rows.append({"kind": "eval", "step": step, "eval/in_dist/n_items": n_items,
                         "eval/in_dist/k": k, "compute/wall_s": t})
    return rows


def test_a_run_splits_into_train_eval_and_fixed_seconds():
    # 4 steps x 0.5 s = 2.0 s training; 3 evals x 0.25 s = 0.75 s over 100 x 2 sequences each;
    # summary wall 3.25 s -> 0.5 s fixed, plus a 4.5 s launch
    s = wall.split_run(_rows(), summary_wall=3.25, launch_s=4.5)
    assert s["steps"] == 4 and s["n_evals"] == 3 and s["seqs"] == 200
    assert s["train_s"] == pytest.approx(2.0) and s["eval_s"] == pytest.approx(0.75)
    assert s["fixed_s"] == pytest.approx(0.5 + 4.5)
    assert wall.split_run([{"kind": "train", "step": 1}], 1.0) is None  # no timing logged


def test_a_runs_cost_for_another_design_by_hand():
    c = wall.RunCost(train_s_per_step=0.5, eval_s_per_seq=0.75 / (3 * 200), fixed_s=5.0, n_runs=1)
    # 400 steps, eval every 20 (21 evals) of 2048 x 1 sequences:
    # 5 + 400 x 0.5 + 21 x 2048 x 0.00125 = 5 + 200 + 53.76
    assert c.seconds(400, 20, 2048, 1) == pytest.approx(258.76)


def test_list_schedule_by_hand():
    # two workers, jobs in order 3, 3, 2, 2, 2: w1 = 3 + 2 + 2 = 7, w2 = 3 + 2 = 5
    assert wall.list_schedule([3, 3, 2, 2, 2], 2) == 7
    assert wall.list_schedule([3, 3, 2, 2, 2], 1) == 12
    assert wall.list_schedule([10, 1, 1, 1], 2) == 10


def _run_dir(sweep: Path, run_id: str, step_s: float, job_time: float, launch: float) -> Path:
    d = sweep / run_id
    d.mkdir(parents=True)
    rows = _rows(step_s=step_s)
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary_wall = rows[-1]["compute/wall_s"] + 0.5
    (d / "summary.json").write_text(json.dumps({"wall_s": summary_wall}))
    end = job_time + summary_wall + launch
    os.utime(d / "summary.json", (end, end))
    with open(sweep / "jobs.jsonl", "a") as f:
        f.write(json.dumps({"executor": "local", "run_id": run_id, "time": job_time}) + "\n")
    return d


def test_run_costs_take_the_mean_and_the_launch_from_the_job_records(tmp_path):
    """The mean, not the median: one slow (run-away) run in three raises the arm's cost."""
    sw = tmp_path / "pilot"
    dirs = [_run_dir(sw, f"grpo-s{i}", s, 1e9 + 100 * i, 4.0) for i, s in enumerate((0.5, 0.5, 2.0))]
    c = wall.run_costs({"grpo": dirs})["grpo"]
    assert c.n_runs == 3
    assert c.train_s_per_step == pytest.approx(1.0)         # (0.5 + 0.5 + 2.0) / 3
    assert c.eval_s_per_seq == pytest.approx(0.75 / 600)    # 3 evals x 200 sequences
    assert c.fixed_s == pytest.approx(0.5 + 4.0, abs=0.01)  # summary - cumulative, + launch


def test_sweep_wall_charges_unpiloted_arms_as_the_reference():
    c = {"grpo": wall.RunCost(1.0, 0.0, 0.0, 2), "dapo": wall.RunCost(2.0, 0.0, 0.0, 2)}
    groups = [Group("grpo", "s", 10, 10, 2, 1, 1), Group("dapo", "s", 10, 10, 2, 1, 1),
              Group("gspo", "s", 10, 10, 2, 1, 1)]
    # runs: 10, 10, 20, 20, 10, 10 on 2 workers -> w1 10+20+10, w2 10+20+10 = 40
    w, total, assumed = wall.sweep_wall(groups, c, "grpo", 2)
    assert (w, total, assumed) == (40, 80, ["gspo"])
    w, line = wall.estimate(groups, c, "grpo", 2)
    assert "for 6 runs on 2 local worker(s)" in line and "gspo" in line
    assert wall.estimate(groups, {}, "grpo", 2)[0] is None


def _timed_pilot_and_spec(tmp_path: Path) -> Path:
    """A synthetic pilot of GRPO (3 seeds) whose runs log 1.5 s a train step and 2.0 s of
    cumulative wall a step: 200 steps = 300 s training + 100 s evals (21 evals), no launch record;
    and a spec running GRPO and Dr. GRPO (timed as GRPO) x 3 seeds at the same design on one
    worker: six runs of 400 s."""
    import numpy as np
    from analysis.synth import CurveSpec, RunSpec, make_config, write_run
    rng = np.random.default_rng(7)
    for seed in range(3):
        write_run(tmp_path / "pilot" / f"grpo-s{seed}", RunSpec(
            config=make_config("grpo", "tiny-1m", seed),
            curves={"in_dist": CurveSpec(0.55 + rng.normal(0, 0.01), 1.5, 30e12, 0.25)},
            steps=200, eval_every=10, n_items=256, k=4, seed=100 + seed,
            train=lambda step: {"perf/step_s": 1.5}))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nset: {train.steps: 200, eval.every: 10, eval.in_dist.n_items: 256, "
                    "eval.in_dist.k: 4}\ngrid: {algo.preset: [grpo, dr_grpo]}\nseeds: [0, 1, 2]\n"
                    "local: {parallel: 1}\n")
    return spec


def test_plan_cli_prints_the_wall_by_hand(tmp_path):
    """Six runs of 400 s on the spec's one worker: 40.0 min."""
    spec = _timed_pilot_and_spec(tmp_path)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "plan", str(spec), "--pilot",
                           str(tmp_path / "pilot"), "--sweeps", "10", "--no-budget"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("estimated wall:"))
    assert line.startswith("estimated wall: 40.0 min for 6 runs on 1 local worker(s)"), line
    assert "timed as grpo (the pilot did not run them): dr_grpo" in line


def test_workers_for_a_wall_target_by_hand():
    # runs 10, 10, 10, 10, 5 in order; target 20: 2 workers end at 25 (10+10+5), 3 at 20
    assert wall.workers_for([10, 10, 10, 10, 5], 20) == 3
    # target 10: 4 workers still put the 5 after a 10 (15); 5 workers, one run each, end at 10
    assert wall.workers_for([10, 10, 10, 10, 5], 10) == 5
    assert wall.workers_for([10, 10, 10, 10, 5], 9.9) is None  # the longest run alone is 10
    assert wall.workers_for([10, 10, 10, 10, 5], 45) == 1


def test_plan_cli_workers_and_wall_target_by_hand(tmp_path, capsys):
    """The same six runs of 400 s: on 3 workers 800 s (13.3 min); a 15-minute target needs 3 (2
    end at 1,200 s); a 5-minute target no number (one run is 6.7 min). --write still records the
    spec's own design (1 worker: 40.0 min)."""
    import argparse

    import yaml

    from analysis.plan_cli import configure_plan_parser, run_plan

    def plan_main(argv):
        return run_plan(configure_plan_parser(argparse.ArgumentParser()).parse_args(argv))
    spec = _timed_pilot_and_spec(tmp_path)
    base = [str(spec), "--pilot", str(tmp_path / "pilot"), "--sweeps", "10", "--no-budget"]
    assert plan_main(base + ["--workers", "3", "--wall-target", "15", "--write"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(x.startswith("estimated wall: 13.3 min for 6 runs on 3 local worker(s)") for x in out)
    line = next(x for x in out if x.startswith("wall target"))
    assert line.startswith("wall target 15 min for 6 runs (0.7 run-hours): 3 workers (estimated "
                           "13.3 min; the longest run 6.7 min)"), line
    assert yaml.safe_load(spec.read_text())["plan"]["est_wall_min"] == 40.0
    assert plan_main(base + ["--wall-target", "5"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("wall target"))
    assert "no number of workers reaches it: the longest run alone takes 6.7 min" in line
    for bad, key in ((["--workers", "0"], "--workers"), (["--wall-target", "0"], "--wall-target")):
        assert plan_main(base + bad) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and key in err
    assert plan_main([str(spec), "--wall-target", "30"]) == 2  # no pilot: nothing timed
    assert "--wall-target needs --pilot" in capsys.readouterr().err


def test_achieved_wall_and_the_reports_line(tmp_path):
    """First job record to the last summary write; the report prints it beside est_wall_min."""
    sw = tmp_path / "study"
    for i, s in enumerate((0.5, 0.5, 2.0)):
        _run_dir(sw, f"r{i}", s, 1e9 + 100 * i, 4.0)
    # the last run: job at 1e9 + 200; its summary wall = 4 x 2.0 + 3 x 0.25 + 0.5 = 9.25; + 4.0
    assert wall.achieved_wall(tmp_path) == pytest.approx(200 + 9.25 + 4.0, abs=0.01)
    assert wall.achieved_wall(tmp_path / "nothing") is None
    import pandas as pd
    from analysis.plan_report import planner_section
    from analysis.report import Report
    planned = pd.DataFrame([{"comparison": "dapo @ s", "predicted_dA_width": 0.05,
                             "achieved_dA_width": 0.06, "ratio": 1.2, "predicted_80pct": "",
                             "in_80pct": None, "verdict": "not resolved"}])
    planned.attrs["wall"] = (40.0, 44 * 60)
    r = Report()
    planner_section(r, pd.DataFrame(), planned, SimpleNamespace(plan=0, reference="grpo"))
    md = r.to_markdown()
    assert "Pre-registered wall (`est_wall_min`, analysis/wall.py): 40.0 min; the runs took " \
           "44.0 min" in md and "ratio 1.10" in md
    # a sweep that skipped runs it found finished: its wall covers only what it submitted
    assert wall.submitted_runs(tmp_path) == 3
    planned.attrs["wall_runs"] = (3, 12)
    r = Report()
    planner_section(r, pd.DataFrame(), planned, SimpleNamespace(plan=0, reference="grpo"))
    md = r.to_markdown()
    assert "40.0 min for all 12 runs; this sweep submitted 3 of them" in md
    assert "44.0 min, so the two are not compared" in md and "ratio 1.10" not in md


def test_write_plan_records_the_estimated_wall(tmp_path):
    import pandas as pd
    import yaml
    from analysis import plan
    from analysis.calibrate import NoiseModel
    spec = tmp_path / "s.yaml"
    spec.write_text("# header\nname: s\ngrid: {algo.preset: [grpo, dapo]}\n")
    table = pd.DataFrame([{"variant": "dapo", "scale": "s", "dA_width": 0.05}])
    args = SimpleNamespace(pilot="p", sweeps=10, seed=0)
    plan.write_plan(spec, table, plan.PilotNoise(NoiseModel(), (), 20.0), args, wall_s=4488.0)
    assert yaml.safe_load(spec.read_text())["plan"]["est_wall_min"] == 74.8
    plan.write_plan(spec, table, plan.PilotNoise(NoiseModel(), (), 20.0), args)
    assert "est_wall_min" not in yaml.safe_load(spec.read_text())["plan"]  # untimed pilot: none
