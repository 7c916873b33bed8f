"""The record of a sweep, in its directory <run.results_dir>/<name>/:

    sweep.json      the spec, its sha256, the expanded runs (swept values, resources), the git
                    commit and dirty flag, Python and package versions, one entry per launch
    spec.yaml       the spec as last launched
    jobs.jsonl      which scheduler job got which run (one row per submission)
    attempts.jsonl  each start of a job: host, pid, the step it resumed from

Appends are one line each (`storage.append_jsonl`), so the jobs of a sweep can write them at once.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import time
from pathlib import Path

import yaml

from ..storage import append_jsonl, read_json, write_json


VERSIONED = ("rlablate", "torch", "transformers", "tokenizers", "reasoning-gym", "submitit", "pyyaml",
             "numpy")


def environment() -> dict:
    """Git commit of the harness and package versions: what a launch ran with."""
    repo = Path(__file__).resolve().parents[2]
    git = {"commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=30)
        if commit.returncode == 0:
            git["commit"] = commit.stdout.strip()
            dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=30)
            git["dirty"] = bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {"git": git, "python": platform.python_version(), "versions": versions,
            "host": socket.gethostname()}


def record_launch(sdir: Path, spec, runs: list, executor: str, submitted: list[str],
                  skipped: dict[str, str]) -> Path:
    """Write <sweep>/sweep.json (spec, runs, and one entry per launch) and <sweep>/spec.yaml."""
    sdir.mkdir(parents=True, exist_ok=True)
    path = sdir / "sweep.json"
    rec = read_json(path) or {"name": spec.name, "created": time.time(), "launches": []}
    env = environment()
    rec.update(name=spec.name, spec_source=spec.source, spec_sha256=spec.sha256, spec=spec.raw,
               swept_keys=spec.swept_keys, updated=time.time(), **env,
               runs=[{"run_id": r.run_id, "point": r.point, "resources": r.resources} for r in runs])
    rec["launches"].append({"time": time.time(), "executor": executor, "spec_sha256": spec.sha256,
                            "git_commit": env["git"]["commit"], "git_dirty": env["git"]["dirty"],
                            "submitted": submitted, "skipped": skipped})
    write_json(path, rec)
    (sdir / "spec.yaml").write_text(yaml.safe_dump(spec.raw, sort_keys=False))
    return path


def record_job(sdir: Path, run_id: str, job_id: str, executor: str) -> None:
    """One submission: <sweep>/jobs.jsonl (the latest row of a run names its job)."""
    append_jsonl(sdir / "jobs.jsonl", {"time": time.time(), "run_id": run_id, "job_id": job_id,
                                        "executor": executor})


def record_attempt(sdir: Path, run_id: str, job_id: str, resume_from_step: int | None) -> None:
    """One start (or restart) of a job, written by the job itself: <sweep>/attempts.jsonl."""
    append_jsonl(sdir / "attempts.jsonl", {
        "time": time.time(), "run_id": run_id, "job_id": job_id, "host": socket.gethostname(),
        "pid": os.getpid(), "resume_from_step": resume_from_step})
