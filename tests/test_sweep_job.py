"""harness.sweep.job: the preemption signal (USR2) becomes a stop request the loop honours at its
next step boundary (checkpoint + summary), then submitit requeues; past `grace_s` without a step
boundary, submitit's own handler takes over from wherever the job is."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from harness.config import load_config
from harness.sweep.expand import expand
from harness.sweep.job import StopRequest
from harness.sweep.launch import launch
from harness.sweep.spec import load_spec
from harness.loop import train
from sweeplib import tiny_spec, write_spec


@pytest.fixture
def usr2():
    """The test process's USR2 handler, restored afterwards."""
    before = signal.getsignal(signal.SIGUSR2)
    yield signal.SIGUSR2
    signal.signal(signal.SIGUSR2, before)


def wait(pred, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_the_signal_is_a_request_and_the_grace_timer_hands_over_to_submitit(usr2):
    calls = []
    stop = StopRequest(usr2, lambda signum, frame: calls.append(signum), grace_s=0.3)
    signal.signal(usr2, stop._on_signal)
    assert not stop.requested()
    os.kill(os.getpid(), usr2)
    wait(stop.requested, 5, "the stop request")
    assert calls == []                      # the loop gets its chance first
    wait(lambda: calls, 5, "the grace timer")  # no step boundary within grace_s: submitit's turn
    assert calls == [usr2] and signal.getsignal(usr2) is not stop._on_signal


def test_a_stop_that_comes_in_time_cancels_the_timer(usr2):
    calls = []
    stop = StopRequest(usr2, lambda signum, frame: calls.append(signum), grace_s=0.3)
    signal.signal(usr2, stop._on_signal)
    os.kill(os.getpid(), usr2)
    wait(stop.requested, 5, "the stop request")
    stop.cancel()                           # what RunJob does once train() has returned
    time.sleep(0.6)
    assert calls == []


def test_outside_a_submitit_job_nothing_is_installed(usr2):
    before = signal.getsignal(usr2)
    assert StopRequest.install(10.0) is None and StopRequest.install(None) is None
    assert signal.getsignal(usr2) is before


def _rows(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _no_clock(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(("perf/", "compute/wall_s"))}


def test_train_stops_at_the_step_boundary_saves_and_resumes_identically(tiny_overrides, tmp_path):
    """stop_requested() true after step 1, with no periodic checkpoint due until step 1000: the
    loop saves step 1 anyway and returns `interrupted`; resuming ends with the rows an
    uninterrupted run writes."""
    over = tiny_overrides + ["train.checkpoint_every=1000"]
    cfg = load_config(None, over)
    polls = []
    s = train(cfg, progress=False, stop_requested=lambda: polls.append(1) or True)
    assert (s["status"], s["stop_reason"], s["step"]) == ("interrupted", "preempted", 1)
    assert len(polls) == 1
    rd = cfg.run_dir()
    on_disk = json.loads((rd / "summary.json").read_text())
    assert on_disk["status"] == "running" and on_disk["step"] == 1  # resumable, not finished
    assert [(r["kind"], r["step"]) for r in _rows(rd)] == [("eval", 0), ("train", 1)]
    s = train(cfg, progress=False, stop_requested=lambda: False)
    assert s["status"] == "finished" and s["step"] == 4
    ref = load_config(None, over + [f"run.results_dir={tmp_path / 'ref'}"])
    train(ref, progress=False)
    assert [_no_clock(r) for r in _rows(rd)] == [_no_clock(r) for r in _rows(ref.run_dir())]


def test_no_stop_on_the_last_step(tiny_overrides):
    cfg = load_config(None, tiny_overrides + ["train.steps=1"])
    s = train(cfg, progress=False, stop_requested=lambda: True)
    assert s["status"] == "finished" and s["step"] == 1


@pytest.mark.faults
@pytest.mark.slow
def test_usr2_to_a_local_job_saves_at_the_next_step_and_requeues(tmp_path, cache_dir):
    """A submitit local job, USR2 to its process at step >= 4 with no periodic checkpoint due:
    the job saves the step it is at, submitit requeues it (the local controller restarts it), and
    the second attempt resumes from that step; every row once."""
    raw = tiny_spec(tmp_path, cache_dir, seeds=[0])
    raw["set"].update({"train.steps": 40, "eval.every": 20, "train.checkpoint_every": 1000,
                       "rollout.max_new_tokens": 12})
    path = write_spec(tmp_path, raw)
    spec = load_spec(path)
    (run,) = expand(spec)
    rdir, sdir = run.cfg.run_dir(), run.cfg.run_dir().parent
    res: dict = {}
    th = threading.Thread(target=lambda: res.update(launch(spec, [run], "local", out=lambda s: None)))
    th.start()
    wait(lambda: (rdir / "metrics.jsonl").exists()
         and max([r["step"] for r in _rows(rdir) if r["kind"] == "train"] or [0]) >= 4, 180, "step 4")
    pid = json.loads((sdir / "attempts.jsonl").read_text().splitlines()[-1])["pid"]
    os.kill(pid, signal.SIGUSR2)  # the job's own process, which this test started
    th.join(timeout=300)
    assert not th.is_alive() and res["results"] == {run.run_id: "finished"}
    tries = [json.loads(x) for x in (sdir / "attempts.jsonl").read_text().splitlines()]
    assert [t["resume_from_step"] for t in tries][0] == 0 and len(tries) == 2
    assert tries[1]["resume_from_step"] >= 4 and tries[1]["pid"] != pid
    log = next((sdir / "_submitit").glob("*/*_log.err")).read_text()
    assert f"stopped at step {tries[1]['resume_from_step']} (checkpoint saved)" in log, log[-3000:]
    rows = [(r["kind"], r["step"]) for r in _rows(rdir)]
    assert rows == [("eval", 0)] + [("train", i) for i in range(1, 21)] + [("eval", 20)] + \
        [("train", i) for i in range(21, 41)] + [("eval", 40)]
