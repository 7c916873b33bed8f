"""harness.sweep.launch and the executor table: launching through submitit for real (local and
debug executors), idempotent re-runs, a killed job resubmitted alone, --only, the start order.
The SLURM tests are in test_sweep_slurm.py."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT
from harness.cli import main
from harness.sweep.executors import start_order
from harness.sweep.expand import expand
from harness.sweep.launch import launch, plan
from harness.sweep.spec import load_spec
from harness.sweep.status import lock_held, run_states, runs_of_dir, status_report
from sweeplib import tiny_spec, write_spec

def _checksums(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


def _steps(run_dir: Path, kind: str) -> list[int]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if r["kind"] == kind]


def wait_for_step(rdir: Path, step: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not ((rdir / "metrics.jsonl").exists() and max(_steps(rdir, "train") or [0]) >= step):
        assert time.time() < deadline, f"{rdir.name} did not reach step {step} in {timeout} s"
        time.sleep(0.3)


@pytest.mark.slow
def test_local_executor_two_runs_then_rerun_is_a_no_op(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    assert main(["sweep", str(path), "--executor", "local", "--parallel", "2", "--progress"]) == 0
    cap = capsys.readouterr()
    out = cap.out
    assert "submitting 2, skipping 0" in out and "2 of 2 submitted runs finished" in out
    assert out.count("finished  ") == 2  # each run's outcome, written above the bar
    # one bar over both runs' 4 steps, ending with every run done
    assert "2 runs: 100%" in cap.err and "8/8" in cap.err and "2/2 done" in cap.err, cap.err
    sdir = tmp_path / "results" / "t"
    runs = expand(load_spec(path))
    sums = {}
    for r in runs:
        s = json.loads((sdir / r.run_id / "summary.json").read_text())
        assert s["status"] == "finished" and s["step"] == 4
        assert _steps(sdir / r.run_id, "train") == [1, 2, 3, 4]
        sums[r.run_id] = _checksums(sdir / r.run_id)
    rec = json.loads((sdir / "sweep.json").read_text())
    assert rec["git"]["commit"] and rec["versions"]["torch"] and rec["versions"]["submitit"]
    assert rec["spec"]["name"] == "t" and len(rec["runs"]) == 2 and len(rec["launches"]) == 1
    assert (sdir / "spec.yaml").exists() and list((sdir / "_submitit").glob("*/*_log.out"))
    # status: counts and per-run rows
    assert main(["status", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 0 pending, 0 running, 0 failed, 2 finished, 0 diverged" in out
    assert all(r.run_id in out for r in runs) and "4/4" in out
    # re-run: nothing submitted, finished results untouched
    jobs_before = (sdir / "jobs.jsonl").read_text()
    assert main(["sweep", str(path), "--executor", "local"]) == 0
    assert "submitting 0, skipping 2 (2 finished)" in capsys.readouterr().out
    assert (sdir / "jobs.jsonl").read_text() == jobs_before
    for r in runs:
        assert _checksums(sdir / r.run_id) == sums[r.run_id]
    assert len(json.loads((sdir / "sweep.json").read_text())["launches"]) == 2


@pytest.mark.slow
def test_killed_run_is_resubmitted_and_resumes(tmp_path, cache_dir, capsys):
    """SIGKILL a local job mid-run: its run is 'incomplete', the next launch resubmits it only, and
    it resumes from its checkpoint with every metric row exactly once."""
    raw = tiny_spec(tmp_path, cache_dir, seeds=[0])
    raw["set"].update({"train.steps": 20, "eval.every": 10, "rollout.max_new_tokens": 12})
    path = write_spec(tmp_path, raw)
    spec = load_spec(path)
    (run,) = expand(spec)
    sdir, rdir = tmp_path / "results" / "t", tmp_path / "results" / "t" / run.run_id
    done = threading.Event()
    th = threading.Thread(target=lambda: (launch(spec, [run], "local", out=lambda s: None), done.set()))
    th.start()
    wait_for_step(rdir, 5)
    pid = json.loads((sdir / "attempts.jsonl").read_text().splitlines()[-1])["pid"]
    os.kill(pid, signal.SIGKILL)  # the job's own process, which this test started
    th.join(timeout=60)
    assert done.is_set()
    st = run_states(sdir, [run.run_id])[run.run_id]
    assert st.state == "incomplete" and not lock_held(rdir)
    assert main(["sweep", str(path), "--executor", "local"]) == 0
    assert "submitting 1, skipping 0" in capsys.readouterr().out
    attempts = [json.loads(x) for x in (sdir / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 2 and attempts[1]["resume_from_step"] >= 2
    assert json.loads((rdir / "summary.json").read_text())["status"] == "finished"
    assert _steps(rdir, "train") == list(range(1, 21))
    assert _steps(rdir, "eval") == [0, 10, 20]


def test_a_running_run_is_never_submitted_twice(tmp_path, cache_dir, capsys):
    """A held run lock (train() holds it while running) makes the run 'running': skipped."""
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    runs = expand(load_spec(path))
    rdir = runs[0].cfg.run_dir()
    rdir.mkdir(parents=True)
    with open(rdir / ".lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        states, todo, skipped = plan(runs)
        assert states[runs[0].run_id].state == "running" and skipped == {runs[0].run_id: "running"}
        assert [r.run_id for r in todo] == [runs[1].run_id]
    assert not lock_held(rdir)


def test_debug_executor_runs_in_process_and_status_reads_a_spec(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=[7], executor="debug"))
    assert main(["sweep", str(path)]) == 0
    assert "1 of 1 submitted runs finished" in capsys.readouterr().out
    sdir = tmp_path / "results" / "t"
    (run,) = expand(load_spec(path))
    text, counts = status_report(sdir, runs_of_dir(sdir))
    assert counts["finished"] == 1 and run.run_id in text
    assert main(["status", str(path)]) == 0 and "1 finished" in capsys.readouterr().out


def test_local_executor_starts_the_longest_runs_first():
    """The demo's long tier (480 and 240 steps) is listed last in the spec but must start first,
    so the two cores do not end on it; equal lengths keep the spec's order."""
    runs = expand(load_spec(ROOT / "sweeps" / "demo.yaml"))
    order = start_order(runs)
    steps = [r.cfg.train.steps for r in order]
    assert steps == sorted(steps, reverse=True) and steps[:8] == [480] * 4 + [240] * 4
    assert steps[-1] == 40
    same = [r.index for r in order if r.cfg.train.steps == 60]
    assert same == sorted(same) and len(same) == 20
