"""The job every executor runs: train one run of a sweep, and stop it cleanly when the scheduler
says time is up.

`RunJob` is a submitit `Checkpointable` whose state is the run's own checkpoint: on preemption or
time-out submitit requeues the same callable and `train()` resumes from `checkpoints/last.pt`,
truncating metrics past it, so no row is lost or duplicated.

The stop. SLURM sends USR2 `signal_delay_s` before the time limit (a preempting scheduler does the
same). submitit's own handler would call `checkpoint()`, requeue and exit at once, from wherever the
loop is: everything since the last periodic checkpoint is lost, and an attempt signalled before its
first periodic save ends with nothing saved. So the job takes the signal first (`StopRequest`):
the loop is asked to stop at its next step boundary (`train(stop_requested=...)` saves a checkpoint
and the summary, then returns with `stop_reason = "preempted"`), and only then is submitit's
handler called, which requeues. If the loop has not reached a step boundary within `grace_s`
(half the signal delay: it is still loading, or in a long eval), the job hands over to submitit's
handler anyway, from where it is (the old behaviour: requeued, progress since the last save lost),
so the job is requeued before SLURM kills it.

This module is imported when submitit unpickles the job, before its signal handlers exist: it
imports nothing heavy at module level (torch comes with `train`, inside `__call__`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, Callable

import submitit
from submitit.core.job_environment import SignalHandler


class StopRequest:
    """submitit's preemption signal turned into a flag the loop polls at step boundaries.

    `install()` replaces submitit's handler (in a submitit job; elsewhere it returns None). The
    first signal sets the flag and starts a `grace_s` timer; a second signal (the timer's, or the
    scheduler's) calls submitit's handler, which checkpoints, requeues and exits the process."""

    def __init__(self, signum: int, submitit_handler: Callable, grace_s: float):
        self.signum, self.grace_s = signum, grace_s
        self._submitit = submitit_handler
        self.since: float | None = None  # monotonic time of the first signal
        self._timer: threading.Timer | None = None

    @classmethod
    def install(cls, grace_s: float | None) -> StopRequest | None:
        if grace_s is None:
            return None
        signum = submitit.JobEnvironment._usr_sig()
        handler = signal.getsignal(signum)
        if not isinstance(getattr(handler, "__self__", None), SignalHandler):
            return None  # not inside a submitit job (the debug executor runs in-process)
        stop = cls(signum, handler, grace_s)
        signal.signal(signum, stop._on_signal)
        return stop

    def requested(self) -> bool:
        return self.since is not None

    def _on_signal(self, signum: int, frame: Any = None) -> None:
        if self.since is None:
            self.since = time.monotonic()
            _say(f"caught {signal.Signals(signum).name}: the run stops at its next step boundary "
                 f"(checkpoint + summary), then requeues; submitit requeues it from where it is "
                 f"if that takes over {self.grace_s:g} s")
            self._timer = threading.Timer(self.grace_s, os.kill, (os.getpid(), signum))
            self._timer.daemon = True
            self._timer.start()
            return
        _say(f"{signal.Signals(signum).name} again {time.monotonic() - self.since:.0f} s after the "
             f"first, before a step boundary: handing over to submitit now (progress since the "
             f"last checkpoint is lost)")
        self.hand_over(frame)

    def hand_over(self, frame: Any = None) -> None:
        """submitit's handler: `RunJob.checkpoint()`, requeue (within max_timeouts), exit. It does
        not return (sys.exit, or UncompletedJobError when no requeue is left)."""
        self.cancel()
        signal.signal(self.signum, self._submitit)
        self._submitit(self.signum, frame)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _say(text: str) -> None:
    print(f"rlablate: {text}", file=sys.stderr, flush=True)


class RunJob(submitit.helpers.Checkpointable):
    """Train one run of a sweep. Holds only the resolved config (a plain dict), so the pickle is
    small and the run is exactly the one expanded at submission time. `grace_s`: how long a stop
    request may wait for a step boundary (None: no signal handling of ours, e.g. in-process)."""

    def __init__(self, config: dict, run_id: str, grace_s: float | None = None,
                 pause_at: int | None = None):
        self.config, self.run_id, self.grace_s = config, run_id, grace_s
        self.pause_at = pause_at  # successive halving: checkpoint and stop at this step

    def __call__(self) -> dict:
        stop = StopRequest.install(getattr(self, "grace_s", None))  # first: before torch loads
        from ..config import config_from_dict
        from ..storage import read_json
        from ..loop import train
        from .record import record_attempt

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
        record_attempt(run_dir.parent, cfg.run_id(), job_id,
                       prev.get("step", 0) if prev.get("status") != "finished" else None)
        try:
            summary = train(cfg, progress=False, stop_requested=stop.requested if stop else None,
                            pause_at=getattr(self, "pause_at", None))
        finally:
            if stop is not None:
                stop.cancel()
        if stop is not None and summary.get("stop_reason") == "preempted":
            _say(f"stopped at step {summary['step']} (checkpoint saved) "
                 f"{time.monotonic() - stop.since:.1f} s after the signal; requeueing")
            stop.hand_over()
        return {"run_id": cfg.run_id(), "status": summary["status"], "step": summary.get("step")}

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        """Preempted or timed out: requeue this same run. Its state is on disk (the run's
        checkpoint), so nothing needs to be carried in the pickle."""
        return submitit.helpers.DelayedSubmission(RunJob(self.config, self.run_id,
                                                         getattr(self, "grace_s", None),
                                                         getattr(self, "pause_at", None)))
