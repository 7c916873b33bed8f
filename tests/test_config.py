"""Strict config: every bad input is one line naming the key, the value and what is allowed;
the CLI exits 2 and writes nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from harness.config import (ConfigError, config_from_dict, dump_yaml,
                            list_presets, load_config, load_preset, parse_overrides)

BAD = [  # (overrides, substring the one-line message must contain)
    (["optim.lrr=1e-3"], "unknown key 'optim.lrr'; allowed under optim: lr"),
    (["optim.lrr=1e-3"], "did you mean 'optim.lr'?"),
    (["optimm.lr=1e-3"], "did you mean 'optim'?"),
    (["optim.lr=abc"], "optim.lr = 'abc': expected a float"),
    (["optim.lr=0"], "optim.lr = 0.0: must be > 0"),
    (["optim.lr=nan"], "optim.lr = nan: expected a finite number"),
    (["train.steps=1.5"], "train.steps = 1.5: expected an integer"),
    (["train.steps=-1"], "train.steps = -1: must be >= 0"),
    (["task.cot=maybe"], "task.cot = 'maybe': expected true or false"),
    (["model.scale=tiny-2m"], "model.scale = 'tiny-2m': allowed values are tiny-0.3m, tiny-1m, tiny-4m, pretrained"),
    (["algo.advantage=group_nrm"], "did you mean 'group_norm'?"),
    (["algo.preset=grpoo"], "algo.preset = 'grpoo': allowed values are"),
    (["model.scale=pretrained"], "model.path = None: required when model.scale = pretrained"),
    (["model.path=/x"], "model.path = '/x': only allowed with model.scale = pretrained"),
    (["eval.temperature=0"], "eval.in_dist.k = 4: greedy eval"),
    (["algo.minibatches=3"], "algo.minibatches = 3: must divide rollout.prompts_per_step (32"),
    (["rollout.group_size=1"], "rollout.group_size = 1: advantage 'group_norm' needs groups"),
    (["rollout.top_p=0.9"], "use old_logprobs=recompute"),
    (["task.min_digits=3", "task.max_digits=2"], "task.min_digits = 3: must be <= task.max_digits"),
    (["rollout.max_new_tokens=200"], "model.max_positions = 128: prompt + rollout.max_new_tokens needs"),
    (["warmup.target_pass_rate=1.5"], "warmup.target_pass_rate = 1.5: must be >= 0 and <= 1"),
    (["algo.deviates_from_preset=[]"], "derived"),
    (["optim=3"], "optim = 3: expected a mapping"),
    (["lr=3"], "unknown key 'lr'"),
    (["optim.lr"], "expected key=value"),
]


@pytest.mark.parametrize("overrides,expected", BAD)
def test_bad_values_give_one_clear_line(overrides, expected):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    msg = str(e.value)
    assert expected in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text,expected", [
    ("", "the file is empty"),
    ("optim: [1, 2\n", "not valid YAML (line"),
    ("!!python/object/apply:os.system ['echo hi']\n", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping of config keys, got list"),
    ("optim:\n  lr: -1\n", "optim.lr = -1.0: must be > 0"),
])
def test_bad_files(tmp_path, text, expected):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert expected in str(e.value)


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_yaml_scientific_notation_and_cli_override_precedence(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("optim:\n  lr: 3e-4\ntrain:\n  steps: 7\n")  # PyYAML reads 3e-4 as a string
    cfg = load_config(p, ["train.steps=9"])
    assert cfg.optim.lr == pytest.approx(3e-4) and isinstance(cfg.optim.lr, float)
    assert cfg.train.steps == 9


def test_parse_overrides_nests_and_types():
    assert parse_overrides(["a.b=1", "a.c=x", "d=true"]) == {"a": {"b": 1, "c": "x"}, "d": True}


def test_resolved_config_round_trips_and_run_id_is_stable():
    cfg = load_config(None, ["run.seed=3", "optim.lr=2e-4"])
    again = config_from_dict(yaml.safe_load(dump_yaml(cfg)))
    assert again.to_dict() == cfg.to_dict()
    assert again.run_id() == cfg.run_id()
    assert load_config(None, ["run.seed=4"]).run_id() != cfg.run_id()
    # where results go does not change what ran
    assert load_config(None, ["run.seed=3", "optim.lr=2e-4", "run.results_dir=/elsewhere"]).run_id() == cfg.run_id()


def test_preset_is_data_and_deviations_are_recorded():
    assert "grpo" in list_presets()
    assert load_preset("grpo")["advantage"] == "group_norm"
    plain = load_config(None, [])
    assert plain.algo.deviates_from_preset == []
    cfg = load_config(None, ["algo.advantage=group_mean", "algo.clip_high=0.2"])
    # clip_high=0.2 is the preset's own value: not a deviation; the advantage is
    assert cfg.algo.deviates_from_preset == ["advantage"]
    assert "deviates_from_preset:\n  - advantage" in dump_yaml(cfg)


def test_run_names_cannot_escape_results_root():
    for bad in ("run.name=../../etc/x", "run.sweep=../up", "run.name=/etc/x", "run.name=.hidden"):
        with pytest.raises(ConfigError, match="letters, digits and _ . \\+ - only"):
            load_config(None, [bad])
    d = load_config(None, ["run.name=ok.name-1", "run.sweep=s_2"]).run_dir()
    assert ".." not in d.parts and d.parts[0] == "results"


def test_cli_bad_config_exits_2_one_line_and_writes_nothing(tmp_path):
    res = tmp_path / "results"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "optim.lr=-1",
                        f"run.results_dir={res}"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0
    assert "optim.lr = -1.0: must be > 0" in p.stderr
    assert not res.exists()


def test_cli_help_documents_every_key():
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "--help"], capture_output=True,
                       text=True)
    assert p.returncode == 0
    for key in ("optim.lr", "algo.advantage", "warmup.target_pass_rate", "eval.in_dist.k"):
        assert key in p.stdout
