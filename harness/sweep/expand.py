"""A validated spec -> its runs, by a pure function, plus the selection of a subset (`--only`).

`expand(spec)` gives the fully resolved run configs in a fixed order, each with its deterministic
`run_id` (readable name + hash of the resolved config), so the same spec always names the same runs
and a re-launch can tell which ones already ran. The run_id of a sweep's run equals that of
`rlablate train` with the same keys.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..config import Config, ConfigError, build_config, deep_merge
from ..registry import suggest
from .spec import Spec, SpecError, crossed, norm_value


@dataclass
class Run:
    index: int                 # position in the expansion (deterministic)
    point: dict[str, Any]      # swept key -> value as written in the spec
    cfg: Config
    resources: dict[str, Any]
    run_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.run_id = self.cfg.run_id()

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.point.items())


def sweep_dir(runs: list[Run]) -> Path:
    """<run.results_dir>/<sweep>: one directory per sweep (the spec forbids sweeping results_dir)."""
    return runs[0].cfg.run_dir().parent


def expand(spec: Spec) -> list[Run]:
    """The runs of a spec, in a fixed order (grid keys as written, then zip groups, then seeds, the
    last varying fastest). Pure: same spec -> same runs, same run_ids. Raises `SpecError` naming the
    run's swept values if a run's config is invalid, if two runs resolve to the same config, or if
    an exclude rule matches nothing (a typo there would otherwise silently exclude nothing)."""
    fixed_cfg = {k: v for k, v in spec.fixed.items() if not k.startswith(("slurm.", "label."))}
    fixed_res = {k[6:]: v for k, v in spec.fixed.items() if k.startswith("slurm.")}
    common = deep_merge(copy.deepcopy(spec.base), _nest(fixed_cfg))
    common = deep_merge(common, {"run": {"sweep": spec.name}})
    used = [0] * len(spec.exclude)
    runs: list[Run] = []
    by_id: dict[str, Run] = {}
    for point in _points(spec):
        hit = [i for i, rule in enumerate(spec.exclude)
               if all(k in point and norm_value(point[k]) in vals for k, vals in rule.items())]
        for i in hit:
            used[i] += 1
        if hit:
            continue
        cfg_part = {k: v for k, v in point.items() if not k.startswith(("slurm.", "label."))}
        if spec.run_name:
            cfg_part["run.name"] = render_name(spec.run_name, {**spec.fixed, **point})
        res = {**spec.slurm, **fixed_res,
               **{k[6:]: v for k, v in point.items() if k.startswith("slurm.")}}
        label = ", ".join(f"{k}={v}" for k, v in point.items()) or "the base config"
        try:
            cfg = build_config(deep_merge(common, _nest(cfg_part)))
        except ConfigError as e:
            raise SpecError(f"{spec.source}: run {len(runs)} ({label}): {e}") from None
        run = Run(len(runs), point, cfg, res)
        if run.run_id in by_id:
            raise SpecError(f"{spec.source}: runs {by_id[run.run_id].index} "
                            f"({by_id[run.run_id].label()}) and {run.index} ({label}) resolve "
                            f"to the same config (run_id {run.run_id})")
        by_id[run.run_id] = run
        runs.append(run)
    for i, n in enumerate(used):
        if n == 0:
            raise SpecError(f"{spec.source}: exclude[{i}] = {spec.raw['exclude'][i]!r} matches no run "
                            f"(a misspelt value?)")
    if not runs:
        raise SpecError(f"{spec.source}: every run is excluded; nothing to run")
    return runs


def _nest(dotted: dict[str, Any]) -> dict:
    out: dict = {}
    for k, v in dotted.items():
        node = out
        *head, last = k.split(".")
        for p in head:
            node = node.setdefault(p, {})
        node[last] = v
    return out


def _points(spec: Spec):
    """The grid's points, then each `include` entry crossed with the axes it does not name."""
    for combo in itertools.product(*(ax.values for ax in spec.axes)):
        yield {k: v for ax, vals in zip(spec.axes, combo) for k, v in zip(ax.keys, vals)}
    for entry in spec.include:
        free = crossed(spec.axes, entry)
        for combo in itertools.product(*(ax.values for ax in free)):
            # the entry's keys in grid order first, then its own, then the crossed axes
            point = {k: entry[k] for ax in spec.axes for k in ax.keys if k in entry}
            point.update({k: v for k, v in entry.items() if k not in point})
            point.update({k: v for ax, vals in zip(free, combo) for k, v in zip(ax.keys, vals)})
            yield point


def render_name(template: str, values: dict[str, Any]) -> str:
    """'{label.loss}-{model.path}-s{run.seed}' -> 'dapo-Qwen2.5-7B-s0' (a path gives its last part)."""
    def sub(m: re.Match) -> str:
        v = values[m.group(1)]
        return str(v).rstrip("/").rsplit("/", 1)[-1] if isinstance(v, str) else str(v)
    return re.sub(r"\{([^{}]*)\}", sub, template)


def select(spec: Spec, runs: list[Run], only: list[str]) -> list[Run]:
    """The runs matching every `KEY=V1,V2` of `only` (--only): KEY must be swept and each value must
    match some run, so a typo selects nothing silently."""
    keep = list(runs)
    swept = spec.swept_keys
    for item in only:
        key, eq, raw = item.partition("=")
        if not eq or not raw:
            raise SpecError(f"--only {item!r}: expected KEY=VALUE[,VALUE...], e.g. algo.preset=grpo")
        if key not in swept:
            raise SpecError(f"--only {item!r}: {key} is not swept; swept keys are "
                            f"{', '.join(swept) or 'none'}" + suggest(key, swept))
        wanted = [norm_value(yaml.safe_load(v)) for v in raw.split(",")]
        have = sorted({str(r.point[key]) for r in runs if key in r.point})
        for v, text in zip(wanted, raw.split(",")):
            if not any(key in r.point and norm_value(r.point[key]) == v for r in runs):
                raise SpecError(f"--only {item!r}: no run has {key} = {text}; values are "
                                f"{', '.join(have)}" + suggest(text, have))
        keep = [r for r in keep if key in r.point and norm_value(r.point[key]) in wanted]
    if not keep:
        raise SpecError(f"--only {' '.join(only)}: no run matches all of these")
    return keep
