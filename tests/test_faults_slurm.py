"""Fault injection on the real single-node SLURM cluster (scripts/slurm_up.sh): a SLURM time limit
hit mid-run, and a drained node. `scontrol requeue`, submitit's USR2 preemption and `scancel` are
in test_sweep_slurm.py (marked `faults` too).

- time limit: `slurm.time_min=3` with USR2 `signal_delay_s` before it; the job stops at its next
  step boundary (checkpoint + summary), submitit calls `RunJob.checkpoint()` and requeues the job,
  and the run resumes from that step, as many times as it takes: every attempt progresses, every
  row exactly once.
- drained node: jobs wait (`queued`, SLURM PENDING), a second `rlablate sweep` submits nothing
  twice; a job cancelled while waiting is resubmitted by the next sweep, alone; the finished
  run is untouched. The node is always resumed in `finally`.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import TINY
from faultlib import checksums, lost_and_duplicated, row_keys
from harness.cli import main
from harness.sweep.status import run_states
from harness.sweep.expand import expand
from harness.sweep.spec import load_spec
from test_sweep_slurm import (cluster_report, release, slurm_cluster,  # noqa: F401 (fixture)
                              squeue_state, wait_until)

pytestmark = [pytest.mark.slurm, pytest.mark.faults, pytest.mark.timeout(600)]
SET = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in TINY)}


def spec_file(tmp_path: Path, cache_dir: Path, name: str, seeds: list[int], **extra) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "base": "grpo", "seeds": seeds, "set": {
        **SET, "run.results_dir": str(tmp_path / "results"), "run.cache_dir": str(cache_dir), **extra}}))
    return p


def attempts(sdir: Path) -> list[dict]:
    p = sdir / "attempts.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def summary(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_time_limit_hit_requeues_through_submitit_and_resumes_without_lost_rows(tmp_path, cache_dir):
    """A 3-minute limit, USR2 due 90 s before it: at 90 s. sbatch(1) says SLURM may send it up to
    60 s early; measured here it came 20-60 s into attempts when due at 30 s, and once at 0 s, when
    the task had not started Python: it died of the signal (exit 12), no attempt recorded, CI failed
    (so `check_signal_lead` now refuses a delay that leaves under 30 s: 90 s is the most a 3-minute
    limit allows). Due at 90 s, it comes 30-120 s into an attempt: after start-up, before the
    run's 120 s of training (`train.max_wall_s`, summed across attempts) can end in one attempt, so
    at least one time-out happens whatever the machine's speed.

    No periodic checkpoint is due (`train.checkpoint_every` = 100000): each attempt's progress is
    saved only by the stop request (USR2 -> stop at the next step boundary, checkpoint, requeue).
    So every attempt resumes from a strictly later step than the one before, on an idle or a busy
    machine: an attempt has until submitit's own handler takes over (grace = half the signal
    delay, 45 s after the signal, 165 s into the attempt at the latest, before the 180 s limit) to
    reach a step boundary. (A 2-minute limit left too little for start-up beside the rest of
    `make test` on a busy machine: one CI run timed out here.)

    The wait fails at once, with the cluster's state and the job's logs, when the job leaves the
    queue unfinished, when an attempt hands over to submitit before a step boundary, or when no
    attempt starts: CI shows only this test's output."""
    spec = spec_file(tmp_path, cache_dir, "tl", [0], **{
        "train.steps": 100000, "train.max_wall_s": 120, "eval.every": 100000,
        "train.checkpoint_every": 100000, "rollout.max_new_tokens": 12, "slurm.time_min": 3,
        "slurm.signal_delay_s": 90, "slurm.max_timeouts": 30})
    assert main(["sweep", str(spec), "--executor", "slurm"]) == 0
    (run,) = expand(load_spec(spec))
    rdir, sdir = run.cfg.run_dir(), run.cfg.run_dir().parent
    job_id = json.loads((sdir / "jobs.jsonl").read_text().splitlines()[-1])["job_id"]
    t0, gone_since, seen = time.time(), None, 0

    def report() -> str:
        return cluster_report(job_id, sdir)

    def finished_or_release() -> bool:
        nonlocal gone_since, seen
        if summary(rdir).get("status") == "finished":
            return True
        tries, state = attempts(sdir), squeue_state(job_id)
        for a in tries[seen:]:
            print(f"[{time.time() - t0:5.0f} s] attempt {len(tries)} resumes from step "
                  f"{a['resume_from_step']}", flush=True)
        seen = len(tries)
        if any("handing over to submitit now" in p.read_text(errors="replace")
               for p in (sdir / "_submitit").glob("**/*_log.err")):
            pytest.fail("an attempt did not reach a step boundary within the grace time, so "
                        f"submitit requeued it from where it was\n{report()}", pytrace=False)
        if state is None:
            gone_since = gone_since or time.time()
            if time.time() - gone_since > 10 and summary(rdir).get("status") != "finished":
                pytest.fail(f"job {job_id} left the queue but the run is not finished\n{report()}",
                            pytrace=False)
        else:
            gone_since = None
        if not tries and time.time() - t0 > 300:
            pytest.fail(f"job {job_id} has not started in 300 s\n{report()}", pytrace=False)
        if state == "PENDING" and tries:  # requeued after a time-out
            release(job_id)
        return False
    wait_until(finished_or_release, 1000, "the run to finish through time-outs", poll=1,
               explain=report)
    folder = next((sdir / "_submitit").glob("*/*_log.out")).parent
    log = "".join(p.read_text() for p in sorted(folder.glob("*_log.*")))
    tries = attempts(sdir)
    resumed = [a["resume_from_step"] for a in tries]
    assert len(tries) >= 2 and log.count("this job is timed-out") >= 1, log[-2000:]
    assert f"Requeued job {job_id}" in log
    assert all(a["job_id"] == job_id for a in tries)          # the same job, requeued
    assert resumed[0] == 0 and all(b > a for a, b in zip(resumed, resumed[1:])), resumed
    # each requeue came from the stop request at a step boundary, never from the grace timer
    stopped = [int(m) for m in re.findall(r"stopped at step (\d+) \(checkpoint saved\)", log)]
    assert stopped == resumed[1:], (stopped, resumed, log[-3000:])
    assert "handing over to submitit now" not in log
    s = summary(rdir)
    assert s["stop_reason"] == "max_wall_s" and s["step"] > resumed[-1]
    want = [("eval", 0)] + [("train", i) for i in range(1, s["step"] + 1)] + [("eval", s["step"])]
    got = row_keys(rdir)
    assert got == want and lost_and_duplicated(got, want) == (0, 0)
    print(f"\n[faults] time limit: {len(tries)} attempts resumed from {resumed}, "
          f"{s['step']} steps, {time.time() - t0:.0f} s")


def node_name() -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True,
                          timeout=60, check=True).stdout.split()[0]


def set_node(state: str) -> None:
    args = ["scontrol", "update", f"nodename={node_name()}", f"state={state}"]
    subprocess.run(args + (["reason=rlablate-faults-test"] if state == "drain" else []),
                   check=True, timeout=60)


def test_drained_node_status_is_truthful_and_a_rerun_retries_exactly_the_cancelled(
        tmp_path, cache_dir, capsys):
    spec = spec_file(tmp_path, cache_dir, "dr", [0, 1])
    runs = expand(load_spec(spec))
    sdir = runs[0].cfg.run_dir().parent
    ids = [r.run_id for r in runs]
    set_node("drain")
    try:
        assert main(["sweep", str(spec), "--executor", "slurm"]) == 0
        capsys.readouterr()
        jobs = {json.loads(x)["run_id"]: json.loads(x)["job_id"] for x in (sdir / "jobs.jsonl").read_text().splitlines()}
        wait_until(lambda: all(squeue_state(jobs[r]) == "PENDING" for r in ids), 60, "PENDING jobs")
        time.sleep(3)  # a drained node starts nothing
        assert all(squeue_state(jobs[r]) == "PENDING" for r in ids)
        assert {s.state for s in run_states(sdir, ids).values()} == {"queued"}
        assert main(["status", str(sdir)]) == 0
        text = capsys.readouterr().out
        assert "2 runs: 0 pending, 2 queued, 0 running" in text and text.count("PENDING") == 2, text
        # a second launch while they wait submits nothing twice
        assert main(["sweep", str(spec), "--executor", "slurm"]) == 0
        assert "submitting 0, skipping 2 (2 queued)" in capsys.readouterr().out
        # the second run's job is cancelled while waiting: it is pending again, nothing ran
        subprocess.run(["scancel", jobs[ids[1]]], check=True, timeout=60)
        wait_until(lambda: squeue_state(jobs[ids[1]]) is None, 60, "the cancelled job to leave the queue")
        st = run_states(sdir, ids)  # (SLURM keeps no accounting record of a never-started array task)
        assert st[ids[0]].state == "queued" and st[ids[1]].state == "pending", st
        assert st[ids[1]].slurm in (None, "CANCELLED") and not runs[1].cfg.run_dir().exists()
    finally:
        set_node("resume")
    wait_until(lambda: summary(runs[0].cfg.run_dir()).get("status") == "finished", 240,
               "the first run to finish once the node is back", explain=lambda: cluster_report(jobs[ids[0]], sdir))
    wait_until(lambda: squeue_state(jobs[ids[0]]) is None, 60, "its job to leave the queue")
    before = checksums(runs[0].cfg.run_dir())
    assert main(["sweep", str(spec), "--executor", "slurm", "--wait"]) == 0
    out = capsys.readouterr().out
    assert "submitting 1, skipping 1 (1 finished)" in out and "1 of 1 submitted runs finished" in out, out
    all_jobs = [json.loads(x) for x in (sdir / "jobs.jsonl").read_text().splitlines()]
    assert [j["run_id"] for j in all_jobs] == ids + [ids[1]]   # exactly the cancelled one again
    assert checksums(runs[0].cfg.run_dir()) == before           # the finished run untouched
    want = [("eval", 0), ("train", 1), ("train", 2), ("eval", 2), ("train", 3), ("train", 4), ("eval", 4)]
    for r in runs:
        got = row_keys(r.cfg.run_dir())
        assert got == want and lost_and_duplicated(got, want) == (0, 0), (r.run_id, got)
