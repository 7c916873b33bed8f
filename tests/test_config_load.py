"""harness/config/load.py: the strict loader. Unknown keys, wrong types and out-of-range values are
one line naming the key, the value and what is allowed (the `load` cases of config_cases.py); YAML
is plain data; overrides win over the file, the file over the preset; presets are data; the CLI
exits 2 and writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from config_cases import CASES
from harness.cli import main
from harness.config import (PRESET_DIR, AlgoCfg, ConfigError, config_from_dict, deep_merge,
                            dump_yaml, list_presets, load_config, load_preset, parse_overrides)
from test_config_rules import raising_module

ROOT = Path(__file__).resolve().parents[1]
LOAD = [c for c in CASES if c.room == "load"]


@pytest.mark.parametrize("case", LOAD, ids=[" ".join(c.overrides) for c in LOAD])
def test_bad_value_is_one_line_from_the_loader(case, capsys):
    with pytest.raises(ConfigError) as e:
        load_config(None, list(case.overrides))
    msg = str(e.value)
    assert case.message in msg and "\n" not in msg
    assert raising_module(e.value) == "harness.config.load"
    # the CLI: exit 2, the same line (a first key=value keeps a bare word from reading as a file)
    assert main(["config", "run.seed=0", *case.overrides]) == 2
    assert capsys.readouterr().err == f"rlablate: config error: {msg}\n"


@pytest.mark.parametrize("text,expected", [
    ("", "the file is empty"),
    ("# nothing\n", "the file is empty"),
    ("optim: [1, 2\n", "not valid YAML (line"),
    ("!!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
    ("optim:\n  lr: 1e-3\n  lr: 2e-3\n", "not valid YAML (line 3): key 'lr' is given twice"),
    ("- a\n- b\n", "expected a mapping of config keys, got list"),
    ("optim:\n  lr: -1\n", "optim.lr = -1.0: must be > 0"),
])
def test_bad_files(tmp_path, text, expected):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_yaml_scientific_notation_and_override_precedence(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("optim:\n  lr: 3e-4\ntrain:\n  steps: 7\nalgo:\n  preset: dapo\n  clip_high: 0.3\n")
    cfg = load_config(p, ["train.steps=9"])  # PyYAML reads 3e-4 as a string: it becomes a float
    assert cfg.optim.lr == pytest.approx(3e-4) and isinstance(cfg.optim.lr, float)
    assert cfg.train.steps == 9                                # override > file
    assert cfg.algo.clip_high == 0.3                           # file > preset
    assert cfg.algo.max_gen_rounds == load_preset("dapo")["max_gen_rounds"]  # preset > default


def test_parse_overrides_nests_and_types_and_deep_merge_keeps_both():
    assert parse_overrides(["a.b=1", "a.c=x", "d=true", "e="]) == {"a": {"b": 1, "c": "x"}, "d": True,
                                                                   "e": ""}
    a, b = {"x": {"y": 1, "z": 2}}, {"x": {"z": 3}, "w": 4}
    assert deep_merge(a, b) == {"x": {"y": 1, "z": 3}, "w": 4} and a == {"x": {"y": 1, "z": 2}}


def test_resolved_config_round_trips_with_the_same_run_id():
    cfg = load_config(None, ["run.seed=3", "optim.lr=2e-4", "algo.preset=dapo"])
    again = config_from_dict(yaml.safe_load(dump_yaml(cfg)))
    assert again.to_dict() == cfg.to_dict() and again.run_id() == cfg.run_id()


def test_presets_are_data_and_deviations_are_recorded():
    assert {"grpo", "dapo", "ppo", "vapo"} <= set(list_presets())
    algo_keys = {f.name for f in AlgoCfg.__dataclass_fields__.values()}
    for name in list_presets():
        assert set(load_preset(name)) <= algo_keys, name
        split = ["offline.n_prompts=8"] if load_preset(name).get("paradigm") == "offline" else []
        assert load_config(None, [f"algo.preset={name}", *split]).algo.deviates_from_preset == []
    assert sorted(p.stem for p in PRESET_DIR.glob("*.yaml")) == list_presets()
    cfg = load_config(None, ["algo.advantage=group_mean", "algo.clip_high=0.2"])
    # clip_high=0.2 is the preset's own value: not a deviation; the advantage is
    assert cfg.algo.deviates_from_preset == ["advantage"]
    assert "deviates_from_preset:\n  - advantage" in dump_yaml(cfg)
    assert load_config(None, ["preset=dapo"]).algo.clip_high == pytest.approx(0.28)
    assert load_config(None, ["algo.preset=none"]).algo.preset == "none"


def test_every_shipped_config_loads():
    for p in sorted((ROOT / "configs").glob("*.yaml")):
        load_config(p)


def test_cli_bad_config_exits_2_one_line_and_writes_nothing(tmp_path):
    res = tmp_path / "results"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "optim.lr=-1",
                        f"run.results_dir={res}"], capture_output=True, text=True, cwd=tmp_path,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2
    assert p.stderr == "rlablate: config error: optim.lr = -1.0: must be > 0\n"
    assert not res.exists()
