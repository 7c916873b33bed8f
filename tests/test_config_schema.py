"""harness/config/schema.py: every key has a default and help, `rlablate train --help` documents
every one of them; the run's identity (name, id, directory) is derived from the resolved values."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from harness.config import Config, ConfigError, describe_fields, load_config
from harness.config.schema import is_section, type_hints
from harness.scales import SCALES

ROOT = Path(__file__).resolve().parents[1]


def _leaves(cls, prefix=""):
    for f in dataclasses.fields(cls):
        tp = type_hints(cls)[f.name]
        if is_section(tp):
            yield from _leaves(tp, f"{prefix}{f.name}.")
        elif f.name != "deviates_from_preset":
            yield f"{prefix}{f.name}", f


def test_describe_fields_lists_every_key_with_its_default_and_help():
    rows = describe_fields()
    leaves = dict(_leaves(Config))
    assert [k for k, _, _ in rows] == list(leaves)
    for key, default, help_ in rows:
        assert help_.strip(), f"{key} has no help text"
        obj = Config()
        for part in key.split("."):
            obj = getattr(obj, part)
        assert default == repr(obj)


def test_cli_help_documents_every_key_with_default_and_help():
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "--help"], capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"})
    assert p.returncode == 0, p.stderr
    def flat(s: str) -> str:  # the help is wrapped (also after hyphens): compare it unwrapped
        return re.sub(r"-\s+", "-", " ".join(s.split()))

    text = flat(p.stdout)
    rows = describe_fields()
    assert len(rows) > 80
    for key, default, help_ in rows:
        assert flat(f"{key} (default {default}) {help_}") in text, key


def test_scale_choices_come_from_the_scales_table():
    tp = type_hints(type(Config().model))["scale"]
    assert typing.get_args(tp) == tuple(SCALES) == ("tiny-0.3m", "tiny-1m", "tiny-4m", "tiny-moe", "pretrained")
    assert SCALES.where(from_path=True) == ["pretrained"]


def test_run_id_hashes_what_affects_the_result_only():
    cfg = load_config(None, ["run.seed=3", "optim.lr=2e-4"])
    assert re.fullmatch(r"grpo-tiny-1m-s3-[0-9a-f]{8}", cfg.run_id())
    assert load_config(None, ["run.seed=4", "optim.lr=2e-4"]).run_id() != cfg.run_id()
    assert load_config(None, ["run.seed=3", "optim.lr=3e-4"]).run_id() != cfg.run_id()
    for where in ("run.results_dir=/elsewhere", "run.sweep=s", "run.cache_dir=/c", "run.threads=2",
                  "run.malloc_tuning=false"):  # where results go and how fast: not what ran
        assert load_config(None, ["run.seed=3", "optim.lr=2e-4", where]).run_id() == cfg.run_id()
    assert load_config(None, ["algo.clip_high=0.28"]).run_name() == "grpo+clip_high=0.28-tiny-1m-s0"
    assert load_config(None, ["run.name=mine"]).run_id().startswith("mine-")


def test_run_names_cannot_escape_results_root():
    for bad in ("run.name=../../etc/x", "run.sweep=../up", "run.name=/etc/x", "run.name=.hidden"):
        with pytest.raises(ConfigError, match="letters, digits and _ . \\+ - only"):
            load_config(None, [bad])
    d = load_config(None, ["run.name=ok.name-1", "run.sweep=s_2"]).run_dir()
    assert ".." not in d.parts and d.parts[0] == "results" and d.parts[1] == "s_2"
