"""Fault injection, bad input: a corpus of malformed configs and sweep specs. Each is one line
naming the key and what is allowed, exit code 2, and the results root is byte-for-byte unchanged
(no run or sweep directory created). Results dirs with garbage metrics lines: analysis reports
every bad line and skips it, and its fits are those of the clean data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from faultlib import checksums, tree
from harness.cli import main

pytestmark = pytest.mark.faults

# (id, YAML text of a config file given to `rlablate train FILE`, substrings of the one line)
CONFIGS = [
    ("unknown-key", "optim:\n  lrr: 1e-3\n", ["unknown key 'optim.lrr'", "allowed under optim: lr", "did you mean 'optim.lr'"]),
    ("typo-section", "optimm:\n  lr: 1e-3\n", ["unknown key 'optimm'", "did you mean 'optim'"]),
    ("typo-nested", "eval:\n  in_dist:\n    n_itemz: 3\n", ["unknown key 'eval.in_dist.n_itemz'", "n_items"]),
    ("wrong-type-int", "train:\n  steps: ten\n", ["train.steps = 'ten'", "expected a int"]),
    ("wrong-type-float-int", "train:\n  steps: 1.5\n", ["train.steps = 1.5", "expected an integer"]),
    ("wrong-type-bool", "task:\n  cot: 3\n", ["task.cot = 3", "expected true or false"]),
    ("wrong-type-section", "optim: 3\n", ["optim = 3", "expected a mapping"]),
    ("wrong-type-str", "algo:\n  preset: 7\n", ["algo.preset = 7", "expected a string"]),
    ("out-of-range-lr", "optim:\n  lr: -1\n", ["optim.lr = -1.0", "must be > 0"]),
    ("out-of-range-top-p", "rollout:\n  top_p: 1.5\n", ["rollout.top_p = 1.5", "must be > 0 and <= 1"]),
    ("out-of-range-rate", "warmup:\n  target_pass_rate: 2\n", ["warmup.target_pass_rate = 2.0", "<= 1"]),
    ("nan", "optim:\n  lr: .nan\n", ["optim.lr = nan", "expected a finite number"]),
    ("huge-int", "train:\n  steps: 1e400\n", ["train.steps", "expected"]),
    ("bad-choice", "model:\n  scale: tiny-2m\n", ["model.scale = 'tiny-2m'", "allowed values are tiny-0.3m, tiny-1m, tiny-4m, tiny-moe, pretrained"]),
    ("registry-typo", "algo:\n  advantage: group_nrm\n", ["algo.advantage = 'group_nrm'", "did you mean 'group_norm'"]),
    ("import-by-string", "algo:\n  advantage: os.system\n", ["algo.advantage = 'os.system'", "allowed values are"]),
    ("derived-key", "algo:\n  deviates_from_preset: []\n", ["algo.deviates_from_preset", "derived"]),
    ("yaml-syntax", "optim: {lr: [1, 2}\n", ["not valid YAML (line 1)"]),
    ("yaml-tabs", "optim:\n\tlr: 1\n", ["not valid YAML (line 2)"]),
    ("python-object", "!!python/object/apply:os.system ['touch PWNED']\n", ["not valid YAML", "python/object/apply:os.system"]),
    ("python-name", "optim:\n  lr: !!python/name:os.system\n", ["not valid YAML", "python/name:os.system"]),
    ("duplicate-key", "optim:\n  lr: 1e-3\n  lr: 2e-3\n", ["not valid YAML (line 3)", "key 'lr' is given twice"]),
    ("empty", "", ["the file is empty"]),
    ("only-comments", "# nothing here\n", ["the file is empty"]),
    ("top-level-list", "- a\n- b\n", ["expected a mapping of config keys, got list"]),
    ("top-level-scalar", "42\n", ["expected a mapping of config keys, got int"]),
    ("run-name-dotdot", "run:\n  name: ../../etc/x\n", ["run.name = '../../etc/x'", "letters, digits"]),
    ("run-name-absolute", "run:\n  name: /tmp/x\n", ["run.name = '/tmp/x'", "under run.results_dir"]),
    ("run-sweep-dotdot", "run:\n  sweep: ../up\n", ["run.sweep = '../up'", "letters, digits"]),
]
BINARY = b"\x89PNG\r\n\x1a\n\x00\xff\xfe garbage"

# (id, spec mapping or raw text, substrings); `set` gets the results root
SPECS = [
    ("spec-unknown-key", {"seed": [0, 1]}, ["unknown key 'seed'", "did you mean 'seeds'"]),
    ("spec-grid-typo", {"grid": {"optim.lrr": [1e-3]}}, ["grid.optim.lrr: unknown config key", "did you mean 'optim.lr'"]),
    ("spec-grid-wrong-type", {"grid": {"optim.lr": ["abc"]}}, ["run 0 (optim.lr=abc)", "optim.lr = 'abc'", "expected a float"]),
    ("spec-grid-not-list", {"grid": {"optim.lr": 0.1}}, ["grid.optim.lr = 0.1", "non-empty list"]),
    ("spec-out-of-range", {"grid": {"optim.lr": [1e-3, -1.0]}}, ["run 1 (optim.lr=-1.0)", "must be > 0"]),
    ("spec-invalid-combo", {"set": {"algo.kl": "k3"}}, ["algo.kl_coef = 0.0", "needs a coefficient"]),
    ("spec-seeds", {"seeds": -1}, ["seeds = -1", "a list of integers >= 0"]),
    ("spec-zip-lengths", {"zip": [{"optim.lr": [1e-3, 2e-3], "algo.clip_high": [0.2]}]}, ["zip[0]", "equal lengths"]),
    ("spec-executor", {"executor": "slrum"}, ["executor = 'slrum'", "did you mean 'slurm'"]),
    ("spec-resource", {"slurm": {"gpu_per_node": 1}}, ["slurm.gpu_per_node: unknown key", "did you mean 'gpus_per_node'"]),
    ("spec-name-dotdot", {"name": "../up"}, ["name = '../up'", "letters, digits"]),
    ("spec-run-name-dotdot", {"run_name": "../{run.seed}", "seeds": 1}, ["run 0 (run.seed=0)", "run.name = '../0'", "letters, digits"]),
    ("spec-huge-grid", {"grid": {k: list(range(1, 21)) for k in ("train.steps", "eval.every", "run.threads", "algo.epochs", "warmup.seed")}},
     ["the grid has 3,200,000 points", "over max_runs = 10,000"]),
    ("spec-base-missing", {"base": "nope.yaml"}, ["base = 'nope.yaml'", "cannot read"]),
    ("spec-base-python-tag", {"base": "evil.yaml"}, ["base = 'evil.yaml'", "not valid YAML"]),
    ("spec-python-tag", "name: t\ngrid: !!python/object/apply:os.system ['touch PWNED']\n", ["not valid YAML", "python/object/apply"]),
    ("spec-yaml-syntax", "name: [unclosed\n", ["not valid YAML"]),
    ("spec-duplicate-key", "name: a\nname: b\n", ["not valid YAML (line 2)", "key 'name' is given twice"]),
    ("spec-empty", "", ["the file is empty"]),
]


@pytest.fixture
def results(tmp_path) -> Path:
    """A results root that already holds a run: it must come out byte-for-byte the same."""
    root = tmp_path / "results"
    (root / "old" / "run-1").mkdir(parents=True)
    (root / "old" / "run-1" / "metrics.jsonl").write_text('{"kind": "eval", "step": 0}\n')
    return root


def check_refused(rc: int, err: str, expected: list[str], root: Path, before: dict, cwd: Path) -> None:
    assert rc == 2, err
    assert err.strip().count("\n") == 0, err                      # one line
    for s in expected:
        assert s in err, (s, err)
    assert checksums(root) == before and tree(root) == ["old", "old/run-1", "old/run-1/metrics.jsonl"]
    assert not (cwd / "PWNED").exists()


@pytest.mark.parametrize("name,text,expected", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_bad_config_file(tmp_path, results, capsys, monkeypatch, name, text, expected):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "c.yaml"
    p.write_text(text)
    before = checksums(results)
    rc = main(["train", str(p), f"run.results_dir={results}", "--quiet"])
    check_refused(rc, capsys.readouterr().err, ["rlablate: config error: "] + expected, results,
                  before, tmp_path)


@pytest.mark.parametrize("args,expected", [
    (["optim..lr=3"], "is not a dotted key like optim.lr"),
    (["train.steps=3", "optim.lr"], "expected key=value"),
    (["preset=dapo", "algo.preset=grpo"], "set one of them"),
])
def test_bad_override(tmp_path, results, capsys, args, expected):
    before = checksums(results)
    rc = main(["train", *args, f"run.results_dir={results}", "--quiet"])
    check_refused(rc, capsys.readouterr().err, [expected], results, before, tmp_path)


def test_binary_config_file(tmp_path, results, capsys):
    p = tmp_path / "c.yaml"
    p.write_bytes(BINARY)
    before = checksums(results)
    rc = main(["train", str(p), f"run.results_dir={results}"])
    check_refused(rc, capsys.readouterr().err, ["not a text file (not UTF-8)"], results, before, tmp_path)


@pytest.mark.parametrize("name,spec,expected", SPECS, ids=[s[0] for s in SPECS])
def test_bad_sweep_spec(tmp_path, results, capsys, monkeypatch, name, spec, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.yaml").write_text("optim: !!python/object/apply:os.system ['touch PWNED']\n")
    p = tmp_path / "spec.yaml"
    if isinstance(spec, str):
        p.write_text(spec)
    else:
        raw = {"name": "t", "base": "grpo", "set": {"run.results_dir": str(results)}}
        for k, v in spec.items():
            raw[k] = {**raw["set"], **v} if k == "set" else v
        p.write_text(yaml.safe_dump(raw, sort_keys=False))
    before = checksums(results)
    for cmd in (["sweep", str(p)], ["sweep", str(p), "--dry-run"], ["status", str(p)]):
        rc = main(cmd)
        check_refused(rc, capsys.readouterr().err, ["rlablate: spec error: "] + expected, results,
                      before, tmp_path)


def test_corpus_size():
    """The issue asks for >= 30 malformed configs and specs."""
    assert len(CONFIGS) + 3 + 1 + len(SPECS) >= 50


# ------------------------------------------------------------------------------------------------
# Garbage in results dirs: analysis reports every bad line and skips it
# ------------------------------------------------------------------------------------------------
GARBAGE = [b"\x00\xff\xfe binary junk", b"[1, 2, 3]", b'{"kind": "eval", "step": "x"}',
           b"NaN", b'{"kind": "mystery", "step": 3}', b"", b'{"kind": "eval", "step": 40, "eval/in']


def test_garbage_metrics_lines_are_reported_and_skipped(tmp_path, capsys):
    from analysis.synth import write_demo_sweep
    clean = tmp_path / "clean" / "sw"
    write_demo_sweep(clean, algos={"grpo": (0.6, 1.5, 0.4), "dapo": (0.7, 1.5, 0.4)},
                     scales=("0.5B",), seeds=(0, 1), n_items=100, steps=120, eval_every=20)
    dirty = tmp_path / "dirty" / "sw"
    shutil.copytree(clean, dirty)
    victim = sorted(p for p in dirty.iterdir() if p.is_dir())[0] / "metrics.jsonl"
    good = victim.read_bytes().splitlines()
    mixed = good[:2] + GARBAGE[:3] + good[2:4] + GARBAGE[3:6] + good[4:] + GARBAGE[6:]
    victim.write_bytes(b"\n".join(mixed))  # the last garbage line has no newline: a torn write
    for d in (clean, dirty):
        assert main(["analyze", str(d), "--out", str(d / "an"), "--bootstrap", "50"]) == 0
    capsys.readouterr()
    report = (dirty / "an" / "report.md").read_text()
    # every garbage line is reported with its line number (blank lines are not garbage)
    from analysis.load import load_results
    want = [(3, "garbage_line"), (4, "garbage_line"), (5, "garbage_line"), (8, "garbage_line"),
            (9, "garbage_line"), (len(mixed), "truncated_line")]
    issues = sorted((i.line, i.kind) for i in load_results(dirty).issues if i.path == str(victim))
    assert issues == want
    assert "6 load issue(s)" in report
    for lineno, kind in want:
        assert f"{victim} | {lineno} |" in report, (lineno, report[-3000:])
    fits = [pd.read_csv(d / "an" / "fits.csv") for d in (clean, dirty)]
    num = fits[0].select_dtypes("number").columns
    pd.testing.assert_frame_equal(fits[0][num], fits[1][num])  # the garbage changed no fit
