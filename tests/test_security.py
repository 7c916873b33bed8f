"""Security: configs, specs and checkpoints are data, never code. yaml.safe_load only,
torch.load(weights_only=True) only, no eval/exec/import-by-string anywhere in the package, and
every path a config names for writing stays under the results root. Source greps (cheap, and they
fail on the first regression) plus behavioural checks with real payloads."""

from __future__ import annotations

import os
import re

import pytest
import torch
import yaml

from conftest import ROOT
from harness.config import ConfigError, load_config, safe_load_strict
from harness.storage import CheckpointError, load_checkpoint_file

pytestmark = pytest.mark.faults
SOURCES = sorted(p for d in ("harness", "analysis") for p in (ROOT / d).rglob("*.py"))


def calls(pattern: str) -> list[str]:
    """`file:line: text` of every source line matching `pattern` (comments excluded)."""
    out = []
    for p in SOURCES:
        for i, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(pattern, code):
                out.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    return out


def test_sources_are_found():
    assert len(SOURCES) > 20 and any(p.name == "train.py" for p in SOURCES)


def test_yaml_is_only_ever_safe_loaded():
    assert calls(r"yaml\.(load|full_load|unsafe_load|load_all|unsafe_load_all)\s*\(") == []
    assert calls(r"yaml\.(Full|Unsafe|Base)?Loader\b") == [], "only yaml.SafeLoader may be named"
    assert calls(r"Loader\s*=\s*(?!yaml\.SafeLoader\b)") == []
    assert len(calls(r"yaml\.safe_load\(")) >= 4


def test_torch_load_always_has_weights_only_true():
    hits = calls(r"torch\.load\(")
    assert hits, "no torch.load found: the grep is broken"
    assert all("weights_only=True" in h for h in hits), hits


def test_no_eval_exec_pickle_or_import_by_string():
    assert calls(r"(?<![.\w])(eval|exec|compile)\(") == []
    assert calls(r"__import__\s*\(|import_module\s*\(|importlib\.(?!metadata\b)") == []
    assert calls(r"\bpickle\.loads?\s*\(|\bmarshal\.loads?\s*\(|\bdill\b|\bcloudpickle\b") == []


def test_yaml_python_tags_construct_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text in ("!!python/object/apply:os.system ['touch PWNED']\n",
                 "a: !!python/object/new:os.system ['touch PWNED']\n",
                 "a: !!python/name:os.system\n"):
        with pytest.raises(yaml.YAMLError):
            safe_load_strict(text)
        p = tmp_path / "c.yaml"
        p.write_text(text)
        with pytest.raises(ConfigError, match="not valid YAML"):
            load_config(p)
    assert not (tmp_path / "PWNED").exists()


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {_Payload.target}",))


def test_a_checkpoint_with_a_code_payload_is_refused_and_runs_nothing(tmp_path):
    """A pickle that would run a shell command on load (what weights_only=False would do)."""
    _Payload.target = tmp_path / "PWNED"
    p = tmp_path / "last.pt"
    torch.save({"model": {}, "state": {"step": 1}, "x": _Payload()}, p)
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint_file(p)
    assert not _Payload.target.exists()


def test_registry_names_are_looked_up_never_imported():
    for key in ("algo.advantage", "algo.ratio", "algo.surrogate", "algo.aggregation", "algo.kl"):
        with pytest.raises(ConfigError, match="allowed values are"):
            load_config(None, [f"{key}=os.system"])
    with pytest.raises(ConfigError, match="allowed values are"):
        load_config(None, ["algo.preset=../../etc/passwd"])


@pytest.mark.parametrize("name", ["../x", "../../etc/cron.d/x", "/abs/path", ".", "..", "a/b",
                                  "a/../../b", ".hidden", "x\x00y", "~root", "a\\..\\b"])
def test_run_and_sweep_names_cannot_name_a_path(name):
    for key in ("run.name", "run.sweep"):
        with pytest.raises(ConfigError, match=re.escape(key) + " = .*under run.results_dir"):
            load_config(None, [f"{key}={name}"])


def test_every_run_dir_stays_under_the_results_root(tmp_path):
    root = tmp_path / "results"
    for name, sweep in [("ok", "adhoc"), ("a.b-c+d_e", "s.1"), ("", "x")]:
        cfg = load_config(None, [f"run.name={name}", f"run.sweep={sweep}", f"run.results_dir={root}"])
        d = cfg.run_dir().resolve()
        assert d.is_relative_to(root.resolve()) and d.parent.parent == root.resolve()
