"""Sweeps on a real SLURM cluster (no mock): job arrays, idempotent re-runs, preemption by
`scontrol requeue` and a cancelled run, each resuming from the run's own checkpoint.

Needs the single-node cluster of `scripts/slurm_up.sh` (root). Skipped only when SLURM is not
installed at all and RLABLATE_REQUIRE_SLURM is unset; with RLABLATE_REQUIRE_SLURM=1 (CI) a missing
or stopped cluster is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, TINY
from harness.cli import main
from harness.sweep.status import run_states, slurm_job_states, status_report
from harness.sweep.expand import expand
from harness.sweep.spec import load_spec

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]


@pytest.fixture(scope="module", autouse=True)
def slurm_cluster():
    if shutil.which("sinfo") is None:
        if os.environ.get("RLABLATE_REQUIRE_SLURM"):
            pytest.fail("RLABLATE_REQUIRE_SLURM is set but SLURM is not installed: run "
                        "`bash scripts/slurm_up.sh` as root first")
        pytest.skip("SLURM is not installed (no sinfo): `sudo bash scripts/slurm_up.sh` starts a "
                    "local cluster; set RLABLATE_REQUIRE_SLURM=1 to make this a failure")
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=60)
    if not any(s.strip().rstrip("*") in ("idle", "mix", "alloc", "comp") for s in out.stdout.split()):
        pytest.fail(f"SLURM is installed but no node is up (sinfo: {out.stdout.strip()!r} "
                    f"{out.stderr.strip()!r}): run `bash scripts/slurm_up.sh` as root")


def tiny_overrides(tmp_path: Path, cache_dir: Path, swept=()) -> list[str]:
    return [x for x in TINY if x.split("=")[0] not in swept] + [
        f"run.results_dir={tmp_path / 'results'}", f"run.cache_dir={cache_dir}"]


def steps(run_dir: Path, kind: str) -> list[int]:
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rows.append(json.loads(line))
    return [r["step"] for r in rows if r["kind"] == kind]


def wait_until(pred, timeout: float, what: str, poll: float = 0.5, explain=None):
    """Poll `pred` until it is true; on time-out fail with `explain()` (the cluster's state)."""
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}"
                        + (f"\n{explain()}" if explain else ""), pytrace=False)
        time.sleep(poll)


def _cmd(*args: str) -> str:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{args[0]}: {e}"


def cluster_report(job_id: str | None = None, sdir: Path | None = None, tail: int = 3000) -> str:
    """What a failed SLURM test needs to be explained after the fact (CI shows only its output):
    the whole queue, the node, the job as slurmctld and the accounting see it, the attempts the
    job recorded and the tail of its submitit logs."""
    parts = [("squeue (all jobs)", _cmd("squeue", "-a", "-r", "-o", "%i|%T|%r|%M|%l|%S")),
             ("sinfo", _cmd("sinfo", "-N", "-o", "%N %t %C %E"))]
    if job_id:
        parts += [(f"scontrol show job {job_id}", _cmd("scontrol", "show", "job", job_id)),
                  (f"sacct -j {job_id}", _cmd("sacct", "-n", "-j", job_id, "-o",
                                              "jobid%14,state,exitcode,elapsed,start,end"))]
    if sdir is not None:
        att = sdir / "attempts.jsonl"
        parts.append(("attempts.jsonl", att.read_text().strip() if att.exists() else "(none)"))
        logs = sorted((sdir / "_submitit").glob("**/*_log.*"))
        parts.append(("submitit logs (tail)", "".join(p.read_text(errors="replace")
                                                      for p in logs)[-tail:] or "(none)"))
    return "\n".join(f"--- {name}:\n{text}" for name, text in parts)


def reached(run_dir: Path, step: int) -> bool:
    try:
        return max(steps(run_dir, "train") or [0]) >= step
    except (OSError, json.JSONDecodeError):
        return False


def squeue_state(job_id: str) -> str | None:
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T"], capture_output=True, text=True,
                         timeout=60).stdout
    for line in out.splitlines():
        jid, _, st = line.partition("|")
        if jid == job_id:
            return st
    return None


def test_demo_spec_goes_out_as_one_job_array_and_a_rerun_submits_nothing(tmp_path, cache_dir, capsys):
    """sweeps/demo-quick.yaml, its grpo runs (3 seeds) with tiny overrides, --executor slurm.
    (demo.yaml sweeps train.steps, which an override may not collapse.)"""
    spec_path = str(ROOT / "sweeps" / "demo-quick.yaml")
    over = tiny_overrides(tmp_path, cache_dir) + ["--only", "algo.preset=grpo"]
    t0 = time.time()
    assert main(["sweep", spec_path, "--executor", "slurm", "--wait", *over]) == 0
    dt = time.time() - t0
    out = capsys.readouterr().out
    every = expand(load_spec(spec_path, over[:-2]))
    runs = [r for r in every if r.cfg.algo.preset == "grpo"]
    n, rest = len(runs), len(every) - len(runs)
    assert n >= 3 and "job array" in out and f"{n} of {n} submitted runs finished" in out, out
    sdir = runs[0].cfg.run_dir().parent
    jobs = [json.loads(x) for x in (sdir / "jobs.jsonl").read_text().splitlines()]
    assert len(jobs) == n and len({j["job_id"].split("_")[0] for j in jobs}) == 1, jobs
    assert sorted(int(j["job_id"].split("_")[1]) for j in jobs) == list(range(n))
    for r in runs:
        assert json.loads((r.cfg.run_dir() / "summary.json").read_text())["status"] == "finished"
        assert steps(r.cfg.run_dir(), "train") == [1, 2, 3, 4]
    print(f"\n[timing] {n}-run job array: submit to all finished {dt:.1f} s")
    # re-run: every run is finished, nothing is submitted
    assert main(["sweep", spec_path, "--executor", "slurm", *over]) == 0
    out = capsys.readouterr().out
    assert f"submitting 0, skipping {n + rest} ({rest} not selected, {n} finished)" in out or \
        f"submitting 0, skipping {n + rest} ({n} finished, {rest} not selected)" in out, out
    assert len((sdir / "jobs.jsonl").read_text().splitlines()) == n
    assert main(["status", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert f"{n + rest} runs: {rest} pending, 0 running, 0 failed, {n} finished" in out, out
    # the scheduler's record settles a moment after the result file exists (COMPLETING, then sacct)
    ids = [r.run_id for r in every]
    wait_until(lambda: status_report(sdir, ids)[0].count("COMPLETED") == n, 60, "sacct COMPLETED")


def release(job_id: str) -> None:
    """A requeued job waits for its BeginTime (~120 s later); start it now."""
    wait_until(lambda: squeue_state(job_id) == "PENDING", 90, f"job {job_id} to be requeued",
               explain=lambda: cluster_report(job_id))
    time.sleep(2)  # releasing it in the same second as the requeue revokes its credential

    def started() -> bool:
        if squeue_state(job_id) == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"],
                           capture_output=True, timeout=60)
            time.sleep(2)
        return squeue_state(job_id) != "PENDING"
    wait_until(started, 90, f"the requeued job {job_id} to start", poll=0.2,
               explain=lambda: cluster_report(job_id))


def attempts_of(sdir: Path) -> list[dict]:
    return [json.loads(x) for x in (sdir / "attempts.jsonl").read_text().splitlines()]


@pytest.mark.faults  # part of the fault-injection suite (make test-faults)
def test_preempted_requeued_and_cancelled_run_resumes_with_no_lost_or_duplicated_rows(
        tmp_path, cache_dir, capsys):
    """One run, interrupted three times: `scontrol requeue` (SLURM kills and restarts the job);
    submitit's own preemption signal (USR2: `RunJob.checkpoint()` requeues the same run); `scancel`
    (the run is left incomplete; the next `rlablate sweep` resubmits only it). Each time it resumes
    from the run's checkpoint, and every train and eval row exists exactly once.

    600 steps: a cancelled job keeps running until SLURM's SIGKILL (submitit ignores the SIGTERM
    that comes KillWait = 3 s before it), and on an idle machine the tiny run does ~50 steps in
    those 3 s: with 140 steps it sometimes finished before the kill and read `finished`."""
    spec = tmp_path / "rq.yaml"
    spec.write_text("name: rq\nbase: grpo\nseeds: [0]\n")
    over = tiny_overrides(tmp_path, cache_dir) + [
        "train.steps=600", "eval.every=150", "rollout.max_new_tokens=12"]
    assert main(["sweep", str(spec), "--executor", "slurm", *over]) == 0
    (run,) = expand(load_spec(spec, over))
    rdir, sdir = run.cfg.run_dir(), run.cfg.run_dir().parent
    job_id = json.loads((sdir / "jobs.jsonl").read_text().splitlines()[-1])["job_id"]
    t_submit = time.time()

    # ---- preemption: requeue mid-run
    wait_until(lambda: reached(rdir, 3), 180, "step 3", poll=0.1,
               explain=lambda: cluster_report(job_id, sdir))  # a checkpoint at step 2
    t_started = min(json.loads(x)["time"] for x in (sdir / "attempts.jsonl").read_text().splitlines())
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=60)
    release(job_id)
    wait_until(lambda: len(attempts_of(sdir)) >= 2, 120, "the requeued job's second attempt",
               explain=lambda: cluster_report(job_id, sdir))
    second = attempts_of(sdir)[1]
    assert second["resume_from_step"] is not None, "the run finished before the requeue hit it"
    assert second["job_id"] == job_id and second["resume_from_step"] >= 2, second

    # ---- preemption as submitit sees it: USR2 -> RunJob.checkpoint() -> the job requeues itself
    wait_until(lambda: reached(rdir, second["resume_from_step"] + 4), 180, "progress", poll=0.1,
               explain=lambda: cluster_report(job_id, sdir))
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=60)
    release(job_id)
    wait_until(lambda: len(attempts_of(sdir)) >= 3, 120, "the third attempt",
               explain=lambda: cluster_report(job_id, sdir))
    third = attempts_of(sdir)[2]
    assert third["resume_from_step"] is not None, "the run finished before USR2 hit it"
    assert third["job_id"] == job_id and third["resume_from_step"] > second["resume_from_step"]
    log = next((sdir / "_submitit").glob("*/*_log.out")).read_text()
    assert "Calling checkpoint method" in log and f"Requeued job {job_id}" in log, log[-2000:]

    # ---- cancellation: scancel mid-run, then re-launch
    resumed_from = third["resume_from_step"]
    wait_until(lambda: reached(rdir, resumed_from + 4), 180, f"step {resumed_from + 4}", poll=0.1,
               explain=lambda: cluster_report(job_id, sdir))
    subprocess.run(["scancel", job_id], check=True, timeout=60)
    wait_until(lambda: squeue_state(job_id) is None, 60, "the cancelled job to leave the queue")
    wait_until(lambda: slurm_job_states({job_id}).get(job_id) == "CANCELLED", 60, "sacct CANCELLED")
    st = run_states(sdir, [run.run_id])[run.run_id]
    assert st.state == "incomplete", st
    assert main(["sweep", str(spec), "--executor", "slurm", "--wait", *over]) == 0
    out = capsys.readouterr().out
    assert "submitting 1, skipping 0" in out and "1 of 1 submitted runs finished" in out, out

    attempts = attempts_of(sdir)
    assert len(attempts) == 4 and attempts[3]["job_id"] != job_id
    assert attempts[3]["resume_from_step"] > resumed_from
    summary = json.loads((rdir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["step"] == 600
    assert steps(rdir, "train") == list(range(1, 601))      # none lost, none duplicated
    assert steps(rdir, "eval") == [0, 150, 300, 450, 600]
    items = [json.loads(x)["step"] for x in (rdir / "eval_items.jsonl").read_text().splitlines()]
    assert items == sorted(items) and len(items) == 2 * 5
    print(f"\n[timing] submit -> first attempt {t_started - t_submit:.1f} s; resumed from steps "
          f"{[a['resume_from_step'] for a in attempts]}; whole test {time.time() - t_submit:.1f} s")
