"""Helpers shared by the sweep tests (test_sweep_*.py): tiny specs written to a tmp dir."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import TINY

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
