"""The state of a sweep's runs, read from their directories, their locks and the scheduler.

    rlablate status sweeps/demo.yaml          # or a sweep directory: rlablate status results/demo

A run's state is derived, never stored: `summary.json` says finished/diverged/failed; a held run lock
(`train()` holds `<run>/.lock` while it runs; the kernel drops it when the process dies) or a SLURM job
in a running state says running; a queued job says queued; a run with files but none of these was
stopped mid-way (incomplete) and resumes when resubmitted; no files at all is pending. The latest job
of each run comes from `<sweep>/jobs.jsonl`, its attempts (each start or restart of the job) from
`<sweep>/attempts.jsonl`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..storage import last_step, lock_held as _lock_file_held, read_json, read_jsonl
from .executors import EXECUTORS


def lock_held(run_dir: Path) -> bool:
    """True when a live process holds the run's lock (train() holds `<run>/.lock` while it runs)."""
    return _lock_file_held(run_dir / ".lock")


class NotASweepDir(RuntimeError):
    """A directory without sweep.json: one line."""


# SLURM states of a job that will still run (or is running) our callable.
SLURM_QUEUED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SUSPENDED",
                "CONFIGURING", "RESIZING", "STOPPED", "SIGNALING"}
SLURM_RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT"}
STATES = ("pending", "queued", "running", "incomplete", "failed", "finished", "diverged")
SUBMIT_STATES = {"pending", "incomplete", "failed"}


@dataclass
class RunState:
    run_id: str
    state: str                  # one of STATES
    step: int | None = None
    total: int | None = None
    job_id: str | None = None   # latest scheduler job that ran or will run it
    slurm: str | None = None    # that job's SLURM state, where a scheduler knows it
    attempts: int = 0

    @property
    def progress(self) -> str:
        if not self.total:
            return ""
        return f"{100 * (self.step or 0) / self.total:.0f}%"


def slurm_job_states(job_ids: set[str]) -> dict[str, str]:
    """SLURM state of each of `job_ids` ('123' or '123_4'): squeue for live jobs, sacct for the
    rest. Empty where no SLURM client is installed; a job neither knows is left out."""
    if not job_ids or not shutil.which("squeue"):
        return {}
    states: dict[str, str] = {}
    user = os.environ.get("USER") or _whoami()
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-u", user, "-o", "%i|%T"], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        jid, _, st = line.partition("|")
        if jid in job_ids:
            states[jid] = st
    rest = {j for j in job_ids if j not in states}
    if rest and shutil.which("sacct"):
        bases = sorted({j.split("_")[0] for j in rest})
        cmd = ["sacct", "-n", "-P", "-X", "-o", "JobID,State"] + [a for b in bases for a in ("-j", b)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            jid, _, st = line.partition("|")
            if jid in rest:
                states[jid] = st.split()[0] if st else st  # "CANCELLED by 0" -> CANCELLED
    return states


def _on_slurm(job: dict) -> bool:
    """The job row (jobs.jsonl) names a job SLURM knows about (its executor's `slurm_jobs`)."""
    name = job.get("executor")
    return name in EXECUTORS and EXECUTORS.meta(name).slurm_jobs


def _whoami() -> str:
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


def run_states(sdir: Path, run_ids: list[str], query_slurm: bool = True) -> dict[str, RunState]:
    """The state of each run, from its directory, its lock and its last scheduler job."""
    jobs: dict[str, dict] = {}
    for row in read_jsonl(sdir / "jobs.jsonl"):
        jobs[row["run_id"]] = row  # the latest submission of each run
    attempts: dict[str, int] = {}
    for row in read_jsonl(sdir / "attempts.jsonl"):
        attempts[row["run_id"]] = attempts.get(row["run_id"], 0) + 1
    slurm_ids = {j["job_id"] for j in jobs.values() if _on_slurm(j)}
    sl = slurm_job_states(slurm_ids) if query_slurm else {}
    out = {}
    for rid in run_ids:
        rdir = sdir / rid
        summary = read_json(rdir / "summary.json")
        job = jobs.get(rid, {})
        st = RunState(rid, "pending", job_id=job.get("job_id"), attempts=attempts.get(rid, 0))
        st.slurm = sl.get(st.job_id) if _on_slurm(job) else None
        if summary:
            st.step, st.total = summary.get("step"), summary.get("total_steps")
        status = (summary or {}).get("status")
        if status in ("finished", "diverged"):
            st.state = status
        elif lock_held(rdir) or st.slurm in SLURM_RUNNING:
            st.state = "running"
            st.step = last_step(rdir / "metrics.jsonl") if st.total else st.step
        elif st.slurm in SLURM_QUEUED:
            st.state = "queued"
        elif status == "failed":
            st.state = "failed"
        elif summary or (rdir / "metrics.jsonl").exists():
            st.state = "incomplete"  # started, not running now, not finished: it will resume
        out[rid] = st
    return out


def status_report(sdir: Path, run_ids: list[str], query_slurm: bool = True) -> tuple[str, dict]:
    states = run_states(sdir, run_ids, query_slurm)
    counts = {s: 0 for s in STATES}
    for st in states.values():
        counts[st.state] += 1
    head = (f"{sdir}: {len(run_ids)} runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()
                                                          if n or s in ("pending", "running",
                                                                        "finished", "failed",
                                                                        "diverged")))
    rows = [["run_id", "state", "step", "progress", "attempts", "job", "slurm"]]
    for rid in run_ids:
        st = states[rid]
        rows.append([rid, st.state, f"{st.step}/{st.total}" if st.total else "", st.progress,
                     str(st.attempts), st.job_id or "", st.slurm or ""])
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return head + "\n" + "\n".join(lines), counts


def runs_of_dir(sdir: Path) -> list[str]:
    """The run ids of a sweep dir: from sweep.json (pending runs have no directory yet)."""
    rec = read_json(sdir / "sweep.json")
    if rec is None:
        raise NotASweepDir(f"{sdir}: no sweep.json (not a sweep directory, or never launched)")
    ids = [r["run_id"] for r in rec["runs"]]
    # runs of earlier versions of the spec keep their directories: show them too
    return ids + sorted(p.parent.name for p in sdir.glob("*/config.yaml") if p.parent.name not in ids)
