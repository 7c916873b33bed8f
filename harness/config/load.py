"""The generic strict loader: YAML reading, dotted overrides, presets, type coercion.

A run's config is resolved in this order, each layer overriding the previous one explicitly:

    dataclass defaults  ->  algo preset (harness/presets/<name>.yaml)  ->  YAML file  ->  CLI `a.b=v`

Unknown keys, wrong types and out-of-range values raise `ConfigError` with one line naming the key,
the bad value and what is allowed; then `rules.validate` checks the combinations. Nothing here knows
a section's meaning: the schema (`schema.py`) says what each field is.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from ..registry import suggest
from .rules import validate
from .schema import AlgoCfg, Config, ConfigError, is_section, type_hints

PRESET_DIR = Path(__file__).parent.parent / "presets"


def _coerce(key: str, value: Any, tp: Any, meta: dict) -> Any:
    """Check `value` against the annotation `tp`; return it (numeric strings become numbers)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(key, value, args[0], meta)
    if origin is Literal:
        allowed = list(typing.get_args(tp))
        if value not in allowed:
            raise ConfigError(f"{key} = {value!r}: allowed values are {', '.join(map(str, allowed))}"
                              + suggest(str(value), [str(a) for a in allowed]))
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: expected true or false")
        return value
    if tp in (int, float):
        if isinstance(value, str):  # YAML reads 3e-4 as a string; CLI values are strings
            try:
                value = float(value) if tp is float else int(value)
            except ValueError:
                raise ConfigError(f"{key} = {value!r}: expected a {tp.__name__}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r}: expected a {tp.__name__}")
        if tp is int and isinstance(value, float):
            if not value.is_integer():
                raise ConfigError(f"{key} = {value!r}: expected an integer")
            value = int(value)
        if tp is float:
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"{key} = {value!r}: expected a finite number")
        lo, hi = meta.get("lo"), meta.get("hi")
        too_low = lo is not None and (value < lo or (meta.get("lo_open") and value == lo))
        if too_low or (hi is not None and value > hi):
            parts = []
            if lo is not None:
                parts.append(f"{'>' if meta.get('lo_open') else '>='} {lo}")
            if hi is not None:
                parts.append(f"<= {hi}")
            raise ConfigError(f"{key} = {value!r}: must be {' and '.join(parts)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: expected a string")
        return value
    if tp is dict or origin is dict:  # a mapping of names to strings (task.held_out_paths)
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                  for k, v in value.items()):
            raise ConfigError(f"{key} = {value!r}: expected a mapping of names to non-empty "
                              f"strings, e.g. {{far: data/far.jsonl}}")
        return dict(value)
    if tp is list or origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: expected a list")
        return value
    raise ConfigError(f"{key}: unsupported field type {tp}")  # pragma: no cover - programming error


def _apply(obj: Any, data: dict, prefix: str = "") -> None:
    """Set fields of dataclass `obj` from the nested dict `data`, strictly."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} = {data!r}: expected a mapping of keys")
    hints = type_hints(type(obj))
    fields = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in fields:
            names = list(fields)
            if isinstance(key, str) and "." in key:  # `optim.lr: 3e-4` in a YAML file
                head, _, rest = key.partition(".")
                raise ConfigError(
                    f"key {full!r}: a dotted key is command-line syntax ({full}=...); in a YAML "
                    f"file nest it: '{prefix}{head}:' then '  {rest}: ...' on the next line")
            raise ConfigError(
                f"unknown key {full!r}; allowed under {prefix.rstrip('.') or 'the top level'}: "
                f"{', '.join(names)}" + suggest(str(key), names).replace("'", f"'{prefix}", 1))
        tp = hints[key]
        if is_section(tp):
            _apply(getattr(obj, key), value, f"{full}.")
        else:
            setattr(obj, key, _coerce(full, value, tp, fields[key].metadata))


def safe_load_strict(text: str):
    """yaml.safe_load (plain data only: never yaml.load, a config must not construct objects), and
    a key given twice in one mapping is an error (YAML would silently keep the last one)."""
    data = yaml.safe_load(text)
    todo = [yaml.compose(text, Loader=yaml.SafeLoader)]
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                    if k.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {k.value!r} is given twice", k.start_mark)
                    seen.add(k.value)
                todo.append(v)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
    return data


def read_text(path: Path, err) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise err(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise err(f"{path}: not a text file (not UTF-8)") from None


def yaml_error(path, e: yaml.YAMLError) -> str:
    where = getattr(e, "problem_mark", None)
    at = f" (line {where.line + 1})" if where else ""
    return f"{path}: not valid YAML{at}: {getattr(e, 'problem', e)}"


def read_yaml_file(path: Path, err) -> tuple[str, Any]:
    """(text, data) of a YAML file, strictly loaded; an unreadable file or invalid YAML raises
    `err` with one line (ConfigError for configs, SpecError for sweep specs)."""
    text = read_text(path, err)
    try:
        return text, safe_load_strict(text)
    except yaml.YAMLError as e:
        raise err(yaml_error(path, e)) from None


# Top-level keys of a sweep spec that a run config never has (harness/sweep/spec.py TOP_KEYS).
SPEC_ONLY_KEYS = ("base", "grid", "zip", "seeds", "exclude", "include", "executor", "slurm",
                  "local", "run_name", "max_runs", "description", "name", "set")


def _read_yaml(path: Path) -> dict:
    _, data = read_yaml_file(path, ConfigError)
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    sections = {f.name for f in dataclasses.fields(Config)} | {"preset"}
    spec_keys = [k for k in data if k in SPEC_ONLY_KEYS]
    if spec_keys and not any(k in sections for k in data):
        raise ConfigError(f"{path}: this is a sweep spec (keys {', '.join(map(str, spec_keys))}), "
                          f"not a run config; run it with `rlablate sweep {path}` (`rlablate "
                          f"sweep {path} --dry-run` lists its runs)")
    return data


def parse_overrides(items: list[str]) -> dict:
    """['optim.lr=3e-4', 'train.steps=10'] -> nested dict. Values are parsed as YAML scalars."""
    out: dict = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected key=value, e.g. optim.lr=3e-4")
        key, raw = item.split("=", 1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            raise ConfigError(f"override {item!r}: {key!r} is not a dotted key like optim.lr")
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is both a value and a section")
        node[parts[-1]] = value
    return out


def repeated_overrides(items: list[str]) -> list[str]:
    """One note per key typed twice on a command line (the last one wins, as in every layer of
    the config; programs that build override lists, e.g. the tests' TINY + [...], layer keys on
    purpose). The CLI prints the notes, so a repeated key is never silent."""
    given: dict[str, str] = {}
    notes = []
    for item in items:
        key = item.split("=", 1)[0]
        if "=" in item and key in given and given[key] != item:
            notes.append(f"{key} is given twice ({given[key]!r}, then {item!r}); the last one wins")
        given[key] = item
    return notes


def deep_merge(a: dict, b: dict) -> dict:
    """`b` over `a`, recursively for nested mappings (neither input is modified)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> dict:
    """A preset is data: a YAML mapping of `algo` keys (and nothing else). Read once per process
    (sweeps resolve thousands of configs); callers get their own copy."""
    return dict(_load_preset_cached(name))


@functools.lru_cache(maxsize=None)
def _load_preset_cached(name: str) -> dict:
    if name == "none":
        return {}
    if name not in list_presets():
        raise ConfigError(f"algo.preset = {name!r}: allowed values are {', '.join(list_presets())}, "
                          f"none" + suggest(name, list_presets()))
    data = _read_yaml(PRESET_DIR / f"{name}.yaml")
    bad = [k for k in data if k not in {f.name for f in dataclasses.fields(AlgoCfg)}]
    if bad:  # pragma: no cover - a shipped preset is checked by the tests
        raise ConfigError(f"preset {name}: unknown algo key {bad[0]!r}")
    return data


def build_config(data: dict | None = None) -> Config:
    """Resolve defaults <- preset <- `data`, check every key, value and combination."""
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config = {data!r}: expected a mapping of config keys")
    if "preset" in data:  # shorthand: `preset: dapo` / `preset=dapo` is `algo.preset`
        algo = data.get("algo", {})
        if isinstance(algo, dict) and "preset" in algo:
            raise ConfigError(f"preset = {data['preset']!r}: also given as algo.preset = "
                              f"{algo['preset']!r}; set one of them")
        data = {**data, "algo": {**(algo if isinstance(algo, dict) else {}), "preset": data["preset"]}}
        del data["preset"]
    algo = data.get("algo", {})
    if not isinstance(algo, dict):
        raise ConfigError(f"algo = {algo!r}: expected a mapping of keys")
    preset_name = algo.get("preset", AlgoCfg.preset)
    if not isinstance(preset_name, str):
        raise ConfigError(f"algo.preset = {preset_name!r}: expected a string")
    if "deviates_from_preset" in algo:
        raise ConfigError("algo.deviates_from_preset is derived from the config; do not set it")
    preset = load_preset(preset_name)
    cfg = Config()
    _apply(cfg, {"algo": preset})
    _apply(cfg, data)
    base = Config()
    _apply(base, {"algo": preset})
    cfg.algo.deviates_from_preset = sorted(
        k for k in algo if k != "preset" and getattr(cfg.algo, k) != getattr(base.algo, k))
    validate(cfg)
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """The one entry point: YAML file (optional) plus dotted CLI overrides -> a valid Config."""
    data = _read_yaml(Path(path)) if path else {}
    if overrides:
        data = deep_merge(data, parse_overrides(overrides))
    return build_config(data)


def config_from_dict(d: dict) -> Config:
    """Rebuild a Config from a saved resolved config (config.yaml of a run)."""
    d = json.loads(json.dumps(d))  # deep copy
    d.get("algo", {}).pop("deviates_from_preset", None)
    # A saved record already contains the preset's values; re-applying the preset is a no-op.
    return build_config(d)



def dump_yaml(cfg: Config) -> str:
    """The resolved config as YAML (every field, defaults included): the run's config.yaml."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=False)
