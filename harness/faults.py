"""Test-only fault injection: make a run die (or fail, or go non-finite) at an exact point.

NOT a user feature. The fault-injection suite (tests/test_faults_*.py) sets the environment variable

    RLABLATE_FAULT="ACTION=PHASE:STEP[@RUN],..."        e.g. RLABLATE_FAULT="kill=update:3"

and the process acts when it reaches PHASE at RL step STEP (of the run whose run_id contains RUN,
if given). Unset, every hook is one dict lookup on os.environ and a comparison: nothing else runs.

ACTION  kill  (default when omitted) SIGKILL this process: no cleanup, no finally, no atexit
        raise RuntimeError (a job that fails with an exception)
        nan   the checked tensor becomes NaN (only at the non-finite checks: reward, advantage, loss)
        inf   the same with +Inf
PHASE   rollout      after the step's rollout was sampled, before any update
        update       after the first optimizer step of the step, before the others
        metrics      halfway through writing the step's `train` row of metrics.jsonl (a torn line)
        eval         halfway through writing the step's `eval` row
        checkpoint   halfway through writing the step's checkpoint temp file (a torn file)
        rotate       after the new checkpoint is complete on disk, between last.pt -> prev.pt and
                     the temp file -> last.pt (the moment no last.pt exists)
        reward, advantage, loss   the non-finite checks (ACTION nan or inf)
"""

from __future__ import annotations

import functools
import os
import signal

ENV = "RLABLATE_FAULT"
ACTIONS = ("kill", "raise", "nan", "inf")
PHASES = ("rollout", "update", "metrics", "eval", "checkpoint", "rotate", "reward", "advantage", "loss")
_run_id = ""


class InjectedFault(RuntimeError):
    """Raised by ACTION raise."""


@functools.lru_cache(maxsize=8)
def parse(text: str) -> tuple[tuple[str, str, int, str], ...]:
    """'kill=update:3@-s1-,nan=loss:2' -> (('kill', 'update', 3, '-s1-'), ('nan', 'loss', 2, ''))."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        action, _, rest = item.rpartition("=")
        action = action or "kill"
        where, _, run = rest.partition("@")
        phase, _, step = where.partition(":")
        if action not in ACTIONS or phase not in PHASES or not step.lstrip("-").isdigit():
            raise ValueError(f"{ENV}={text!r}: bad item {item!r}; expected ACTION=PHASE:STEP[@RUN] "
                             f"with ACTION in {ACTIONS} and PHASE in {PHASES}")
        out.append((action, phase, int(step), run))
    return tuple(out)


def set_run(run_id: str) -> None:
    """The run this process trains (faults with @RUN fire only in matching runs)."""
    global _run_id
    _run_id = run_id


def armed(phase: str, step: int) -> str | None:
    """The action armed for PHASE at STEP in this run, or None (the common, unset case)."""
    text = os.environ.get(ENV)
    if not text:
        return None
    for action, ph, st, run in parse(text):
        if ph == phase and st == step and run in _run_id:
            return action
    return None


def point(phase: str, step: int) -> None:
    """A place where a run may be made to die or fail."""
    action = armed(phase, step)
    if action == "kill":
        kill()
    elif action == "raise":
        raise InjectedFault(f"injected fault at {phase}:{step} ({ENV})")


def poison(name: str, step: int, t):
    """The tensor a non-finite check sees: NaN or Inf when armed, else `t` itself."""
    action = armed(name, step)
    return t + float(action) if action in ("nan", "inf") else t


def torn(phase: str, step: int, f, data: bytes) -> None:
    """Write `data` to the open file `f`; when armed, write only half of it, make that durable,
    and die (a writer killed mid-write)."""
    if armed(phase, step) == "kill":
        f.write(data[: len(data) // 2])
        os.fsync(f.fileno())
        kill()
    f.write(data)


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
