"""Sweep specs: strict validation, pure expansion, and launching through submitit (local and debug
executors, for real). The SLURM tests are in test_slurm.py."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, TINY
from harness import config as config_mod
from harness.cli import main
from harness.config import list_presets, load_config
from harness.launch import launch, plan
from harness.status import lock_held, run_states, runs_of_dir, status_report
from harness.sweep import expand, load_spec, parse_spec

TINY_SET = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in TINY)}


def write_spec(tmp_path: Path, spec: dict, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def tiny_spec(tmp_path: Path, cache_dir: Path, **extra) -> dict:
    spec = {"name": "t", "base": "grpo",
            "set": {**TINY_SET, "run.results_dir": str(tmp_path / "results"),
                    "run.cache_dir": str(cache_dir)}}
    spec.update(extra)
    return spec


def drop_swept(spec: dict) -> dict:
    """The tiny `set` fixes model.scale etc.; a test that sweeps a key takes it out of `set`."""
    swept = set(spec.get("grid", {})) | {k for g in spec.get("zip", []) for k in g}
    spec["set"] = {k: v for k, v in spec["set"].items() if k not in swept}
    return spec


# ------------------------------------------------------------------------------------------------
# Validation: one line naming the key, exit 2, nothing written
# ------------------------------------------------------------------------------------------------
BAD = [
    ({"seed": [0, 1]}, "unknown key 'seed'", "did you mean 'seeds'"),
    ({"grid": {"optim.lrr": [1e-3]}}, "grid.optim.lrr: unknown config key", "did you mean 'optim.lr'"),
    ({"grid": {"optim.lr": [1e-3, -1.0]}}, "run 1 (optim.lr=-1.0): optim.lr = -1.0", "must be >"),
    ({"grid": {"model.scale": ["tiny-0.3m", "tiny-2m"]}}, "model.scale = 'tiny-2m'", "allowed values"),
    ({"zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "optim.lr": [1e-3]}]}, "zip[0]",
     "equal lengths (model.scale: 2, optim.lr: 1)"),
    ({"seeds": 2, "exclude": [{"run.seed": 7}]}, "exclude[0]", "matches no run"),
    ({"seeds": 2, "exclude": [{"model.scale": "tiny-1m"}]}, "exclude[0].model.scale: not a swept key",
     "run.seed"),
    ({"executor": "slrum"}, "executor = 'slrum'", "did you mean 'slurm'"),
    ({"slurm": {"gpu_per_node": 1}}, "slurm.gpu_per_node: unknown key", "did you mean 'gpus_per_node'"),
    ({"slurm": {"time_min": "1h"}}, "slurm.time_min = '1h': expected int", "time limit"),
    ({"grid": {"slurm.mem_gb": [8, "lots"]}}, "grid.slurm.mem_gb = 'lots'", "expected"),
    ({"grid": {"optim.lr": [1e-3, 0.001]}}, "resolve to the same config", "run_id"),
    ({"grid": {"run.seed": [0]}, "seeds": [1]}, "seeds: also given in grid.run.seed",
     "one place"),
    ({"base": "grop"}, "base = 'grop'", "did you mean 'grpo'"),
    ({"grid": {"run.results_dir": ["a", "b"]}}, "run.results_dir: cannot be swept", "one directory"),
    ({"set": {"run.sweep": "x"}}, "run.sweep: cannot be set", "name"),
    ({"name": "../up"}, "name = '../up'", "letters, digits"),
    ({"run_name": "{optim.lr}-x"}, "run_name: {optim.lr} is neither swept nor set", "use one of"),
    ({"grid": {"optim.lr": 0.1}}, "grid.optim.lr = 0.1", "non-empty list"),
    ({"include": {"algo.clip_high": 0.28}}, "include = ", "list of mappings"),
    ({"include": [{"algo.clip_hihg": 0.28}]}, "include[0].algo.clip_hihg: unknown config key",
     "did you mean 'algo.clip_high'"),
    ({"include": [{"optim.lr": [1e-3, 1e-4]}]}, "include[0].optim.lr", "single value"),
    ({"include": [{"train.steps": 3}]}, "include[0].train.steps: also given in set.train.steps",
     "one place"),
    ({"zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "optim.lr": [1e-3, 1e-4]}],
      "include": [{"model.scale": "tiny-1m"}]}, "include[0]: names model.scale of zip[0] but not optim.lr",
     "all of a zip"),
    ({"grid": {"optim.lr": [1e-3]}, "include": [{"optim.lr": 1e-3}]}, "resolve to the same config",
     "run_id"),
    ({"include": [{"algo.clip_high": -1.0}]}, "algo.clip_high = -1.0", "must be"),
]


@pytest.mark.parametrize("patch,msg,hint", BAD, ids=[b[1][:40] for b in BAD])
def test_spec_errors_are_one_line_exit_2_and_write_nothing(tmp_path, cache_dir, capsys, patch, msg, hint):
    spec = tiny_spec(tmp_path, cache_dir)
    for k, v in patch.items():
        if k == "set":
            spec["set"] = {**spec["set"], **v}
        else:
            spec[k] = v
    path = write_spec(tmp_path, drop_swept(spec))
    rc = main(["sweep", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "\n" not in err, err
    assert msg in err and hint in err, err
    assert not (tmp_path / "results").exists()


def test_override_of_a_swept_key_is_refused(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    assert main(["sweep", str(path), "run.seed=3", "--dry-run"]) == 2
    assert "run.seed is swept by seeds" in capsys.readouterr().err


def test_not_yaml_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["sweep", str(bad), "--dry-run"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# Expansion
# ------------------------------------------------------------------------------------------------
def test_expansion_counts_zip_exclude_order_and_resources(tmp_path, cache_dir):
    spec = parse_spec(drop_swept(tiny_spec(
        tmp_path, cache_dir,
        grid={"optim.lr": [1e-3, 3e-4], "algo.clip_high": [0.2, 0.28, 0.3]},
        zip=[{"label.size": ["s", "m"], "model.scale": ["tiny-0.3m", "tiny-1m"],
              "slurm.time_min": [10, 20]}],
        seeds=2, exclude=[{"label.size": "m", "run.seed": 1}, {"optim.lr": "3e-4", "algo.clip_high": 0.3}],
        run_name="{label.size}-lr{optim.lr}-s{run.seed}", slurm={"partition": "p", "cpus_per_task": 2})))
    runs = expand(spec)
    # 2 x 3 x 2 x 2 = 24; rule 0 drops 6 (size m, seed 1); rule 1 drops 4 (lr 3e-4, clip 0.3), one shared
    assert len(runs) == 24 - 6 - 4 + 1
    assert [r.index for r in runs] == list(range(len(runs)))
    for r in runs:
        assert r.cfg.run.sweep == "t"
        assert r.cfg.run_dir() == tmp_path / "results" / "t" / r.run_id
        # zip: the scale and its resources move together with the label
        big = r.point["label.size"] == "m"
        assert r.cfg.model.scale == ("tiny-1m" if big else "tiny-0.3m")
        assert r.resources["time_min"] == (20 if big else 10)
        assert r.resources["partition"] == "p" and r.resources["cpus_per_task"] == 2
        assert not (big and r.cfg.run.seed == 1)
        assert not (r.cfg.optim.lr == 3e-4 and r.cfg.algo.clip_high == 0.3)
        assert r.cfg.run.name == f"{r.point['label.size']}-lr{r.point['optim.lr']}-s{r.cfg.run.seed}"
    # the last axis (seeds) varies fastest
    assert [r.cfg.run.seed for r in runs[:2]] == [0, 1]


def test_include_adds_ablation_points_crossed_with_the_axes_they_skip(tmp_path, cache_dir):
    """A preset grid plus two single-choice ablations of GRPO, each crossed with scale and seeds."""
    spec = parse_spec(drop_swept(tiny_spec(
        tmp_path, cache_dir, grid={"algo.preset": ["grpo", "dr_grpo"],
                                   "model.scale": ["tiny-0.3m", "tiny-1m"]}, seeds=[0, 1],
        include=[{"algo.preset": "grpo", "algo.clip_high": 0.28},
                 {"algo.group_filter": "zero_variance", "algo.preset": "grpo"}],
        exclude=[{"model.scale": "tiny-1m", "algo.clip_high": 0.28, "run.seed": 1}])))
    runs = expand(spec)
    assert len(runs) == 2 * 2 * 2 + 2 * 2 * 2 - 1
    assert spec.swept_keys == ["algo.preset", "model.scale", "run.seed", "algo.clip_high",
                               "algo.group_filter"]
    extra = runs[8:]
    assert [(r.point["model.scale"], r.cfg.run.seed) for r in extra[:3]] == [
        ("tiny-0.3m", 0), ("tiny-0.3m", 1), ("tiny-1m", 0)]
    assert all(r.cfg.algo.preset == "grpo" for r in extra)
    assert [r.cfg.algo.deviates_from_preset for r in extra] == [["clip_high"]] * 3 + [["group_filter"]] * 4
    assert extra[0].cfg.algo.clip_high == 0.28 and extra[0].cfg.algo.clip_low == 0.2
    assert list(extra[3].point) == ["algo.preset", "algo.group_filter", "model.scale", "run.seed"]
    # the grid's own runs keep the preset's values
    assert all(r.cfg.algo.deviates_from_preset == [] for r in runs[:8])


def test_expansion_is_deterministic_and_matches_rlablate_train(tmp_path, cache_dir):
    raw = drop_swept(tiny_spec(tmp_path, cache_dir, grid={"model.scale": ["tiny-0.3m", "tiny-1m"]},
                               seeds=[3, 4]))
    a = [r.run_id for r in expand(parse_spec(raw))]
    b = [r.run_id for r in expand(parse_spec(json.loads(json.dumps(raw))))]
    assert a == b and len(set(a)) == 4
    # the run a sweep names is the run `rlablate train` with the same keys names
    r = expand(parse_spec(raw))[3]
    over = [f"{k}={v}" for k, v in raw["set"].items()] + ["model.scale=tiny-1m", "run.seed=4", "run.sweep=t"]
    assert load_config(None, over).run_id() == r.run_id
    # the memoizing shim is gone after expansion
    assert config_mod.load_preset.__module__ == "harness.config.load"
    assert config_mod.load.typing.__name__ == "typing" and config_mod.load.typing is __import__("typing")


def test_thousand_runs_expand_in_well_under_two_seconds(tmp_path, cache_dir):
    raw = drop_swept(tiny_spec(
        tmp_path, cache_dir, grid={"optim.lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
                                   "algo.clip_high": [0.2, 0.24, 0.28, 0.32]},
        zip=[{"model.scale": ["tiny-0.3m", "tiny-1m"], "slurm.time_min": [30, 60]}], seeds=25))
    expand(parse_spec(raw))  # imports
    t = time.perf_counter()
    runs = expand(parse_spec(raw))
    dt = time.perf_counter() - t
    assert len(runs) == 1000 and len({r.run_id for r in runs}) == 1000
    assert dt < 2.0, f"{dt:.2f} s"


def test_shipped_specs_dry_run(capsys):
    assert main(["sweep", str(ROOT / "sweeps" / "demo.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # every preset x 2 scales x 2 seeds, less GRPO and Dr. GRPO at tiny-1m (2 x 2), which run in the
    # long tier with the two GRPO ablations (4 x 2)
    assert f"{len(list_presets()) * 2 * 2 - 4 + 8} runs in 1 resource group" in out.splitlines()[-1]
    demo = load_spec(ROOT / "sweeps" / "demo.yaml")
    runs = expand(demo)
    assert {r.cfg.algo.preset for r in runs} == set(list_presets()), \
        "sweeps/demo.yaml must cover every preset in harness/presets"
    assert {r.cfg.model.scale for r in runs} == {"tiny-0.3m", "tiny-1m"} and demo.executor == "local"
    assert sorted({r.cfg.run_name().split("-tiny")[0] for r in runs if r.cfg.algo.deviates_from_preset}) \
        == ["grpo+clip_high=0.28", "grpo+group_filter=zero_variance"]
    long = [r for r in runs if r.cfg.train.steps in (240, 480)]
    assert len(long) == 8 and {r.cfg.model.scale for r in long} == {"tiny-1m"}
    assert sorted(r.cfg.run_name().split("-tiny")[0] for r in long if r.cfg.train.steps == 480) == \
        ["grpo", "grpo", "grpo+group_filter=zero_variance", "grpo+group_filter=zero_variance"]
    assert {r.cfg.train.steps for r in runs if r not in long} == {40, 60}
    assert main(["sweep", str(ROOT / "sweeps" / "demo-quick.yaml"), "--dry-run"]) == 0
    assert "6 runs in 1 resource group" in capsys.readouterr().out
    assert main(["sweep", str(ROOT / "sweeps" / "scalerl_loss.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "36 runs in 4 resource groups" in out and "(dry run: nothing written)" in out
    runs = expand(load_spec(ROOT / "sweeps" / "scalerl_loss.yaml"))
    assert all(r.cfg.model.scale == "pretrained" and r.resources["gpus_per_node"] == 1 for r in runs)
    assert len({r.cfg.model.path for r in runs}) == 4 and len({r.point["label.loss"] for r in runs}) == 3
    assert not (ROOT / "results" / "scalerl_loss").exists()


def test_only_selects_a_subset_strictly(capsys):
    demo = str(ROOT / "sweeps" / "demo.yaml")
    assert main(["sweep", demo, "--dry-run", "--only", "algo.preset=grpo,dapo", "--only", "run.seed=1"]) == 0
    out = capsys.readouterr().out
    n = len(list_presets()) * 4 - 4 + 8  # see test_shipped_specs_dry_run
    assert f"{n} runs in 1 resource group; local executor would submit 6, skip {n - 6}" in out
    submit = [line.split()[2:6] for line in out.splitlines()[1:-1] if line.endswith("submit")]
    assert sorted(submit) == sorted([["dapo", "tiny-0.3m", "40", "10"], ["dapo", "tiny-1m", "60", "15"],
                                     ["grpo", "tiny-0.3m", "40", "10"], ["grpo", "tiny-1m", "240", "30"]]
                                    + [["grpo", "tiny-1m", "480", "30"]] * 2)
    for bad, msg in [("algo.preset=grpp", "no run has algo.preset = grpp"),
                     ("optim.lr=1", "optim.lr is not swept"), ("algo.preset", "expected KEY=VALUE")]:
        assert main(["sweep", demo, "--dry-run", "--only", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err, err


# ------------------------------------------------------------------------------------------------
# Launch (real submitit jobs on this machine)
# ------------------------------------------------------------------------------------------------
def _checksums(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


def _steps(run_dir: Path, kind: str) -> list[int]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if r["kind"] == kind]


def wait_for_step(rdir: Path, step: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not ((rdir / "metrics.jsonl").exists() and max(_steps(rdir, "train") or [0]) >= step):
        assert time.time() < deadline, f"{rdir.name} did not reach step {step} in {timeout} s"
        time.sleep(0.3)


def test_local_executor_two_runs_then_rerun_is_a_no_op(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    assert main(["sweep", str(path), "--executor", "local", "--parallel", "2", "--progress"]) == 0
    cap = capsys.readouterr()
    out = cap.out
    assert "submitting 2, skipping 0" in out and "2 of 2 submitted runs finished" in out
    assert out.count("finished  ") == 2  # each run's outcome, written above the bar
    # one bar over both runs' 4 steps, ending with every run done
    assert "2 runs: 100%" in cap.err and "8/8" in cap.err and "2/2 done" in cap.err, cap.err
    sdir = tmp_path / "results" / "t"
    runs = expand(load_spec(path))
    sums = {}
    for r in runs:
        s = json.loads((sdir / r.run_id / "summary.json").read_text())
        assert s["status"] == "finished" and s["step"] == 4
        assert _steps(sdir / r.run_id, "train") == [1, 2, 3, 4]
        sums[r.run_id] = _checksums(sdir / r.run_id)
    rec = json.loads((sdir / "sweep.json").read_text())
    assert rec["git"]["commit"] and rec["versions"]["torch"] and rec["versions"]["submitit"]
    assert rec["spec"]["name"] == "t" and len(rec["runs"]) == 2 and len(rec["launches"]) == 1
    assert (sdir / "spec.yaml").exists() and list((sdir / "_submitit").glob("*/*_log.out"))
    # status: counts and per-run rows
    assert main(["status", str(sdir)]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 0 pending, 0 running, 0 failed, 2 finished, 0 diverged" in out
    assert all(r.run_id in out for r in runs) and "4/4" in out
    # re-run: nothing submitted, finished results untouched
    jobs_before = (sdir / "jobs.jsonl").read_text()
    assert main(["sweep", str(path), "--executor", "local"]) == 0
    assert "submitting 0, skipping 2 (2 finished)" in capsys.readouterr().out
    assert (sdir / "jobs.jsonl").read_text() == jobs_before
    for r in runs:
        assert _checksums(sdir / r.run_id) == sums[r.run_id]
    assert len(json.loads((sdir / "sweep.json").read_text())["launches"]) == 2


def test_killed_run_is_resubmitted_and_resumes(tmp_path, cache_dir, capsys):
    """SIGKILL a local job mid-run: its run is 'incomplete', the next launch resubmits it only, and
    it resumes from its checkpoint with every metric row exactly once."""
    raw = tiny_spec(tmp_path, cache_dir, seeds=[0])
    raw["set"].update({"train.steps": 20, "eval.every": 10, "rollout.max_new_tokens": 12})
    path = write_spec(tmp_path, raw)
    spec = load_spec(path)
    (run,) = expand(spec)
    sdir, rdir = tmp_path / "results" / "t", tmp_path / "results" / "t" / run.run_id
    done = threading.Event()
    th = threading.Thread(target=lambda: (launch(spec, [run], "local", out=lambda s: None), done.set()))
    th.start()
    wait_for_step(rdir, 5)
    pid = json.loads((sdir / "attempts.jsonl").read_text().splitlines()[-1])["pid"]
    os.kill(pid, signal.SIGKILL)  # the job's own process, which this test started
    th.join(timeout=60)
    assert done.is_set()
    st = run_states(sdir, [run.run_id])[run.run_id]
    assert st.state == "incomplete" and not lock_held(rdir)
    assert main(["sweep", str(path), "--executor", "local"]) == 0
    assert "submitting 1, skipping 0" in capsys.readouterr().out
    attempts = [json.loads(x) for x in (sdir / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 2 and attempts[1]["resume_from_step"] >= 2
    assert json.loads((rdir / "summary.json").read_text())["status"] == "finished"
    assert _steps(rdir, "train") == list(range(1, 21))
    assert _steps(rdir, "eval") == [0, 10, 20]


def test_a_running_run_is_never_submitted_twice(tmp_path, cache_dir, capsys):
    """A held run lock (train() holds it while running) makes the run 'running': skipped."""
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    runs = expand(load_spec(path))
    rdir = runs[0].cfg.run_dir()
    rdir.mkdir(parents=True)
    with open(rdir / ".lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        states, todo, skipped = plan(runs)
        assert states[runs[0].run_id].state == "running" and skipped == {runs[0].run_id: "running"}
        assert [r.run_id for r in todo] == [runs[1].run_id]
    assert not lock_held(rdir)


def test_debug_executor_runs_in_process_and_status_reads_a_spec(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=[7], executor="debug"))
    assert main(["sweep", str(path)]) == 0
    assert "1 of 1 submitted runs finished" in capsys.readouterr().out
    sdir = tmp_path / "results" / "t"
    (run,) = expand(load_spec(path))
    text, counts = status_report(sdir, runs_of_dir(sdir))
    assert counts["finished"] == 1 and run.run_id in text
    assert main(["status", str(path)]) == 0 and "1 finished" in capsys.readouterr().out


def test_local_executor_starts_the_longest_runs_first():
    """The demo's long tier (480 and 240 steps) is listed last in the spec but must start first,
    so the two cores do not end on it; equal lengths keep the spec's order."""
    from harness.launch import start_order
    runs = expand(load_spec(ROOT / "sweeps" / "demo.yaml"))
    order = start_order(runs)
    steps = [r.cfg.train.steps for r in order]
    assert steps == sorted(steps, reverse=True) and steps[:8] == [480] * 4 + [240] * 4
    assert steps[-1] == 40
    same = [r.index for r in order if r.cfg.train.steps == 60]
    assert same == sorted(same) and len(same) == 20
