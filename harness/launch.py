"""Launching a sweep through submitit, idempotently, and reporting its status.

    rlablate sweep sweeps/demo.yaml --dry-run            # the runs, their state, what would go out
    rlablate sweep sweeps/demo.yaml                      # local: runs N at once, waits
    rlablate sweep sweeps/x.yaml --executor slurm        # one job array per resource group
    rlablate status sweeps/demo.yaml                     # or: rlablate status results/demo

One code path for every executor: submitit's `AutoExecutor` with `cluster` = local | slurm | debug
(as hydra's submitit launcher does). The job is `RunJob`, a `Checkpointable` whose state is the
run's own checkpoint: on preemption or time-out submitit requeues the same callable and `train()`
resumes from `checkpoints/last.pt`, truncating metrics past it, so no row is lost or duplicated.

Run states (pending/queued/running/incomplete/failed/finished/diverged) are derived in
`harness.status` from the run directories, their locks and the scheduler.

Idempotence comes from the run directories, not from bookkeeping that could drift: a run whose
`summary.json` says finished (or diverged: a deterministic result) is skipped; a run whose lock is
held, or whose last SLURM job is still queued or running, is skipped; anything else (never started,
failed, killed mid-way) is submitted and resumes. `train()`'s own file lock is the last guard: two
processes never run one run at once. The sweep dir records the spec, the git commit and the package
versions of every launch (`sweep.json`), and which job ran which run (`jobs.jsonl`, `attempts.jsonl`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import submitit
import yaml
from tqdm.auto import tqdm

from .storage import LockHeld, append_jsonl, file_lock, last_step, read_json, write_json
from .status import (SUBMIT_STATES, NotASweepDir, RunState, run_states, runs_of_dir, status_report,
                     sweep_dir)
from .registry import suggest
from .sweep import Run, Spec, SpecError, norm_value

VERSIONED = ("rlablate", "torch", "transformers", "tokenizers", "reasoning-gym", "submitit", "pyyaml",
             "numpy")


class LaunchError(RuntimeError):
    """The launch could not go ahead (no scheduler, a submission refused): one line."""


# ------------------------------------------------------------------------------------------------
# The job
# ------------------------------------------------------------------------------------------------
class RunJob(submitit.helpers.Checkpointable):
    """Train one run of a sweep. Holds only the resolved config (a plain dict), so the pickle is
    small and the run is exactly the one expanded at submission time."""

    def __init__(self, config: dict, run_id: str):
        self.config, self.run_id = config, run_id

    def __call__(self) -> dict:
        from .config import config_from_dict
        from .loop import train

        cfg = config_from_dict(self.config)
        if cfg.run_id() != self.run_id:  # the code changed between submission and start
            raise RuntimeError(f"run {self.run_id}: this harness resolves its config to "
                               f"{cfg.run_id()} (the config schema or defaults changed since "
                               f"submission); refusing to run it under another id: resubmit")
        run_dir = cfg.run_dir()
        prev = read_json(run_dir / "summary.json") or {}
        try:
            job_id = submitit.JobEnvironment().job_id
        except RuntimeError:  # the debug executor runs in-process, outside a job environment
            job_id = "debug"
        append_jsonl(run_dir.parent / "attempts.jsonl", {
            "time": time.time(), "run_id": cfg.run_id(), "job_id": job_id,
            "host": socket.gethostname(), "pid": os.getpid(),
            "resume_from_step": prev.get("step", 0) if prev.get("status") != "finished" else None})
        summary = train(cfg, progress=False)
        return {"run_id": cfg.run_id(), "status": summary["status"], "step": summary.get("step")}

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        """Preempted or timed out: requeue this same run. Its state is on disk (the run's
        checkpoint), so nothing needs to be carried in the pickle."""
        return submitit.helpers.DelayedSubmission(RunJob(self.config, self.run_id))


# ------------------------------------------------------------------------------------------------
# The record of a sweep
# ------------------------------------------------------------------------------------------------
def environment() -> dict:
    """Git commit of the harness and package versions: what a launch ran with."""
    repo = Path(__file__).resolve().parent.parent
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


def record_launch(spec: Spec, runs: list[Run], executor: str, submitted: list[str],
                  skipped: dict[str, str]) -> Path:
    """Write <sweep>/sweep.json (spec, runs, and one entry per launch) and <sweep>/spec.yaml."""
    sdir = sweep_dir(runs)
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


# ------------------------------------------------------------------------------------------------
# Launch
# ------------------------------------------------------------------------------------------------
def _executor(kind: str, sdir: Path, res: dict, name: str) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=sdir / "_submitit" / "%j", cluster=kind,
                               slurm_max_num_timeout=res["max_timeouts"],
                               local_max_num_timeout=res["max_timeouts"])
    params = {"name": f"rlablate-{name}", "timeout_min": res["time_min"],
              "cpus_per_task": res["cpus_per_task"], "gpus_per_node": res["gpus_per_node"],
              "mem_gb": res["mem_gb"]}
    if kind == "slurm":
        params.update(slurm_partition=res["partition"], slurm_array_parallelism=res["array_parallelism"],
                      slurm_account=res["account"], slurm_qos=res["qos"],
                      slurm_constraint=res["constraint"], slurm_setup=res["setup"],
                      slurm_signal_delay_s=res["signal_delay_s"])
    else:  # local/debug: this machine's memory is what it is; GPUs only when asked for
        del params["mem_gb"]
        if not res["gpus_per_node"]:
            del params["gpus_per_node"]
    ex.update_parameters(**params)
    return ex


def _job(r: Run) -> RunJob:
    return RunJob(r.cfg.to_dict(), r.run_id)


def plan(runs: list[Run], selected: set[str] | None = None
         ) -> tuple[dict[str, RunState], list[Run], dict[str, str]]:
    """What a launch would do: (states, runs to submit, skipped run_id -> why). `selected` (run ids,
    from --only) limits what is submitted; the others are skipped as 'not selected'."""
    states = run_states(sweep_dir(runs), [r.run_id for r in runs])
    todo = [r for r in runs if states[r.run_id].state in SUBMIT_STATES
            and (selected is None or r.run_id in selected)]
    skipped = {}
    for r in runs:
        st = states[r.run_id]
        if st.state in SUBMIT_STATES and selected is not None and r.run_id not in selected:
            skipped[r.run_id] = "not selected"
        elif st.state not in SUBMIT_STATES:
            skipped[r.run_id] = st.state + (f" (job {st.job_id})" if st.state in ("queued", "running")
                                            and st.job_id else "")
    return states, todo, skipped


def launch(spec: Spec, runs: list[Run], executor: str, parallel: int = 0, wait: bool = False,
           out: Callable[[str], None] = print, selected: set[str] | None = None,
           show_progress: bool = False) -> dict:
    """Submit the runs that need it. local and debug wait for their runs; slurm returns once the
    arrays are queued unless `wait`. Returns {"submitted": [...], "skipped": {...}, "jobs": {...},
    "results": {run_id: status}}."""
    if executor == "slurm" and not shutil.which("sbatch"):
        raise LaunchError("--executor slurm: no `sbatch` on this machine (start a cluster with "
                          "scripts/slurm_up.sh, or use --executor local)")
    with _launch_lock(sweep_dir(runs)):
        return _launch_locked(spec, runs, executor, parallel, wait, out, selected, show_progress)


@contextlib.contextmanager
def _launch_lock(sdir: Path):
    """One launch of a sweep at a time: two `rlablate sweep` commands planning at once could both
    see a run as pending and submit it twice (train()'s run lock would still keep the second copy
    from running alongside, but it would queue and wait for nothing)."""
    try:
        with file_lock(sdir / ".launch.lock", blocking=False):
            yield
    except LockHeld:
        raise LaunchError(f"{sdir}: another `rlablate sweep` of this sweep is submitting (or "
                          f"running it locally); wait for it, see `rlablate status`") from None


def start_order(runs: list[Run]) -> list[Run]:
    """The order the local executor starts runs in: most `train.steps` first, spec order among
    equals, so a sweep that runs a few variants longer does not end with one core busy on a long
    run and the others idle (longest-processing-time-first scheduling)."""
    return sorted(runs, key=lambda r: -r.cfg.train.steps)


def _launch_locked(spec: Spec, runs: list[Run], executor: str, parallel: int, wait: bool,
                   out: Callable[[str], None], selected: set[str] | None,
                   show_progress: bool = False) -> dict:
    sdir = sweep_dir(runs)
    states, todo, skipped = plan(runs, selected)
    record_launch(spec, runs, executor, [r.run_id for r in todo], skipped)
    out(f"sweep {spec.name}: {summarize(runs)}; submitting {len(todo)}, skipping {len(skipped)} "
        f"({_count(skipped.values())})  [{sdir}]")
    result: dict = {"submitted": [r.run_id for r in todo], "skipped": skipped, "jobs": {},
                    "results": {}}
    if not todo:
        return result
    groups: dict[str, list[Run]] = {}
    for r in todo:
        groups.setdefault(json.dumps(r.resources, sort_keys=True), []).append(r)

    def record(r: Run, job) -> None:
        result["jobs"][r.run_id] = job
        append_jsonl(sdir / "jobs.jsonl", {"time": time.time(), "run_id": r.run_id,
                                            "job_id": str(job.job_id), "executor": executor})

    if executor == "slurm":
        for key, group in groups.items():
            ex = _executor("slurm", sdir, group[0].resources, spec.name)
            with ex.batch():
                jobs = [ex.submit(_job(r)) for r in group]
            for r, job in zip(group, jobs):
                record(r, job)
            what = f"job array {jobs[0].job_id.split('_')[0]}" if len(jobs) > 1 else f"job {jobs[0].job_id}"
            out(f"  {what}: {len(jobs)} run{'s' if len(jobs) > 1 else ''} "
                f"({_describe_res(group[0].resources)})")
        if wait:
            _wait(result, out)
        return result

    if executor == "debug":  # in-process, one after another (result() runs it): tests and pdb
        for r in todo:
            job = _executor("debug", sdir, r.resources, spec.name).submit(_job(r))
            record(r, job)
            result["results"][r.run_id] = _outcome(job, out)
        return result

    # local: at most `parallel` runs at once, each a submitit local job (its own process)
    parallel = parallel or spec.local["parallel"] or os.cpu_count() or 1
    queue, active = start_order(todo), {}
    progress = SweepProgress(todo, states, enabled=show_progress)
    out = progress.write if show_progress else out
    try:
        while queue or active:
            while queue and len(active) < parallel:
                r = queue.pop(0)
                job = _executor("local", sdir, r.resources, spec.name).submit(_job(r))
                record(r, job)
                active[r.run_id] = job
            time.sleep(0.5)
            for rid in [rid for rid, j in active.items() if j.done()]:
                result["results"][rid] = _outcome(active.pop(rid), out)
            progress.update(active, result["results"])
    except KeyboardInterrupt:
        for j in active.values():
            j.cancel(check=False)
        out("interrupted: running jobs cancelled; run the same command again to resume")
        raise
    finally:
        progress.close()
    return result


class SweepProgress:
    """One progress bar over the RL steps of every submitted run (resumed steps count as done),
    with the runs' states in its postfix: `12/48 done, 1 failed | grpo-tiny-1m-s0 34/60, ...`.
    Each run's step is read from the tail of its metrics.jsonl (no IPC with the jobs)."""

    def __init__(self, runs: list[Run], states: dict, enabled: bool = True):
        self.runs = {r.run_id: r for r in runs}
        self.total = {r.run_id: r.cfg.train.steps for r in runs}
        self.start = {r.run_id: (states[r.run_id].step or 0) if r.run_id in states else 0
                      for r in runs}
        self.bar = tqdm(total=sum(self.total.values()), unit="step", dynamic_ncols=True,
                        desc=f"{len(runs)} runs", disable=not enabled,
                        initial=sum(self.start.values()))

    def _step(self, rid: str) -> int:
        step = last_step(self.runs[rid].cfg.run_dir() / "metrics.jsonl")
        return min(step or 0, self.total[rid])

    def update(self, active: dict, results: dict) -> None:
        if self.bar.disable:
            return
        done = sum(self.total[rid] if results.get(rid) == "finished" else self._step(rid)
                   for rid in self.total if rid in results)
        now = {rid: self._step(rid) for rid in active}
        self.bar.n = done + sum(now.values()) + sum(self.start[rid] for rid in self.total
                                                   if rid not in results and rid not in active)
        failed = sum(1 for v in results.values() if v != "finished")
        running = ", ".join(f"{self.runs[rid].cfg.run_name()} {now[rid]}/{self.total[rid]}"
                            for rid in active)
        self.bar.set_postfix_str(f"{len(results)}/{len(self.total)} done"
                                 + (f", {failed} not finished" if failed else "")
                                 + (f" | {running}" if running else ""), refresh=False)
        self.bar.refresh()

    def write(self, text: str) -> None:
        self.bar.write(text) if not self.bar.disable else print(text)

    def close(self) -> None:
        self.bar.close()


def _wait(result: dict, out: Callable[[str], None], poll_s: float = 2.0) -> None:
    pending = dict(result["jobs"])
    while pending:
        for rid in [rid for rid, j in pending.items() if j.done()]:
            result["results"][rid] = _outcome(pending.pop(rid), out)
        if pending:
            time.sleep(poll_s)


def _outcome(job, out: Callable[[str], None]) -> str:
    try:
        res = job.result()
        status = res["status"]
        out(f"  {status:9s} {res['run_id']}  step {res['step']}  (job {job.job_id})")
    except Exception as e:  # the job raised, was killed or cancelled: report and go on
        status = "failed"
        first = str(e).strip().splitlines()
        out(f"  failed    job {job.job_id}: {type(e).__name__}: {first[-1] if first else ''}  "
            f"(log: {job.paths.stderr})")
    return status


def _count(values) -> str:
    counts: dict[str, int] = {}
    for v in values:
        k = v.split(" (")[0]  # "queued (job 12_3)" -> queued
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"


def _describe_res(res: dict) -> str:
    keys = ("partition", "time_min", "cpus_per_task", "gpus_per_node", "mem_gb")
    return ", ".join(f"{k}={res[k]}" for k in keys if res.get(k) is not None)


def summarize(runs: list[Run]) -> str:
    groups = {repr(sorted(r.resources.items())) for r in runs}
    return f"{len(runs)} runs in {len(groups)} resource group{'s' if len(groups) != 1 else ''}"


def table(runs: list[Run], spec: Spec, extra: dict[str, list[str]] | None = None) -> str:
    """A plain-text table: index, run_id, the swept values, and any extra columns."""
    keys = list(spec.swept_keys)
    header = ["#", "run_id"] + keys + list(extra or {})
    rows = [[str(r.index), r.run_id] + [str(r.point.get(k, "-")) for k in keys]
            + [col[i] for col in (extra or {}).values()] for i, r in enumerate(runs)]
    widths = [max(len(h), *(len(row[j]) for row in rows)) if rows else len(h)
              for j, h in enumerate(header)]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    return "\n".join(fmt.format(*row).rstrip() for row in [header] + rows)


def select(spec: Spec, runs: list[Run], only: list[str]) -> list[Run]:
    """The runs matching every `KEY=V1,V2` of `only` (--only): KEY must be swept and each value must
    match some run, so a typo selects nothing silently."""
    keep = list(runs)
    swept = spec.swept_keys
    for item in only:
        key, eq, raw = item.partition("=")
        if not eq or not raw:
            raise SpecError(f"--only {item!r}: expected KEY=VALUE[,VALUE...], e.g. algo.preset=grpo")
        if key not in swept:
            raise SpecError(f"--only {item!r}: {key} is not swept; swept keys are "
                            f"{', '.join(swept) or 'none'}" + suggest(key, swept))
        wanted = [norm_value(yaml.safe_load(v)) for v in raw.split(",")]
        have = sorted({str(r.point[key]) for r in runs if key in r.point})
        for v, text in zip(wanted, raw.split(",")):
            if not any(key in r.point and norm_value(r.point[key]) == v for r in runs):
                raise SpecError(f"--only {item!r}: no run has {key} = {text}; values are "
                                f"{', '.join(have)}" + suggest(text, have))
        keep = [r for r in keep if key in r.point and norm_value(r.point[key]) in wanted]
    if not keep:
        raise SpecError(f"--only {' '.join(only)}: no run matches all of these")
    return keep


# ------------------------------------------------------------------------------------------------
# Command line (`rlablate sweep`, `rlablate status`; wired in harness/cli.py)
# ------------------------------------------------------------------------------------------------
def add_parsers(sub) -> None:
    import argparse
    fmt = argparse.RawDescriptionHelpFormatter
    s = sub.add_parser("sweep", help="expand a sweep spec and launch its runs (idempotent)",
                       formatter_class=fmt, description=(
                           "Expand SPEC (sweeps/*.yaml) into runs and submit those not finished, "
                           "not running and not queued, through submitit. Re-running the same "
                           "command skips finished runs and resumes the rest from their "
                           "checkpoints. The sweep dir <run.results_dir>/<name>/ records the spec, "
                           "git commit and package versions (sweep.json), the jobs (jobs.jsonl) and "
                           "the submitit logs (_submitit/)."))
    s.add_argument("spec", help="sweep spec YAML (see harness/sweep.py for the keys)")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="dotted keys applied to every run, e.g. run.results_dir=/scratch/r or "
                        "slurm.partition=gpu (a swept key cannot be overridden)")
    s.add_argument("--executor", choices=("local", "slurm", "debug"), default=None,
                   help="local: submitit subprocesses on this machine, --parallel at once, waits; "
                        "slurm: one job array per resource group, returns once queued; debug: "
                        "in-process, one by one (pdb post-mortem on an exception). Default: the spec's "
                        "`executor`")
    s.add_argument("--dry-run", action="store_true",
                   help="print the runs, their state and what would be submitted; write nothing")
    s.add_argument("--parallel", type=int, default=0,
                   help="local executor: runs at once (default: the spec's local.parallel, else "
                        "one per CPU core)")
    s.add_argument("--only", action="append", default=[], metavar="KEY=V[,V...]",
                   help="submit only the runs whose swept KEY has one of these values (repeatable; "
                        "all must hold), e.g. --only algo.preset=grpo,dapo; the sweep still records "
                        "every run")
    s.add_argument("--wait", action="store_true",
                   help="slurm executor: wait for the jobs and report each run's outcome")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="local executor: one progress bar over all runs' steps with each running "
                        "run's step (default: on when stderr is a terminal)")
    t = sub.add_parser("status", help="counts and per-run progress of a sweep", formatter_class=fmt,
                       description="State of every run of a sweep: pending (not submitted), queued, "
                       "running, incomplete (stopped mid-way; resumes on the next `rlablate "
                       "sweep`), failed, finished, diverged; step/progress, attempts, the latest "
                       "job id and its SLURM state.")
    t.add_argument("target", help="a sweep spec YAML, or a sweep directory <results_dir>/<name>")
    t.add_argument("overrides", nargs="*", metavar="key=value",
                   help="with a spec: the same overrides as given to `rlablate sweep`")


def run_cli(args, exit_usage: int = 2, exit_failed: int = 1) -> int:
    """`rlablate sweep` / `rlablate status`. Exit 2 for a bad spec (nothing written or submitted),
    1 when a waited-for run failed, else 0."""
    from .sweep import expand, load_spec

    def load(path: str, overrides: list[str]):
        spec = load_spec(path, overrides)
        return spec, expand(spec)

    try:
        if args.cmd == "status":
            target = Path(args.target)
            if target.is_dir():
                if args.overrides:
                    raise SpecError("status DIR takes no key=value overrides")
                sdir, ids = target, runs_of_dir(target)
            else:
                _, runs = load(args.target, args.overrides)
                sdir, ids = sweep_dir(runs), [r.run_id for r in runs]
            text, _ = status_report(sdir, ids)
            print(text)
            return 0
        spec, runs = load(args.spec, args.overrides)
        executor = args.executor or spec.executor
        if args.parallel < 0:
            raise SpecError(f"--parallel = {args.parallel}: must be >= 0")
        selected = {r.run_id for r in select(spec, runs, args.only)} if args.only else None
        if args.dry_run:
            states, todo, skipped = plan(runs, selected)
            go = {r.run_id for r in todo}
            print(table(runs, spec, {"state": [states[r.run_id].state for r in runs],
                                     "action": ["submit" if r.run_id in go else "skip" for r in runs]}))
            print(f"{summarize(runs)}; {executor} executor would submit {len(todo)}, skip "
                  f"{len(skipped)}; sweep dir {sweep_dir(runs)}  (dry run: nothing written)")
            return 0
        show = sys.stderr.isatty() if args.progress is None else args.progress
        res = launch(spec, runs, executor, parallel=args.parallel, wait=args.wait, selected=selected,
                     show_progress=show)
    except (SpecError, LaunchError, NotASweepDir) as e:
        print(f"rlablate: {'spec' if isinstance(e, SpecError) else 'launch'} error: {e}",
              file=sys.stderr)
        return exit_usage
    bad = [rid for rid, s in res["results"].items() if s != "finished"]
    if res["results"]:
        print(f"{len(res['results']) - len(bad)} of {len(res['results'])} submitted runs finished"
              + (f"; not finished: {', '.join(bad)}" if bad else ""))
    return exit_failed if bad else 0
