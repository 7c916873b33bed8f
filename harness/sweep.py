"""Sweep specs: a YAML grid of runs, strictly validated, expanded by a pure function.

A spec is data (`sweeps/*.yaml`); `expand(spec)` turns it into the list of fully resolved run
configs, each with its deterministic `run_id` (readable name + hash of the resolved config), so the
same spec always names the same runs and a re-launch can tell which ones already ran. Launching
lives in `harness.launch`; nothing here touches the file system beyond reading the spec and its base.

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
    executor: local                  # default of `rlablate sweep --executor`
    slurm: {partition: gpu, time_min: 60, cpus_per_task: 4, gpus_per_node: 1, mem_gb: 32}
    local: {parallel: 2}             # local executor: runs at once
    max_runs: 10000                  # a bigger grid is an error (checked before expanding)

Every error is one line naming the spec key and what is allowed, raised before anything is written
or submitted; every expanded run goes through `build_config`, so a bad grid value fails at expansion
with the run's swept values named.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .config import (NAME_RE, Config, ConfigError, build_config, deep_merge, describe_fields, list_presets,
                     parse_overrides, read_text, safe_load_strict, yaml_error)
from .registry import suggest


class SpecError(ValueError):
    """A sweep spec problem: one line, `<spec>: <key>: <what is allowed>`."""


TOP_KEYS = ("name", "description", "base", "set", "grid", "zip", "seeds", "exclude", "include",
            "run_name", "executor", "slurm", "local", "max_runs")
MAX_RUNS = 10_000  # default `max_runs`: a grid larger than this is a typo until the spec says otherwise
EXECUTORS = ("local", "slurm", "debug")
# Keys a spec may not sweep or set: they are the sweep's identity and location, one per sweep.
RESERVED = {"run.sweep": "set by the spec's `name`",
            "run.results_dir": None, "run.cache_dir": None}  # None: may be set, never swept


@dataclass(frozen=True)
class ResourceKey:
    kind: type | tuple
    default: Any
    help: str
    lo: float | None = None


# SLURM resources of a job (submitit AutoExecutor parameters); `slurm.<key>` in set/grid/zip.
RESOURCES: dict[str, ResourceKey] = {
    "partition": ResourceKey(str, None, "SLURM partition (omit: the cluster's default)"),
    "time_min": ResourceKey(int, 60, "time limit per job in minutes (also the local timeout)", 1),
    "cpus_per_task": ResourceKey(int, 1, "CPUs per run", 1),
    "gpus_per_node": ResourceKey(int, 0, "GPUs per run", 0),
    "mem_gb": ResourceKey((int, float), None, "memory per run in GB (omit: the cluster's default)",
                          0),
    "array_parallelism": ResourceKey(int, 64, "most tasks of one job array running at once", 1),
    "account": ResourceKey(str, None, "SLURM account"),
    "qos": ResourceKey(str, None, "SLURM quality of service"),
    "constraint": ResourceKey(str, None, "SLURM node constraint"),
    "max_timeouts": ResourceKey(int, 3, "requeues after a time-out before giving up", 0),
    "signal_delay_s": ResourceKey(int, 90, "seconds before the time limit SLURM sends USR2 (the job "
                                  "checkpoints and requeues itself)", 1),
    "setup": ResourceKey(list, None, "shell lines run before the job (e.g. module load cuda)"),
}
LOCAL_KEYS = {"parallel": ResourceKey(int, 0, "runs at once (0: one per CPU core)", 0)}


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
        keys = [k for a in self.axes for k in a.keys]
        return keys + list(dict.fromkeys(k for e in self.include for k in e if k not in keys))


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


# ------------------------------------------------------------------------------------------------
# Loading and validation
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def config_keys() -> tuple[str, ...]:
    return tuple(k for k, _, _ in describe_fields())


def load_spec(path: str | Path, overrides: list[str] | None = None) -> Spec:
    """Read and validate a spec file; `overrides` are `key=value` applied to every run (a swept key
    cannot be overridden: that would silently collapse the grid)."""
    path = Path(path)
    text = read_text(path, SpecError)
    try:
        raw = safe_load_strict(text)
    except yaml.YAMLError as e:
        raise SpecError(yaml_error(path, e)) from None
    if raw is None:
        raise SpecError(f"{path}: the file is empty; a spec needs at least `name`")
    return parse_spec(raw, source=str(path), base_dir=path.parent, overrides=overrides,
                      sha256=hashlib.sha256(text.encode()).hexdigest())


def parse_spec(raw: Any, source: str = "<dict>", base_dir: Path | None = None,
               overrides: list[str] | None = None, sha256: str | None = None) -> Spec:
    """Validate a spec mapping. Raises `SpecError` (one line) on the first problem."""
    def err(msg: str) -> SpecError:
        return SpecError(f"{source}: {msg}")

    if not isinstance(raw, dict):
        raise err(f"expected a mapping with keys {', '.join(TOP_KEYS)}, got {type(raw).__name__}")
    for k in raw:
        if k not in TOP_KEYS:
            raise err(f"unknown key {k!r}; allowed: {', '.join(TOP_KEYS)}" + suggest(str(k), list(TOP_KEYS)))
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(NAME_RE, name):
        raise err(f"name = {name!r}: required; letters, digits and _ . + - (it names the sweep "
                  f"directory)")
    if not isinstance(raw.get("description", ""), str):
        raise err("description: expected a string")

    # ---- base: a config file or a preset name
    base: dict = {}
    b = raw.get("base")
    if b is not None:
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
        elif b in list_presets():
            base = {"algo": {"preset": b}}
        else:
            raise err(f"base = {b!r}: not a .yaml file nor a preset; presets are "
                      f"{', '.join(list_presets())}" + suggest(b, list_presets()))

    # ---- set (+ command-line overrides): fixed dotted keys
    fixed = _dotted_mapping(raw.get("set", {}), "set", err, allow_lists=True)
    for k, v in fixed.items():
        _check_key(k, "set", err, swept=False)
        if k.startswith("slurm."):
            _check_resource(k, v, f"set.{k}", err)
    over = _flatten(parse_overrides(overrides or []), "") if overrides else {}

    # ---- grid, zip, seeds -> axes
    axes: list[Axis] = []
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise err(f"grid = {grid!r}: expected a mapping of dotted key -> list of values")
    for k, vals in grid.items():
        where = f"grid.{k}"
        _check_key(str(k), "grid", err, swept=True)
        if not isinstance(vals, list) or not vals:
            raise err(f"{where} = {vals!r}: expected a non-empty list of values")
        axes.append(Axis((k,), tuple((v,) for v in vals), where))
    zips = raw.get("zip", [])
    if not isinstance(zips, list):
        raise err(f"zip = {zips!r}: expected a list of groups (mappings of key -> list)")
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
    if "seeds" in raw:
        s = raw["seeds"]
        if isinstance(s, int) and not isinstance(s, bool) and s >= 1:
            s = list(range(s))
        if (not isinstance(s, list) or not s
                or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in s)):
            raise err(f"seeds = {raw['seeds']!r}: a list of integers >= 0, or a count >= 1")
        if len(set(s)) != len(s):
            raise err(f"seeds = {s!r}: a seed is listed twice")
        axes.append(Axis(("run.seed",), tuple((x,) for x in s), "seeds"))

    # one key, one place
    seen: dict[str, str] = {k: f"set.{k}" for k in fixed}
    for a in axes:
        for j, k in enumerate(a.keys):
            where = f"{a.where}.{k}" if a.where.startswith("zip[") else a.where
            if k in seen:
                raise err(f"{where}: also given in {seen[k]}; a key is set in one place only")
            seen[k] = where
            if k.startswith("slurm."):
                for t in a.values:
                    _check_resource(k, t[j], where, err)
    for k, v in over.items():
        if k in seen and not seen[k].startswith("set."):
            raise err(f"override {k}={v!r}: {k} is swept by {seen[k]}; edit the spec instead")
        _check_key(k, "override", err, swept=False)
        if k.startswith("slurm."):
            _check_resource(k, v, f"override {k}", err)
        fixed[k] = v
        seen.setdefault(k, "override")

    # ---- include: extra points (a single-choice ablation next to a grid of presets)
    extra = raw.get("include", [])
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
                _check_resource(k, v, f"{where}.{k}", err)
        for a in axes:
            named = [k for k in a.keys if k in point]
            if named and len(named) != len(a.keys):
                raise err(f"{where}: names {', '.join(named)} of {a.where} but not "
                          f"{', '.join(k for k in a.keys if k not in point)}; give all of a zip "
                          f"group's keys or none")
        include.append(point)

    # ---- exclude rules
    swept = {k for a in axes for k in a.keys} | {k for point in include for k in point}
    rules = raw.get("exclude", [])
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

    # ---- executor and resources
    executor = raw.get("executor", "local")
    if executor not in EXECUTORS:
        raise err(f"executor = {executor!r}: allowed values are {', '.join(EXECUTORS)}"
                  + suggest(str(executor), list(EXECUTORS)))
    slurm = _resource_block(raw.get("slurm", {}), "slurm", RESOURCES, err)
    local = _resource_block(raw.get("local", {}), "local", LOCAL_KEYS, err)

    # ---- run_name: a readable run.name from swept or set values
    run_name = raw.get("run_name")
    if run_name is not None:
        if not isinstance(run_name, str) or not run_name.strip():
            raise err(f"run_name = {run_name!r}: a template like '{{label.loss}}-{{model.scale}}-s{{run.seed}}'")
        if "run.name" in seen:
            raise err(f"run_name: run.name is also given in {seen['run.name']}; use one of them")
        known = sorted(seen)
        for k in re.findall(r"\{([^{}]*)\}", run_name):
            if k not in seen:
                raise err(f"run_name: {{{k}}} is neither swept nor set in this spec; use one of "
                          f"{', '.join(known)}" + suggest(k, known))

    max_runs = raw.get("max_runs", MAX_RUNS)
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise err(f"max_runs = {max_runs!r}: an integer >= 1 (default {MAX_RUNS})")
    size = 1
    for a in axes:
        size *= len(a.values)
    for point in include:
        extra = 1
        for a in _crossed(axes, point):
            extra *= len(a.values)
        size += extra
    if size > max_runs:  # checked before expanding anything: a huge grid fails at once
        dims = " x ".join(f"{len(a.values)} ({a.where})" for a in axes)
        raise err(f"the grid has {size:,} points ({dims}), over max_runs = {max_runs:,}; shrink "
                  f"it, or set max_runs in the spec if you mean it")

    if sha256 is None:
        sha256 = hashlib.sha256(yaml.safe_dump(raw, sort_keys=True).encode()).hexdigest()
    return Spec(name=name, raw=raw, source=source, sha256=sha256, base=base, fixed=fixed,
                axes=axes, exclude=exclude, include=include, executor=executor, slurm=slurm,
                local=local, run_name=run_name)


def _flatten(d: dict, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _dotted_mapping(d: Any, where: str, err, allow_lists: bool) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise err(f"{where} = {d!r}: expected a mapping of dotted key -> value")
    out = _flatten(d, "")  # `set: {optim: {lr: 1e-3}}` and `set: {optim.lr: 1e-3}` mean the same
    for k, v in out.items():
        if isinstance(v, list) and not (allow_lists and k == "slurm.setup"):
            raise err(f"{where}.{k} = {v!r}: a single value (to sweep values, use grid or zip)")
    return out


def _check_key(key: str, where: str, err, swept: bool) -> None:
    """A dotted config key, a `slurm.<resource>` key or a `label.<name>` (an annotation carried in
    the run table and usable in run_name, not part of the config); never one the sweep owns."""
    if key.startswith("label."):
        if not re.fullmatch(r"label\.[A-Za-z_][A-Za-z0-9_]*", key):
            raise err(f"{where}.{key}: a label is 'label.<identifier>'")
        return
    if key.startswith("slurm."):
        r = key[len("slurm."):]
        if r not in RESOURCES:
            raise err(f"{where}.{key}: unknown resource; allowed: "
                      + ", ".join(f"slurm.{x}" for x in RESOURCES) + suggest(r, list(RESOURCES)))
        return
    keys = config_keys()
    if key not in keys:
        raise err(f"{where}.{key}: unknown config key" + (suggest(key, list(keys)) or
                  f"; see `rlablate train --help` for the {len(keys)} keys"))
    if key in RESERVED and (swept or RESERVED[key]):
        why = RESERVED[key] or "a sweep lives in one directory"
        raise err(f"{where}.{key}: cannot be {'swept' if swept else 'set'} here ({why})")


def _check_resource(key: str, value: Any, where: str, err) -> None:
    r = RESOURCES[key[len("slurm."):]]
    _check_value(value, r, where, err)


def _check_value(value: Any, r: ResourceKey, where: str, err) -> None:
    if value is None and r.default is None:
        return
    kinds = r.kind if isinstance(r.kind, tuple) else (r.kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise err(f"{where} = {value!r}: expected {names} ({r.help})")
    if r.lo is not None and value < r.lo:
        raise err(f"{where} = {value!r}: must be >= {r.lo} ({r.help})")
    if r.kind is list and not all(isinstance(x, str) for x in value):
        raise err(f"{where} = {value!r}: expected a list of shell lines (strings)")


def _resource_block(d: Any, where: str, schema: dict[str, ResourceKey], err) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise err(f"{where} = {d!r}: expected a mapping; keys: {', '.join(schema)}")
    out = {k: r.default for k, r in schema.items()}
    for k, v in d.items():
        if k not in schema:
            raise err(f"{where}.{k}: unknown key; allowed: {', '.join(schema)}" + suggest(str(k), list(schema)))
        _check_value(v, schema[k], f"{where}.{k}", err)
        out[k] = v
    return out


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


# ------------------------------------------------------------------------------------------------
# Expansion
# ------------------------------------------------------------------------------------------------
def _nest(dotted: dict[str, Any]) -> dict:
    out: dict = {}
    for k, v in dotted.items():
        node = out
        *head, last = k.split(".")
        for p in head:
            node = node.setdefault(p, {})
        node[last] = v
    return out


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
            cfg_part["run.name"] = _render(spec.run_name, {**spec.fixed, **point})
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


def _crossed(axes: list[Axis], entry: dict) -> list[Axis]:
    """The axes an `include` entry is crossed with: those it names no key of."""
    return [a for a in axes if not any(k in entry for k in a.keys)]


def _points(spec: Spec):
    """The grid's points, then each `include` entry crossed with the axes it does not name."""
    for combo in itertools.product(*(a.values for a in spec.axes)):
        yield {k: v for a, vals in zip(spec.axes, combo) for k, v in zip(a.keys, vals)}
    for entry in spec.include:
        free = _crossed(spec.axes, entry)
        for combo in itertools.product(*(a.values for a in free)):
            # the entry's keys in grid order first, then its own, then the crossed axes
            point = {k: entry[k] for a in spec.axes for k in a.keys if k in entry}
            point.update({k: v for k, v in entry.items() if k not in point})
            point.update({k: v for a, vals in zip(free, combo) for k, v in zip(a.keys, vals)})
            yield point


def _render(template: str, values: dict[str, Any]) -> str:
    """'{label.loss}-{model.path}-s{run.seed}' -> 'dapo-Qwen2.5-7B-s0' (a path gives its last part)."""
    def sub(m: re.Match) -> str:
        v = values[m.group(1)]
        return str(v).rstrip("/").rsplit("/", 1)[-1] if isinstance(v, str) else str(v)
    return re.sub(r"\{([^{}]*)\}", sub, template)
