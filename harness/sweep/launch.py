"""Launching a sweep through submitit, idempotently.

    rlablate sweep sweeps/demo.yaml --dry-run            # the runs, their state, what would go out
    rlablate sweep sweeps/demo.yaml                      # local: runs N at once, waits
    rlablate sweep sweeps/x.yaml --executor slurm        # one job array per resource group

One code path for every executor: `plan` says what to submit, `launch` records it and hands the
runs to the executor's entry in `executors.EXECUTORS` (submitit's AutoExecutor with `cluster` =
local | slurm | debug, as hydra's submitit launcher does). The job is `job.RunJob`.

Idempotence comes from the run directories, not from bookkeeping that could drift: a run whose
`summary.json` says finished (or diverged: a deterministic result) is skipped; a run whose lock is
held, or whose last SLURM job is still queued or running, is skipped; anything else (never started,
failed, killed mid-way) is submitted and resumes. `train()`'s own file lock is the last guard: two
processes never run one run at once. The sweep dir records every launch (`record.py`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

from ..storage import LockHeld, file_lock
from .executors import EXECUTORS, LaunchError, Submission
from .expand import Run, sweep_dir
from .record import record_launch
from .spec import Spec
from .status import SUBMIT_STATES, RunState, run_states

__all__ = ["LaunchError", "launch", "plan", "summarize"]


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
           show_progress: bool = False, pause_at: int | None = None) -> dict:
    """Submit the runs that need it. local and debug wait for their runs; slurm returns once the
    arrays are queued unless `wait`. Returns {"submitted": [...], "skipped": {...}, "jobs": {...},
    "results": {run_id: status}}."""
    preflight = EXECUTORS.meta(executor).preflight
    if preflight is not None:
        preflight(runs)
    sdir = sweep_dir(runs)
    with _launch_lock(sdir):
        states, todo, skipped = plan(runs, selected)
        record_launch(sdir, spec, runs, executor, [r.run_id for r in todo], skipped)
        out(f"sweep {spec.name}: {summarize(runs)}; submitting {len(todo)}, skipping {len(skipped)} "
            f"({_count(skipped.values())})  [{sdir}]")
        sub = Submission(executor, sdir, spec.name, out, wait=wait, states=states,
                         show_progress=show_progress, pause_at=pause_at,
                         parallel=parallel or spec.local["parallel"] or os.cpu_count() or 1)
        sub.result.update(submitted=[r.run_id for r in todo], skipped=skipped)
        if todo:
            EXECUTORS[executor](sub, todo)
        return sub.result


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


def _count(values) -> str:
    counts: dict[str, int] = {}
    for v in values:
        k = v.split(" (")[0]  # "queued (job 12_3)" -> queued
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"


def summarize(runs: list[Run]) -> str:
    groups = {repr(sorted(r.resources.items())) for r in runs}
    return f"{len(runs)} runs in {len(groups)} resource group{'s' if len(groups) != 1 else ''}"
