"""The schedule a study runs, read without the harness (analysis/ never imports harness/): from a
sweep spec (`read_schedule`: its set, grid, zip, exclude, include and seeds over the base config,
which is enough for steps, eval interval, seeds and eval size; it is not the harness's expansion
and validates nothing) or from a loaded study (`schedule_from_results`). `rlablate calibrate` and
the report's calibration section simulate that schedule.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.fit import FitError

#: the harness's defaults (harness/config.py) for keys a spec may leave out
HARNESS_DEFAULTS = {"train.steps": 150, "eval.every": 10, "eval.in_dist.n_items": 256,
                    "eval.in_dist.k": 4, "eval.held_out.n_items": 256, "eval.held_out.k": 4,
                    "model.scale": "tiny-1m", "algo.preset": "grpo"}
REFERENCE = "grpo"


@dataclass(frozen=True)
class Group:
    """One variant at one scale as the spec runs it."""

    variant: str  # preset, or preset+key=value for an ablation (as analysis.load labels it)
    scale: str
    steps: int
    every: int
    seeds: int
    n_items: int = 256
    k: int = 4


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in (d or {}).items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(_flat(value, name))
        else:
            out[name] = value
    return out


def _label(point: dict, base_preset: str) -> str:
    preset = point.get("algo.preset", base_preset)
    extra = sorted(k for k in point if k.startswith("algo.") and k != "algo.preset")
    def short(v):
        return f"{v:g}" if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)
    return str(preset) + "".join(f"+{k[5:]}={short(point[k])}" for k in extra)


def read_schedule(spec_path: str | Path) -> tuple[str, list[Group]]:
    """(sweep name, groups) of a sweep spec: every distinct (variant, scale) with its steps,
    eval interval, number of seeds and in-distribution eval size (see the module docstring)."""
    path = Path(spec_path)
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict):
        raise FitError(f"{path}: not a sweep spec (a YAML mapping)")
    base = dict(HARNESS_DEFAULTS)
    if isinstance(spec.get("base"), str) and spec["base"].endswith((".yaml", ".yml")):
        base_path = (path.parent / spec["base"])
        if base_path.exists():
            base.update(_flat(yaml.safe_load(base_path.read_text()) or {}))
    elif isinstance(spec.get("base"), str):
        base["algo.preset"] = spec["base"]
    base.update(_flat(spec.get("set") or {}))
    seeds = spec.get("seeds", [0])
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    axes = [[{k: v} for v in (vals if isinstance(vals, list) else [vals])]
            for k, vals in (spec.get("grid") or {}).items()]
    for group in spec.get("zip") or []:
        keys = list(group)
        axes.append([dict(zip(keys, vals)) for vals in zip(*(group[k] for k in keys))])
    points = [dict(itertools.chain.from_iterable(d.items() for d in combo))
              for combo in itertools.product(*axes)] if axes else [{}]

    def matches(point, rule):
        return all(point.get(k) in (v if isinstance(v, list) else [v]) for k, v in rule.items())

    points = [p for p in points if not any(matches(p, r) for r in spec.get("exclude") or [])]
    points += [dict(p) for p in spec.get("include") or []]
    groups = {}
    for p in points:
        cfg = {**base, **p}
        algo_point = {k: v for k, v in p.items() if k.startswith("algo.")}
        g = Group(variant=_label(algo_point, base["algo.preset"]), scale=str(cfg["model.scale"]),
                  steps=int(cfg["train.steps"]), every=int(cfg["eval.every"]), seeds=n_seeds,
                  n_items=int(cfg.get("eval.in_dist.n_items", 256)),
                  k=int(cfg.get("eval.in_dist.k", 4)))
        groups.setdefault((g.variant, g.scale), g)
    return str(spec.get("name", path.stem)), list(groups.values())


def schedule_from_results(runs: pd.DataFrame, evals: pd.DataFrame, eval_set: str = "in_dist"
                          ) -> list[Group]:
    """The schedule of a loaded study (``analysis.groups.assign_groups`` runs and the tidy
    evals): per (variant, scale) its last eval step, eval interval, number of usable runs and
    eval size, so a report calibrates the design it actually ran (no spec needed)."""
    usable = runs[runs["excluded"].isna()][["sweep", "run_id", "variant", "scale_value"]]
    ev = evals[evals["eval_set"] == eval_set].merge(usable, on=["sweep", "run_id"])
    groups = []
    for (variant, scale), g in ev.groupby(["variant", "scale_value"]):
        steps = np.sort(g["step"].unique())
        every = int(np.median(np.diff(steps))) if steps.size > 1 else int(steps.max() or 1)
        groups.append(Group(str(variant), str(scale), int(steps.max()), max(every, 1),
                            int(g[["sweep", "run_id"]].drop_duplicates().shape[0]),
                            int(np.nanmedian(g["n_items"])) if g["n_items"].notna().any()
                            else 256,
                            int(np.nanmedian(g["k"])) if g["k"].notna().any() else 4))
    return groups
