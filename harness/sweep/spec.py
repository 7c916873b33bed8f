"""Sweep specs: a YAML grid of runs, strictly validated, one small validator per section.

A spec is data (`sweeps/*.yaml`); `harness.sweep.expand.expand(spec)` turns it into the list of
fully resolved run configs, each with its deterministic `run_id`. Nothing here touches the file
system beyond reading the spec and its base.

    name: demo                       # the sweep: runs go to <run.results_dir>/<name>/<run_id>/
    description: ...                 # free text (optional)
    base: ../configs/default.yaml    # a config YAML (relative to this file) or a preset name
    set: {train.steps: 40}           # dotted keys fixed for every run
    grid:                            # dotted key -> list of values; the cartesian product
      algo.preset: [grpo]
    zip:                             # groups of keys whose values move together (equal lengths)
      - label.size: [small, large]   # `label.*`: a name for the group (tables, run_name)
        model.scale: [tiny-0.3m, tiny-1m]
        optim.lr: [3e-3, 1e-3]
        slurm.time_min: [30, 60]     # `slurm.*` keys are resources, not config: per-group
    seeds: [0, 1, 2]                 # run.seed (or a count: `seeds: 3` = 0, 1, 2)
    exclude:                         # drop the points matching every key of a rule
      - {model.scale: tiny-1m, run.seed: 2}
    include:                         # extra points: each names some keys (swept or not); the
      - {algo.preset: grpo, algo.clip_high: 0.28}   # axes it does not name are crossed with it
    run_name: "{algo.preset}-{label.size}-s{run.seed}"   # readable run.name (the id adds a hash)
    executor: local                  # default of `rlablate sweep --executor` (executors.EXECUTORS)
    slurm: {partition: gpu, time_min: 60, cpus_per_task: 4, gpus_per_node: 1, mem_gb: 32}
    local: {parallel: 2}             # local executor: runs at once
    max_runs: 10000                  # a bigger grid is an error (checked before expanding)
    plan: {...}                      # pre-registered predictions (`rlablate plan SPEC --write`);
                                     # read by the report (planned vs achieved), not by the harness

Every error is one line naming the spec key and what is allowed, raised before anything is written
or submitted; every expanded run goes through `build_config`, so a bad grid value fails at expansion
with the run's swept values named.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..config import (NAME_RE, describe_fields, list_presets, parse_overrides, read_text,
                      read_yaml_file, safe_load_strict)
from ..registry import suggest
from .executors import EXECUTORS
from .resources import LOCAL_KEYS, RESOURCES, Err, check_resource, check_resource_key, resource_block


class SpecError(ValueError):
    """A sweep spec problem: one line, `<spec>: <key>: <what is allowed>`."""


TOP_KEYS = ("name", "description", "base", "set", "grid", "zip", "seeds", "exclude", "include",
            "run_name", "executor", "slurm", "local", "max_runs", "plan")
MAX_RUNS = 10_000  # default `max_runs`: a grid larger than this is a typo until the spec says otherwise
# Keys a spec may not sweep or set: they are the sweep's identity and location, one per sweep.
RESERVED = {"run.sweep": "set by the spec's `name`",
            "run.results_dir": None, "run.cache_dir": None}  # None: may be set, never swept


@dataclass(frozen=True)
class Axis:
    """One dimension of the product: a grid key (one key) or a zip group (several keys)."""
    keys: tuple[str, ...]
    values: tuple[tuple, ...]  # one tuple per point, aligned with `keys`
    where: str                 # spec key, for errors


@dataclass
class Spec:
    name: str
    raw: dict
    source: str                # spec path or '<dict>'
    sha256: str                # of the spec text (or of its canonical YAML)
    base: dict                 # nested config data every run starts from
    fixed: dict[str, Any]      # dotted key -> value (`set` and command-line overrides)
    axes: list[Axis]
    exclude: list[dict]
    include: list[dict]        # extra points (dotted key -> value), crossed with the axes they skip
    executor: str
    slurm: dict[str, Any]      # default resources
    local: dict[str, Any]
    run_name: str | None = None  # template of run.name, e.g. '{label.loss}-{model.path}-s{run.seed}'

    @property
    def swept_keys(self) -> list[str]:
        """Grid and zip keys, then the keys only `include` entries set."""
        keys = [k for ax in self.axes for k in ax.keys]
        return keys + list(dict.fromkeys(k for e in self.include for k in e if k not in keys))


def norm_value(v: Any) -> Any:
    """Compare values as the config reads them: '3e-4' (YAML reads it as a string) == 0.0003."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v


def crossed(axes: list[Axis], entry: dict) -> list[Axis]:
    """The axes an `include` entry is crossed with: those it names no key of."""
    return [ax for ax in axes if not any(k in entry for k in ax.keys)]


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def config_keys() -> tuple[str, ...]:
    return tuple(k for k, _, _ in describe_fields())


def load_spec(path: str | Path, overrides: list[str] | None = None) -> Spec:
    """Read and validate a spec file; `overrides` are `key=value` applied to every run (a swept key
    cannot be overridden: that would silently collapse the grid)."""
    path = Path(path)
    text, raw = read_yaml_file(path, SpecError)
    if raw is None:
        raise SpecError(f"{path}: the file is empty; a spec needs at least `name`")
    return parse_spec(raw, source=str(path), base_dir=path.parent, overrides=overrides,
                      sha256=hashlib.sha256(text.encode()).hexdigest())


def parse_spec(raw: Any, source: str = "<dict>", base_dir: Path | None = None,
               overrides: list[str] | None = None, sha256: str | None = None) -> Spec:
    """Validate a spec mapping, section by section in a fixed order. Raises `SpecError` (one line)
    on the first problem."""
    def err(msg: str) -> SpecError:
        return SpecError(f"{source}: {msg}")

    name = _top(raw, err)
    base = _base(raw.get("base"), base_dir, err)
    fixed = _set(raw.get("set", {}), err)
    over = _flatten(parse_overrides(overrides or []), "") if overrides else {}
    axes = _grid(raw.get("grid", {}), err) + _zips(raw.get("zip", []), err)
    if "seeds" in raw:
        axes.append(_seeds(raw["seeds"], err))
    seen = _one_place(fixed, axes, err)  # key -> where it is given
    _overrides(over, fixed, seen, err)
    include = _include(raw.get("include", []), axes, seen, err)
    exclude = _exclude(raw.get("exclude", []), axes, include, err)
    executor = _executor(raw.get("executor", "local"), err)
    slurm = resource_block(raw.get("slurm", {}), "slurm", RESOURCES, err)
    local = resource_block(raw.get("local", {}), "local", LOCAL_KEYS, err)
    run_name = _run_name(raw.get("run_name"), seen, err)
    _size(raw.get("max_runs", MAX_RUNS), axes, include, err)
    if sha256 is None:
        sha256 = hashlib.sha256(yaml.safe_dump(raw, sort_keys=True).encode()).hexdigest()
    return Spec(name=name, raw=raw, source=source, sha256=sha256, base=base, fixed=fixed,
                axes=axes, exclude=exclude, include=include, executor=executor, slurm=slurm,
                local=local, run_name=run_name)


# ------------------------------------------------------------------------------------------------
# One validator per section
# ------------------------------------------------------------------------------------------------
def _top(raw: Any, err: Err) -> str:
    """The spec is a mapping of known keys with a usable `name`; returns the name."""
    if not isinstance(raw, dict):
        raise err(f"expected a mapping with keys {', '.join(TOP_KEYS)}, got {type(raw).__name__}")
    sections = {k.split(".")[0] for k in config_keys()} | {"preset"}
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown and all(k in sections for k in unknown) and "grid" not in raw and "base" not in raw:
        raise err(f"this is a run config (keys {', '.join(map(str, unknown))}), not a sweep spec; "
                  f"give it to `rlablate train` (or `rlablate config`), or name it as the `base` "
                  f"of a sweep spec")
    for k in raw:
        if k not in TOP_KEYS:
            raise err(f"unknown key {k!r}; allowed: {', '.join(TOP_KEYS)}" + suggest(str(k), list(TOP_KEYS)))
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(NAME_RE, name):
        raise err(f"name = {name!r}: required; letters, digits and _ . + - (it names the sweep "
                  f"directory)")
    if not isinstance(raw.get("description", ""), str):
        raise err("description: expected a string")
    if not isinstance(raw.get("plan", {}), dict):
        raise err("plan: expected a mapping (the widths `rlablate plan SPEC --write` pre-registers; "
                  "the harness does not read it)")
    return name


def _base(b: Any, base_dir: Path | None, err: Err) -> dict:
    """`base`: a config file (relative to the spec) or a preset name -> nested config data."""
    if b is None:
        return {}
    if not isinstance(b, str) or not b:
        raise err(f"base = {b!r}: a config YAML path or a preset name ({', '.join(list_presets())})")
    if b.endswith((".yaml", ".yml")) or "/" in b:
        p = Path(b) if Path(b).is_absolute() else (base_dir or Path.cwd()) / b
        try:
            base = safe_load_strict(read_text(p, OSError)) or {}
        except OSError as e:
            raise err(f"base = {b!r}: {e}") from None
        except yaml.YAMLError as e:
            raise err(f"base = {b!r}: not valid YAML: {getattr(e, 'problem', e)}") from None
        if not isinstance(base, dict):
            raise err(f"base = {b!r}: expected a mapping of config keys")
        return base
    if b in list_presets():
        return {"algo": {"preset": b}}
    raise err(f"base = {b!r}: not a .yaml file nor a preset; presets are "
              f"{', '.join(list_presets())}" + suggest(b, list_presets()))


def _set(d: Any, err: Err) -> dict[str, Any]:
    """`set`: dotted keys fixed for every run."""
    fixed = _dotted_mapping(d, "set", err, allow_lists=True)
    for k, v in fixed.items():
        _check_key(k, "set", err, swept=False)
        if k.startswith("slurm."):
            check_resource(k, v, f"set.{k}", err)
    return fixed


def _grid(grid: Any, err: Err) -> list[Axis]:
    """`grid`: one axis per key."""
    if not isinstance(grid, dict):
        raise err(f"grid = {grid!r}: expected a mapping of dotted key -> list of values")
    axes = []
    for k, vals in grid.items():
        where = f"grid.{k}"
        _check_key(str(k), "grid", err, swept=True)
        if not isinstance(vals, list) or not vals:
            raise err(f"{where} = {vals!r}: expected a non-empty list of values")
        axes.append(Axis((k,), tuple((v,) for v in vals), where))
    return axes


def _zips(zips: Any, err: Err) -> list[Axis]:
    """`zip`: one axis per group of keys whose equal-length lists move together."""
    if not isinstance(zips, list):
        raise err(f"zip = {zips!r}: expected a list of groups (mappings of key -> list)")
    axes = []
    for i, group in enumerate(zips):
        where = f"zip[{i}]"
        if not isinstance(group, dict) or not group:
            raise err(f"{where}: expected a mapping of dotted key -> list of values")
        lengths = set()
        for k, vals in group.items():
            _check_key(str(k), where, err, swept=True)
            if not isinstance(vals, list) or not vals:
                raise err(f"{where}.{k} = {vals!r}: expected a non-empty list of values")
            lengths.add(len(vals))
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}: {len(v)}" for k, v in group.items())
            raise err(f"{where}: the lists of a zip group move together and need equal lengths "
                      f"({sizes})")
        keys = tuple(group)
        axes.append(Axis(keys, tuple(zip(*(group[k] for k in keys))), where))
    return axes


def _seeds(given: Any, err: Err) -> Axis:
    """`seeds`: a list of distinct integers >= 0, or a count -> the run.seed axis."""
    s = list(range(given)) if isinstance(given, int) and not isinstance(given, bool) and given >= 1 else given
    if (not isinstance(s, list) or not s
            or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in s)):
        raise err(f"seeds = {given!r}: a list of integers >= 0, or a count >= 1")
    if len(set(s)) != len(s):
        raise err(f"seeds = {s!r}: a seed is listed twice")
    return Axis(("run.seed",), tuple((x,) for x in s), "seeds")


def _one_place(fixed: dict[str, Any], axes: list[Axis], err: Err) -> dict[str, str]:
    """A key is set or swept in one place only; swept resources are checked. Returns key -> where."""
    seen: dict[str, str] = {k: f"set.{k}" for k in fixed}
    for ax in axes:
        for j, k in enumerate(ax.keys):
            where = f"{ax.where}.{k}" if ax.where.startswith("zip[") else ax.where
            if k in seen:
                raise err(f"{where}: also given in {seen[k]}; a key is set in one place only")
            seen[k] = where
            if k.startswith("slurm."):
                for t in ax.values:
                    check_resource(k, t[j], where, err)
    return seen


def _overrides(over: dict[str, Any], fixed: dict[str, Any], seen: dict[str, str], err: Err) -> None:
    """Command-line `key=value`s join `fixed` (a swept key cannot be overridden)."""
    for k, v in over.items():
        if k in seen and not seen[k].startswith("set."):
            raise err(f"override {k}={v!r}: {k} is swept by {seen[k]}; edit the spec instead")
        _check_key(k, "override", err, swept=False)
        if k.startswith("slurm."):
            check_resource(k, v, f"override {k}", err)
        fixed[k] = v
        seen.setdefault(k, "override")


def _include(extra: Any, axes: list[Axis], seen: dict[str, str], err: Err) -> list[dict]:
    """`include`: extra points (a single-choice ablation next to a grid of presets)."""
    if not isinstance(extra, list):
        raise err(f"include = {extra!r}: expected a list of mappings (dotted key -> value)")
    include = []
    for i, entry in enumerate(extra):
        where = f"include[{i}]"
        point = _dotted_mapping(entry, where, err, allow_lists=False) if isinstance(entry, dict) else None
        if not point:
            raise err(f"{where}: expected a non-empty mapping of dotted key -> value")
        for k, v in point.items():
            _check_key(k, where, err, swept=True)
            if k in seen and seen[k].startswith(("set.", "override")):
                raise err(f"{where}.{k}: also given in {seen[k]}; a key is set in one place only")
            if k.startswith("slurm."):
                check_resource(k, v, f"{where}.{k}", err)
        for ax in axes:
            named = [k for k in ax.keys if k in point]
            if named and len(named) != len(ax.keys):
                raise err(f"{where}: names {', '.join(named)} of {ax.where} but not "
                          f"{', '.join(k for k in ax.keys if k not in point)}; give all of a zip "
                          f"group's keys or none")
        include.append(point)
    return include


def _exclude(rules: Any, axes: list[Axis], include: list[dict], err: Err) -> list[dict]:
    """`exclude`: rules over swept keys -> {key: [normalized values]} (matched in expand)."""
    swept = {k for ax in axes for k in ax.keys} | {k for point in include for k in point}
    if not isinstance(rules, list):
        raise err(f"exclude = {rules!r}: expected a list of mappings (swept key -> value or list)")
    exclude = []
    for i, rule in enumerate(rules):
        where = f"exclude[{i}]"
        if not isinstance(rule, dict) or not rule:
            raise err(f"{where}: expected a mapping of swept key -> value (or list of values)")
        for k in rule:
            if k not in swept:
                raise err(f"{where}.{k}: not a swept key; swept keys are {', '.join(sorted(swept)) or 'none'}"
                          + suggest(str(k), sorted(swept)))
        exclude.append({k: [norm_value(x) for x in (v if isinstance(v, list) else [v])] for k, v in rule.items()})
    return exclude


def _executor(executor: Any, err: Err) -> str:
    """`executor`: a name of the executor table."""
    if executor not in EXECUTORS:
        names = list(EXECUTORS)
        raise err(f"executor = {executor!r}: allowed values are {', '.join(names)}"
                  + suggest(str(executor), names))
    return executor


def _run_name(run_name: Any, seen: dict[str, str], err: Err) -> str | None:
    """`run_name`: a template over swept or set keys."""
    if run_name is None:
        return None
    if not isinstance(run_name, str) or not run_name.strip():
        raise err(f"run_name = {run_name!r}: a template like '{{label.loss}}-{{model.scale}}-s{{run.seed}}'")
    if "run.name" in seen:
        raise err(f"run_name: run.name is also given in {seen['run.name']}; use one of them")
    known = sorted(seen)
    for k in re.findall(r"\{([^{}]*)\}", run_name):
        if k not in seen:
            raise err(f"run_name: {{{k}}} is neither swept nor set in this spec; use one of "
                      f"{', '.join(known)}" + suggest(k, known))
    return run_name


def _size(max_runs: Any, axes: list[Axis], include: list[dict], err: Err) -> None:
    """`max_runs`: counted before expanding anything, so a huge grid fails at once."""
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise err(f"max_runs = {max_runs!r}: an integer >= 1 (default {MAX_RUNS})")
    size = 1
    for ax in axes:
        size *= len(ax.values)
    for point in include:
        extra = 1
        for a in crossed(axes, point):
            extra *= len(ax.values)
        size += extra
    if size > max_runs:
        dims = " x ".join(f"{len(ax.values)} ({ax.where})" for ax in axes)
        raise err(f"the grid has {size:,} points ({dims}), over max_runs = {max_runs:,}; shrink "
                  f"it, or set max_runs in the spec if you mean it")


# ------------------------------------------------------------------------------------------------
# Keys
# ------------------------------------------------------------------------------------------------
def _flatten(d: dict, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _dotted_mapping(d: Any, where: str, err: Err, allow_lists: bool) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise err(f"{where} = {d!r}: expected a mapping of dotted key -> value")
    out = _flatten(d, "")  # `set: {optim: {lr: 1e-3}}` and `set: {optim.lr: 1e-3}` mean the same
    for k, v in out.items():
        if isinstance(v, list) and not (allow_lists and k == "slurm.setup"):
            raise err(f"{where}.{k} = {v!r}: a single value (to sweep values, use grid or zip)")
    return out


def _check_key(key: str, where: str, err: Err, swept: bool) -> None:
    """A dotted config key, a `slurm.<resource>` key or a `label.<name>` (an annotation carried in
    the run table and usable in run_name, not part of the config); never one the sweep owns."""
    if key.startswith("label."):
        if not re.fullmatch(r"label\.[A-Za-z_][A-Za-z0-9_]*", key):
            raise err(f"{where}.{key}: a label is 'label.<identifier>'")
        return
    if key.startswith("slurm."):
        check_resource_key(key, where, err)
        return
    keys = config_keys()
    if key not in keys:
        raise err(f"{where}.{key}: unknown config key" + (suggest(key, list(keys)) or
                  f"; see `rlablate train --help` for the {len(keys)} keys"))
    if key in RESERVED and (swept or RESERVED[key]):
        why = RESERVED[key] or "a sweep lives in one directory"
        raise err(f"{where}.{key}: cannot be {'swept' if swept else 'set'} here ({why})")
