"""Fault injection, sweeps (real submitit jobs on this machine): one job raises, one is SIGKILLed
mid-run. `rlablate status` tells exactly that; re-running the sweep submits exactly those two; the
finished runs are untouched (checksums before/after) and the retried ones end with every row once.
The node-drain and time-limit faults on the real SLURM cluster are in test_faults_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import TINY
from faultlib import checksums, lost_and_duplicated, row_keys
from harness.cli import main
from harness.sweep.status import run_states
from harness.sweep.expand import expand
from harness.sweep.spec import load_spec

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]
SET = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in TINY)}
SET.update({"train.steps": 6, "eval.every": 3, "train.checkpoint_every": 2})
WANT = [("eval", 0), ("train", 1), ("train", 2), ("train", 3), ("eval", 3), ("train", 4),
        ("train", 5), ("train", 6), ("eval", 6)]


def lines_of(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def test_failed_and_killed_jobs_status_and_exact_retry(tmp_path, cache_dir, capsys, monkeypatch):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "flt", "base": "grpo", "seeds": [0, 1, 2],
        "set": {**SET, "run.results_dir": str(tmp_path / "results"), "run.cache_dir": str(cache_dir)}}))
    runs = expand(load_spec(spec_path))
    by_seed = {r.cfg.run.seed: r for r in runs}
    sdir = runs[0].cfg.run_dir().parent
    # seed 1 raises in its second step's update; seed 2 is SIGKILLed in step 3's rollout
    monkeypatch.setenv("RLABLATE_FAULT", "raise=update:2@-s1-,kill=rollout:3@-s2-")
    assert main(["sweep", str(spec_path), "--executor", "local", "--parallel", "3"]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 submitted runs finished; not finished: " in out, out
    assert out.count("  failed    job ") == 2, out  # both reported, with their logs

    states = run_states(sdir, [r.run_id for r in runs])
    assert {s: states[by_seed[s].run_id].state for s in range(3)} == {
        0: "finished", 1: "failed", 2: "incomplete"}
    err = json.loads((by_seed[1].cfg.run_dir() / "summary.json").read_text())["error"]
    assert err == "InjectedFault: injected fault at update:2 (RLABLATE_FAULT)"
    assert main(["status", str(sdir)]) == 0
    text = capsys.readouterr().out
    assert "3 runs: 0 pending, 0 running, 1 incomplete, 1 failed, 1 finished, 0 diverged" in text, text
    for s, state in ((0, "finished"), (1, "failed"), (2, "incomplete")):
        row = next(x for x in text.splitlines() if x.startswith(by_seed[s].run_id))
        assert row.split()[1] == state, row
    done = checksums(by_seed[0].cfg.run_dir())
    jobs_before = len(lines_of(sdir / "jobs.jsonl"))

    # re-run without faults: exactly the failed and the killed run are submitted
    monkeypatch.delenv("RLABLATE_FAULT")
    assert main(["sweep", str(spec_path), "--executor", "local", "--parallel", "2"]) == 0
    out = capsys.readouterr().out
    assert "submitting 2, skipping 1 (1 finished)" in out and "2 of 2 submitted runs finished" in out, out
    new_jobs = lines_of(sdir / "jobs.jsonl")[jobs_before:]
    assert sorted(j["run_id"] for j in new_jobs) == sorted(by_seed[s].run_id for s in (1, 2))
    assert checksums(by_seed[0].cfg.run_dir()) == done               # finished result untouched
    attempts = {a["run_id"]: a for a in lines_of(sdir / "attempts.jsonl")}  # the latest of each
    assert attempts[by_seed[1].run_id]["resume_from_step"] == 0   # failed in step 2: checkpoint 0
    assert attempts[by_seed[2].run_id]["resume_from_step"] == 2   # killed in step 3: checkpoint 2
    for r in runs:
        got = row_keys(r.cfg.run_dir())
        assert got == WANT and lost_and_duplicated(got, WANT) == (0, 0), (r.run_id, got)
        assert json.loads((r.cfg.run_dir() / "summary.json").read_text())["status"] == "finished"
    assert main(["status", str(sdir)]) == 0
    assert "3 runs: 0 pending, 0 running, 0 failed, 3 finished, 0 diverged" in capsys.readouterr().out
