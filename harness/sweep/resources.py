"""What a run of a sweep asks the scheduler for: the `slurm:` and `local:` keys of a spec, as tables
of typed keys with defaults, and the one check every place that sets one goes through.

    slurm: {partition: gpu, time_min: 60, cpus_per_task: 4, gpus_per_node: 1, mem_gb: 32}
    local: {parallel: 2}

`slurm.<key>` may also appear in `set`, `grid`, `zip` and `include` (per-group resources); the
expanded run carries the merged dict (`Run.resources`), which picks its job array and the
submitit parameters (`harness.sweep.executors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..registry import suggest


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

Err = Callable[[str], Exception]  # builds the spec's one-line error (`<spec>: <msg>`)


def check_value(value: Any, r: ResourceKey, where: str, err: Err) -> None:
    """`value` has the key's type and range (None: allowed where the default is None)."""
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


def check_resource_key(key: str, where: str, err: Err) -> None:
    """`key` is `slurm.<one of RESOURCES>`."""
    r = key[len("slurm."):]
    if r not in RESOURCES:
        raise err(f"{where}.{key}: unknown resource; allowed: "
                  + ", ".join(f"slurm.{x}" for x in RESOURCES) + suggest(r, list(RESOURCES)))


def check_resource(key: str, value: Any, where: str, err: Err) -> None:
    """The value of a `slurm.<key>` set, swept or overridden somewhere in the spec."""
    check_value(value, RESOURCES[key[len("slurm."):]], where, err)


def resource_block(d: Any, where: str, schema: dict[str, ResourceKey], err: Err) -> dict[str, Any]:
    """A spec's `slurm:` or `local:` mapping, checked and completed with the defaults."""
    if not isinstance(d, dict):
        raise err(f"{where} = {d!r}: expected a mapping; keys: {', '.join(schema)}")
    out = {k: r.default for k, r in schema.items()}
    for k, v in d.items():
        if k not in schema:
            raise err(f"{where}.{k}: unknown key; allowed: {', '.join(schema)}" + suggest(str(k), list(schema)))
        check_value(v, schema[k], f"{where}.{k}", err)
        out[k] = v
    return out


def describe(res: dict) -> str:
    """'partition=debug, time_min=60, ...': the resources a job array asked for (launch output)."""
    keys = ("partition", "time_min", "cpus_per_task", "gpus_per_node", "mem_gb")
    return ", ".join(f"{k}={res[k]}" for k in keys if res.get(k) is not None)
