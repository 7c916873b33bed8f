"""The executor table: name -> how a launch runs its runs (submitit's AutoExecutor picks its
cluster by name the same way; hydra's launchers differ by one `_EXECUTOR` line).

    local   submitit subprocesses on this machine, `parallel` at once, longest first; waits
    slurm   one job array per resource group; returns once queued (or waits, --wait)
    debug   in-process, one after another (submitit's DebugExecutor: tests and pdb)

Each entry is the function that runs a launch's runs (`schedule(sub, todo)`), with its
properties: the submitit `cluster`, the AutoExecutor parameters it takes from a run's resources
(`params`), a `preflight` check, whether its job ids are SLURM's (`slurm_jobs`: `rlablate status`
asks squeue/sacct about them), the `grace_s` a job's stop request gets (see `job.py`), and its
`--executor` help. Adding an executor is one entry; nothing compares an executor's name.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..registry import Registry
from .progress import SweepProgress
from .record import record_job
from .resources import check_signal_lead, describe

if TYPE_CHECKING:  # annotations only: submitit and the job load when a launch runs
    import submitit

    from .job import RunJob


class LaunchError(RuntimeError):
    """The launch could not go ahead (no scheduler, a submission refused): one line."""


EXECUTORS = Registry("executor", cluster=None, help="", params=None, preflight=None,
                     slurm_jobs=False, grace_s=None)


@dataclass
class Submission:
    """One launch's submissions: the executor, where its jobs go, what came back."""
    executor: str
    sdir: Path
    name: str                               # the sweep's name (job names: rlablate-<name>)
    out: Callable[[str], None]
    parallel: int = 1                       # local: runs at once
    wait: bool = False                      # slurm: wait for the jobs
    states: dict = field(default_factory=dict)
    show_progress: bool = False
    pause_at: int | None = None             # successive halving: every run stops at this step
    result: dict = field(default_factory=lambda: {"submitted": [], "skipped": {}, "jobs": {},
                                                  "results": {}})

    @property
    def meta(self):
        return EXECUTORS.meta(self.executor)

    def executor_for(self, res: dict) -> submitit.AutoExecutor:
        import submitit  # here, not at the top: `rlablate --help` / `status` never load it
        m = self.meta
        ex = submitit.AutoExecutor(folder=self.sdir / "_submitit" / "%j", cluster=m.cluster,
                                   slurm_max_num_timeout=res["max_timeouts"],
                                   local_max_num_timeout=res["max_timeouts"])
        ex.update_parameters(**m.params(res, self.name))
        return ex

    def job(self, r) -> RunJob:
        from .job import RunJob
        grace = self.meta.grace_s
        return RunJob(self.run_config(r), r.run_id, grace(r.resources) if grace else None,
                      self.pause_at)

    def run_config(self, r) -> dict:
        """The run's resolved config as the job gets it. A local launch of several runs at once
        whose config leaves run.threads = 0 ("all cores") divides the cores among them instead:
        `parallel` runs each taking every core oversubscribe the machine. run.threads is not part
        of the run id, and the run's config.yaml records the count it ran with."""
        cfg = r.cfg.to_dict()
        if self.executor_is_local and self.parallel > 1 and not cfg["run"]["threads"]:
            cfg["run"]["threads"] = max(1, (os.cpu_count() or 1) // self.parallel)
        return cfg

    @property
    def executor_is_local(self) -> bool:
        return self.meta.cluster == "local"

    def record(self, r, job) -> None:
        self.result["jobs"][r.run_id] = job
        record_job(self.sdir, r.run_id, str(job.job_id), self.executor)

    def outcome(self, job) -> str:
        """The job's result (waits for it), one line on `out`; 'failed' when it raised."""
        try:
            res = job.result()
            status = res["status"]
            self.out(f"  {status:9s} {res['run_id']}  step {res['step']}  (job {job.job_id})")
        except Exception as e:  # the job raised, was killed or cancelled: report and go on
            status = "failed"
            first = str(e).strip().splitlines()
            self.out(f"  failed    job {job.job_id}: {type(e).__name__}: {first[-1] if first else ''}  "
                     f"(log: {job.paths.stderr})")
        return status


def _common(res: dict, name: str) -> dict:
    return {"name": f"rlablate-{name}", "timeout_min": res["time_min"],
            "cpus_per_task": res["cpus_per_task"], "gpus_per_node": res["gpus_per_node"],
            "mem_gb": res["mem_gb"]}


def _slurm_params(res: dict, name: str) -> dict:
    return {**_common(res, name), "slurm_partition": res["partition"],
            "slurm_array_parallelism": res["array_parallelism"], "slurm_account": res["account"],
            "slurm_qos": res["qos"], "slurm_constraint": res["constraint"],
            "slurm_setup": res["setup"], "slurm_signal_delay_s": res["signal_delay_s"]}


def _here_params(res: dict, name: str) -> dict:
    """local/debug: this machine's memory is what it is; GPUs only when asked for."""
    params = _common(res, name)
    del params["mem_gb"]
    if not res["gpus_per_node"]:
        del params["gpus_per_node"]
    return params


def _slurm_preflight(runs: list) -> None:
    """Every resource group's USR2 can come after its job has started; then an `sbatch` to submit
    to."""
    for res in {json.dumps(r.resources, sort_keys=True): r.resources for r in runs}.values():
        check_signal_lead(res, LaunchError)
    if not shutil.which("sbatch"):
        raise LaunchError("--executor slurm: no `sbatch` on this machine (start a cluster with "
                          "scripts/slurm_up.sh, or use --executor local)")


def start_order(runs: list) -> list:
    """The order the local executor starts runs in: most `train.steps` first, spec order among
    equals, so a sweep that runs a few variants longer does not end with one core busy on a long
    run and the others idle (longest-processing-time-first scheduling)."""
    return sorted(runs, key=lambda r: -r.cfg.train.steps)


# ------------------------------------------------------------------------------------------------
# The table
# ------------------------------------------------------------------------------------------------
@EXECUTORS.register(
    "local", cluster="local", params=_here_params,
    grace_s=lambda res: 15,  # half of submitit's local signal delay (30 s before its timeout)
    help="local: submitit subprocesses on this machine, --parallel at once, waits")
def run_local(sub: Submission, todo: list) -> None:
    """At most `parallel` runs at once, each a submitit local job (its own process)."""
    queue, active = start_order(todo), {}
    progress = SweepProgress(todo, sub.states, enabled=sub.show_progress)
    if sub.show_progress:
        sub.out = progress.write
    try:
        while queue or active:
            while queue and len(active) < sub.parallel:
                r = queue.pop(0)
                job = sub.executor_for(r.resources).submit(sub.job(r))
                sub.record(r, job)
                active[r.run_id] = job
            time.sleep(0.5)
            for rid in [rid for rid, j in active.items() if j.done()]:
                sub.result["results"][rid] = sub.outcome(active.pop(rid))
            progress.update(active, sub.result["results"])
    except KeyboardInterrupt:
        for j in active.values():
            j.cancel(check=False)
        sub.out("interrupted: running jobs cancelled; run the same command again to resume")
        raise
    finally:
        progress.close()


@EXECUTORS.register(
    "slurm", cluster="slurm", params=_slurm_params, preflight=_slurm_preflight, slurm_jobs=True,
    grace_s=lambda res: res["signal_delay_s"] / 2,
    help="slurm: one job array per resource group, returns once queued")
def run_slurm(sub: Submission, todo: list) -> None:
    """One job array per resource group; waits for the jobs only when asked."""
    groups: dict[str, list] = {}
    for r in todo:
        groups.setdefault(json.dumps(r.resources, sort_keys=True), []).append(r)
    for group in groups.values():
        ex = sub.executor_for(group[0].resources)
        with ex.batch():
            jobs = [ex.submit(sub.job(r)) for r in group]
        for r, job in zip(group, jobs):
            sub.record(r, job)
        what = f"job array {jobs[0].job_id.split('_')[0]}" if len(jobs) > 1 else f"job {jobs[0].job_id}"
        sub.out(f"  {what}: {len(jobs)} run{'s' if len(jobs) > 1 else ''} "
                f"({describe(group[0].resources)})")
    if sub.wait:
        pending = dict(sub.result["jobs"])
        while pending:
            for rid in [rid for rid, j in pending.items() if j.done()]:
                sub.result["results"][rid] = sub.outcome(pending.pop(rid))
            if pending:
                time.sleep(2.0)


@EXECUTORS.register(
    "debug", cluster="debug", params=_here_params,
    help="debug: in-process, one by one (pdb post-mortem on an exception)")
def run_debug(sub: Submission, todo: list) -> None:
    """In-process, one after another (result() runs it): tests and pdb."""
    for r in todo:
        job = sub.executor_for(r.resources).submit(sub.job(r))
        sub.record(r, job)
        sub.result["results"][r.run_id] = sub.outcome(job)

