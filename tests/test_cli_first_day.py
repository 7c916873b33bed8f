"""What a first day trips over (issue 20): each bad input is one line on stderr, exit 2, and leaves
no run directory or analysis folder behind; `--help` and `config` start without torch, scipy or
pandas; the run lock says who holds it; parallel local runs divide the cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY
from harness.config import ConfigError, check_environment, load_config
from harness.storage import file_lock

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def one_line_exit_2(r: subprocess.CompletedProcess, *needles: str) -> str:
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("usage:")]
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "Traceback" not in r.stderr
    return lines[0]


def nothing_written(cwd: Path) -> None:
    left = sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*")
                  if not p.name.endswith(".yaml") and p.name != "file")
    assert left == [], left


# ---------------------------------------------------------------------------------- train/config
@pytest.mark.parametrize("args,needles", [
    (["train", "optim.lr", "=", "3e-4"], ["'optim.lr = 3e-4'", "without spaces", "optim.lr=3e-4"]),
    (["train", "optim.lr=", "3e-4"], ["optim.lr=3e-4"]),
    (["config", "optim.lr", "=3e-4"], ["optim.lr=3e-4"]),
    (["train", "--steps", "10"], ["'--steps'", "key=value", "train.steps=10"]),
    (["train", "--train.steps=10"], ["train.steps=10"]),
    (["config", "--lr", "3e-4"], ["optim.lr=3e-4", "(or warmup.lr)"]),
    (["train", "run.device=cuda"] if not __import__("torch").cuda.is_available() else
     ["train", "model.path=/x"], ["run.device = 'cuda': no CUDA device on this machine"]
     if not __import__("torch").cuda.is_available() else ["model.path"]),
    (["train", "model.scale=pretrained", "model.path=/no/such/model"],
     ["model.path = '/no/such/model': no such directory"]),
    (["train", "task.name=math", "task.train_path=/no/train.jsonl", "task.in_dist_path=/no/a.jsonl",
      "task.held_out_path=/no/b.jsonl"], ["task.train_path = '/no/train.jsonl': no such file"]),
    (["train", "task.name=math", *(f"task.{k}_path={ROOT / 'harness' / 'data' / f}" for k, f in (
        ("train", "gsm8k_sample_train.jsonl"), ("in_dist", "gsm8k_sample_test.jsonl"),
        ("held_out", "math_sample_test.jsonl"))), "task.held_out_paths.far=/no/far.jsonl",
      "eval.held_out_sets=[far]"], ["task.held_out_paths.far = '/no/far.jsonl': no such file"]),
    (["train", "run.results_dir="], ["run.results_dir = '': must name a directory"]),
    (["train", "algo.clip_low=1.5"], ["algo.clip_low = 1.5: must be >= 0 and <= 1"]),
])
def test_bad_train_input_is_one_line_and_writes_nothing(tmp_path, args, needles):
    one_line_exit_2(cli(*args, cwd=tmp_path), *needles)
    nothing_written(tmp_path)


@pytest.mark.parametrize("args,key", [
    (["config", "train.steps=3", "train.steps=4"], "train.steps"),
    (["sweep", str(ROOT / "sweeps" / "demo.yaml"), "--dry-run", "optim.lr=1e-4", "optim.lr=2e-4"],
     "optim.lr"),
])
def test_a_key_typed_twice_gets_a_note_and_the_last_wins(tmp_path, args, key):
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first, second = args[-2:]
    assert f"rlablate: note: {key} is given twice ({first!r}, then {second!r}); the last one " \
           f"wins" in r.stderr.splitlines()
    if args[0] == "config":
        assert "  steps: 4\n" in r.stdout


def test_yaml_kind_mixups_name_the_right_command(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\ngrid:\n  optim.lr: [1e-4, 3e-4]\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("train:\n  steps: 3\n")
    dotted = tmp_path / "dotted.yaml"
    dotted.write_text("train:\n  steps: 3\noptim.lr: 3e-4\n")
    one_line_exit_2(cli("train", str(spec), cwd=tmp_path), "this is a sweep spec (keys name, grid)",
                    f"`rlablate sweep {spec}`")
    for cmd in (["sweep", str(cfg), "--dry-run"], ["status", str(cfg)]):
        one_line_exit_2(cli(*cmd, cwd=tmp_path), "this is a run config (keys train), not a sweep "
                        "spec", "`rlablate train`")
    one_line_exit_2(cli("config", str(dotted), cwd=tmp_path), "key 'optim.lr': a dotted key is "
                    "command-line syntax", "'optim:' then '  lr: ...'")
    nothing_written(tmp_path)


def test_a_local_sweep_checks_the_files_of_its_runs_before_writing(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: s\nset:\n  run.results_dir: {tmp_path / 'r'}\n  model.scale: pretrained\n"
                    "  model.path: /no/such/model\n  warmup.max_steps: 0\n"
                    "  warmup.target_pass_rate: 0.0\ngrid:\n  optim.lr: [1e-4, 3e-4]\n")
    line = one_line_exit_2(cli("sweep", str(spec), "--executor", "local", cwd=tmp_path),
                           "rlablate: spec error: run ", "model.path = '/no/such/model': no such "
                           "directory")
    assert "pretrained" in line
    assert not (tmp_path / "r").exists()
    r = cli("sweep", str(spec), "--dry-run", cwd=tmp_path)  # a dry run checks no machine
    assert r.returncode == 0, r.stderr


def test_environment_check_is_not_the_loaders():
    """`rlablate config` and a SLURM sweep's expansion run on login nodes: the loader accepts a
    config for a device or files this machine lacks; check_environment refuses it."""
    cfg = load_config(None, ["run.device=cuda"])
    with pytest.raises(ConfigError, match="^run.device = 'cuda': no CUDA device on this machine"):
        check_environment(cfg, cuda=False)
    check_environment(cfg, cuda=True)
    # vLLM has a CPU build (issue 19): the engine needs no CUDA device, so the check accepts it
    # (the engine itself refuses a build whose platform differs from the trainer's device)
    vllm = load_config(None, ["run.device=auto", "rollout.engine=vllm"])
    check_environment(vllm, cuda=False)
    hub = load_config(None, ["model.scale=pretrained", "model.path=Qwen/Qwen2.5-0.5B"])
    check_environment(hub, cuda=False)  # a hub id is not a local path: the hub may be reachable


def test_a_second_train_of_the_same_run_says_another_process_holds_it(tmp_path):
    over = TINY + [f"run.results_dir={tmp_path / 'r'}", f"run.cache_dir={tmp_path / 'c'}"]
    run_dir = load_config(None, over).run_dir()
    with file_lock(run_dir / ".lock"):
        p = subprocess.Popen([sys.executable, "-m", "harness.cli", "train", *over, "--quiet"],
                             cwd=tmp_path, env=ENV, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stderr.readline()
        finally:
            p.kill()  # the process this test started, by its handle
            p.wait()
    assert line.startswith("rlablate: another process is running this run (")
    assert str(run_dir) in line and "waiting" in line


# ---------------------------------------------------------------------------------- start-up
@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["config", "train.steps=3"],
                                  ["analyze", "--help"], ["status", "--help"]])
def test_help_and_config_import_no_heavy_library(tmp_path, args):
    code = ("import sys, runpy; sys.argv = ['rlablate', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('harness.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'scipy', 'pandas', 'submitit', 'transformers') "
            "if m in sys.modules]\nprint('HEAVY', heavy, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in r.stderr, r.stderr[-500:]


def test_the_analyze_parser_constants_match_the_modules():
    from analysis import bootstrap, cli, compare
    assert cli.METHODS == bootstrap.METHODS
    assert cli.DEFAULT_MARGIN == compare.DEFAULT_MARGIN


def test_wall_time_is_printed_at_the_end_of_train(tmp_path):
    over = [o for o in TINY if not o.startswith("train.steps=")] + [
        "train.steps=0", f"run.results_dir={tmp_path / 'r'}",
                   f"run.cache_dir={tmp_path / 'c'}"]
    r = cli("train", *over, "--quiet", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("rlablate train: ") and last.endswith(" s wall")
    assert 0 < float(last.split()[2]) < 300


# ---------------------------------------------------------------------------------- sweeps
def test_parallel_local_runs_divide_the_cores_when_threads_is_unset(tmp_path):
    from harness.sweep.executors import Submission
    from harness.sweep.expand import expand
    from harness.sweep.spec import parse_spec
    spec = parse_spec({"name": "t", "set": {"run.results_dir": str(tmp_path)},
                       "grid": {"optim.lr": [1e-4, 3e-4]}})
    runs = expand(spec)
    cores = os.cpu_count() or 1
    for executor, parallel, want in [("local", 2, max(1, cores // 2)), ("local", 1, 0),
                                     ("local", 64, 1), ("slurm", 2, 0)]:
        sub = Submission(executor, tmp_path, "t", print, parallel=parallel)
        got = sub.run_config(runs[0])
        assert got["run"]["threads"] == want, (executor, parallel)
        assert got["run"]["threads"] == want
    fixed = parse_spec({"name": "t", "set": {"run.results_dir": str(tmp_path), "run.threads": 1},
                        "grid": {"optim.lr": [1e-4, 3e-4]}})
    r = expand(fixed)[0]
    assert Submission("local", tmp_path, "t", print, parallel=2).run_config(r)["run"]["threads"] == 1
    # the run id does not change: run.threads is not part of it
    from harness.config import config_from_dict
    assert config_from_dict(Submission("local", tmp_path, "t", print, parallel=2)
                            .run_config(runs[0])).run_id() == runs[0].run_id


def test_status_of_a_spec_without_the_launch_overrides_says_so(tmp_path):
    from harness.sweep.cli import other_runs_note
    sdir = tmp_path / "sw"
    (sdir / "old-run").mkdir(parents=True)
    (sdir / "old-run" / "config.yaml").write_text("{}\n")
    (sdir / "sweep.json").write_text(json.dumps({"runs": [{"run_id": "launched-1"}]}))
    note = other_runs_note(sdir, ["expanded-1"], "s.yaml")
    assert note.startswith(f"note: {sdir} holds 2 run(s) that this spec")
    assert "`rlablate status s.yaml` the launch's overrides" in note
    assert other_runs_note(sdir, ["launched-1", "old-run"], "s.yaml") is None
    assert other_runs_note(tmp_path / "none", ["x"], "s.yaml") is None


# ---------------------------------------------------------------------------------- analyze
@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    from analysis.synth import write_demo_sweep
    root = tmp_path_factory.mktemp("an") / "sw"
    write_demo_sweep(root, algos={"grpo": (0.6, 1.4, 0.4), "dapo": (0.66, 1.8, 0.41)},
                     scales=("0.5B",), seeds=(0, 1), n_items=40, steps=60, eval_every=20)
    return root


@pytest.mark.parametrize("extra,needles", [
    (["--eval-set", "heldout"], ["--eval-set 'heldout': the runs have eval sets held_out, in_dist "
                                 "(did you mean 'held_out'?)"]),
    (["--eval-set", "IN_DIST"], ["(did you mean 'in_dist'?)"]),
    (["--bootstrap", "-5"], ["--bootstrap = -5: must be >= 0"]),
    (["--calibrate", "-1"], ["--calibrate = -1: must be >= 0"]),
    (["--reference", "nope"], ["--reference 'nope': not a variant of these runs; variants: dapo, "
                               "grpo"]),
    (["--by", "algo.presett"], ["unknown axis 'algo.presett' (did you mean 'algo.preset'?)",
                                "vary across these runs: algo.preset"]),
    (["--out", "FILE"], ["exists and is not a directory"]),
    (["--out", "NEW/deep/er", "--by", "nope"], ["unknown axis 'nope'"]),
])
def test_bad_analyze_option_is_one_line_and_writes_nothing(sweep, tmp_path, extra, needles):
    (tmp_path / "file").write_text("x")
    extra = [str(tmp_path / "file") if e == "FILE" else str(tmp_path / e) if e.startswith("NEW")
             else e for e in extra]
    line = one_line_exit_2(cli("analyze", str(sweep), "--calibrate", "0", *extra, cwd=tmp_path),
                           *needles)
    assert len(line) < 300
    assert not (sweep / "analysis").exists()
    assert not (tmp_path / "NEW").exists()


def test_analyze_of_a_file_or_spec_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    one_line_exit_2(cli("analyze", str(tmp_path / "file"), cwd=tmp_path), "not a directory")
    one_line_exit_2(cli("analyze", str(ROOT / "sweeps" / "demo.yaml"), cwd=tmp_path),
                    "a sweep spec: analyze its results directory")
    one_line_exit_2(cli("analyze", str(tmp_path / "nope"), cwd=tmp_path), "no such directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
