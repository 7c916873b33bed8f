"""harness.sweep.status: a run's state is derived from its directory, its lock and its scheduler job,
never stored. Built by hand here (no training, no scheduler): each state from its evidence."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest

from harness.storage import append_jsonl, write_json
from harness.sweep import status
from harness.sweep.status import NotASweepDir, lock_held, run_states, runs_of_dir, status_report


def make_sweep(sdir: Path) -> list[str]:
    """Six runs, one per derived state (running comes from a held lock, in the test)."""
    ids = ["pending", "incomplete", "failed", "finished", "diverged", "running"]
    for rid, summary in [("incomplete", {"status": "running", "step": 2, "total_steps": 4}),
                         ("failed", {"status": "failed", "step": 0, "total_steps": 4}),
                         ("finished", {"status": "finished", "step": 4, "total_steps": 4}),
                         ("diverged", {"status": "diverged", "step": 3, "total_steps": 4}),
                         ("running", {"status": "running", "step": 2, "total_steps": 4})]:
        (sdir / rid).mkdir(parents=True)
        write_json(sdir / rid / "summary.json", summary)
    (sdir / "running" / "metrics.jsonl").write_text(
        "".join(json.dumps({"kind": "train", "step": s}) + "\n" for s in (1, 2, 3)))
    write_json(sdir / "sweep.json", {"runs": [{"run_id": r} for r in ids]})
    for rid in ids[1:]:
        append_jsonl(sdir / "jobs.jsonl", {"run_id": rid, "job_id": f"{rid}-1", "executor": "local"})
        append_jsonl(sdir / "attempts.jsonl", {"run_id": rid})
    append_jsonl(sdir / "attempts.jsonl", {"run_id": "failed"})
    return ids


def test_each_state_comes_from_its_evidence(tmp_path, monkeypatch):
    sdir = tmp_path / "s"
    ids = make_sweep(sdir)
    monkeypatch.setattr(status, "slurm_job_states",
                        lambda ids: pytest.fail(f"local jobs asked SLURM: {ids}") if ids else {})
    with open(sdir / "running" / ".lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # train() holds it while it runs
        assert lock_held(sdir / "running")
        states = run_states(sdir, ids)
        text, counts = status_report(sdir, ids)
    assert not lock_held(sdir / "running")
    assert {rid: st.state for rid, st in states.items()} == {rid: rid for rid in ids}
    assert states["running"].step == 3  # a running run's step is its metrics' last row
    assert states["failed"].attempts == 2 and states["pending"].job_id is None
    assert counts == {s: 1 for s in status.STATES} | {"queued": 0}
    assert text.splitlines()[0].endswith("6 runs: 1 pending, 1 running, 1 incomplete, 1 failed, "
                                         "1 finished, 1 diverged")


def test_slurm_jobs_are_asked_about_through_the_executor_table(tmp_path, monkeypatch):
    """Only jobs of an executor whose entry says `slurm_jobs` go to squeue/sacct; a queued SLURM
    job makes its run queued, a running one running (no lock needed)."""
    sdir = tmp_path / "s"
    for rid, jid in [("q", "7_0"), ("r", "7_1")]:
        append_jsonl(sdir / "jobs.jsonl", {"run_id": rid, "job_id": jid, "executor": "slurm"})
    append_jsonl(sdir / "jobs.jsonl", {"run_id": "l", "job_id": "99", "executor": "local"})
    asked = []
    monkeypatch.setattr(status, "slurm_job_states",
                        lambda ids: asked.append(set(ids)) or {"7_0": "PENDING", "7_1": "RUNNING"})
    states = run_states(sdir, ["q", "r", "l"])
    assert asked == [{"7_0", "7_1"}]
    assert [states[r].state for r in "qrl"] == ["queued", "running", "pending"]
    assert states["q"].slurm == "PENDING" and states["l"].slurm is None


def test_a_directory_without_sweep_json_is_refused_in_one_line(tmp_path):
    with pytest.raises(NotASweepDir, match="no sweep.json"):
        runs_of_dir(tmp_path)
    sdir = tmp_path / "s"
    make_sweep(sdir)
    (sdir / "old-run").mkdir()
    (sdir / "old-run" / "config.yaml").write_text("{}\n")  # a run of an earlier spec: still shown
    assert runs_of_dir(sdir)[-1] == "old-run"


def test_sweep_bar_eta_counts_start_up_and_eval_time(monkeypatch):
    """The sweep bar's rate is the average since the launch (tqdm smoothing=0): 10 steps done in
    100 s of which 90 s were start-up and evals must predict 90 more steps at 10 s each, not at the
    fast rate of the steps alone."""
    import types

    import tqdm.std as tqdm_std

    from harness.sweep.progress import SweepProgress
    clock = {"t": 1000.0}
    monkeypatch.setattr(tqdm_std, "time", lambda: clock["t"])
    runs = [types.SimpleNamespace(run_id=f"r{i}", cfg=types.SimpleNamespace(
        train=types.SimpleNamespace(steps=50))) for i in range(2)]
    p = SweepProgress(runs, {}, enabled=True)
    p.bar.disable = False
    clock["t"] += 90.0  # start-up, warm start, the step-0 evals: no steps yet
    p.bar.update(0)
    for _ in range(10):  # then 10 fast steps, 1 s each
        clock["t"] += 1.0
        p.bar.update(1)
    d = p.bar.format_dict
    rate = d["n"] / d["elapsed"]
    assert d["n"] == 10 and d["elapsed"] == 100.0
    assert (d["total"] - d["n"]) / rate == 900.0  # 90 steps at the average 10 s per step
    shown = p.bar.format_meter(**d)
    assert "<15:00" in shown, shown  # tqdm's own ETA (a moving average of steps says ~01:30)
    p.close()
