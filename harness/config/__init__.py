"""Typed, strict run configuration, in three rooms:

- `schema.py`: the sections (dataclasses; each field with its default, help and range), the run's
  identity (`run_name`, `run_id`, `run_dir`) and `describe_fields` (the `--help` text);
- `load.py`: the generic strict loader, defaults <- algo preset <- YAML file <- CLI `a.b=v`
  (coercion, unknown keys, YAML reading, overrides, presets, `dump_yaml`);
- `rules.py`: the combination rules, one small check per section, asking the registries'
  properties (algos, engines, tasks, scales).

Imports go one way: load -> rules -> schema; rules -> algos/engines/tasks/scales registries
(which never import the config). Every bad input is one line naming the key, the value and what
is allowed (`ConfigError`); nothing is written before the config is valid, and the resolved config
(every field, defaults included) is saved with the run as the record of what ran.
"""

from .environment import check_environment
from .load import (PRESET_DIR, build_config, repeated_overrides, config_from_dict, deep_merge, dump_yaml, list_presets,
                   load_config, load_preset, parse_overrides, read_text, read_yaml_file,
                   safe_load_strict, yaml_error)
from .rules import validate
from .schema import (NAME_RE, AlgoCfg, Config, ConfigError, EvalCfg, EvalSetCfg, ModelCfg, OptimCfg,
                     RolloutCfg, RunCfg, TaskCfg, TrainCfg, WarmupCfg, describe_fields, identity)

__all__ = ["NAME_RE", "PRESET_DIR", "AlgoCfg", "Config", "ConfigError", "EvalCfg", "EvalSetCfg",
           "ModelCfg", "OptimCfg", "RolloutCfg", "RunCfg", "TaskCfg", "TrainCfg", "WarmupCfg",
           "build_config", "check_environment", "repeated_overrides", "config_from_dict", "deep_merge", "describe_fields", "dump_yaml", "identity",
           "list_presets", "load_config", "load_preset", "parse_overrides", "read_text", "read_yaml_file",
           "safe_load_strict", "validate", "yaml_error"]
