"""What a config's values cannot say by themselves: whether this machine has the device it asks
for and whether the files it names exist. `check_environment(cfg)` raises `ConfigError` (one line)
on the first problem.

It is called by the commands that run a config on this machine (`rlablate train`, a local or
debug sweep launch) before anything is written, not by `load_config`: `rlablate config` and a
SLURM sweep's expansion resolve configs on a login node without the GPU (or the scratch files)
their runs will get.
"""

from __future__ import annotations

from pathlib import Path

from ..engines import ENGINES
from ..scales import from_path
from .schema import Config, ConfigError

DATA_KEYS = ("train_path", "in_dist_path", "held_out_path")
DATA_MAP_KEYS = ("held_out_paths",)  # mappings of a name to a data file: task.<key>.<name>


def _looks_local(path: str) -> bool:
    """A local path, not a hub id ('org/name': one slash, no leading '/', '.' or '~')."""
    return path.startswith(("/", ".", "~")) or path.count("/") != 1


def cuda_available() -> bool:
    import torch  # only when a config asks for CUDA
    return torch.cuda.is_available()


def check_environment(cfg: Config, cuda: bool | None = None) -> None:
    """The device, model.path and the task's data files; `cuda` overrides the CUDA probe (tests)."""
    device, engine = cfg.run.device, ENGINES.meta(cfg.rollout.engine)
    if device == "cuda" or (device == "auto" and engine.needs_cuda):
        if not (cuda_available() if cuda is None else cuda):
            key = "run.device" if device == "cuda" else "rollout.engine"
            value = device if device == "cuda" else cfg.rollout.engine
            raise ConfigError(f"{key} = {value!r}: no CUDA device on this machine "
                              f"(torch.cuda.is_available() is false); use run.device = cpu"
                              + (" (or auto: CUDA when there is one)" if device == "cuda" else
                                 " and rollout.engine = hf"))
    path = cfg.model.path
    if from_path(cfg.model.scale) and path and _looks_local(path):
        p = Path(path).expanduser()
        if not p.is_dir():
            raise ConfigError(f"model.path = {path!r}: " + (
                "not a directory (from_pretrained needs the model's directory)" if p.exists()
                else "no such directory"))
    files = [(key, getattr(cfg.task, key)) for key in DATA_KEYS]
    files += [(f"{key}.{name}", path) for key in DATA_MAP_KEYS
              for name, path in getattr(cfg.task, key).items()]
    for key, value in files:
        if value and not Path(value).expanduser().is_file():
            raise ConfigError(f"task.{key} = {value!r}: " + (
                "not a file" if Path(value).exists() else "no such file")
                + " (a .jsonl or .parquet file: docs/tasks.md)")
