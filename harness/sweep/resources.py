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


# sbatch(1), --signal: "Due to the resolution of event handling by Slurm, the signal may be sent up
# to 60 seconds earlier than specified." A job needs some time to start (python, torch, the
# handlers) before a USR2 can do anything but kill it.
SIGNAL_EARLY_S = 60
START_S = 30


def check_signal_lead(res: dict[str, Any], err: Err) -> None:
    """A SLURM job's USR2 cannot come before the job has started: `time_min` * 60 -
    `signal_delay_s` - 60 s (how early SLURM may send it) must leave `START_S`. With less, the
    signal can reach the job's task before Python has installed a handler, and the job dies on its
    first attempt instead of checkpointing (a 3-minute limit with a 150 s delay did, in CI)."""
    t, d = res["time_min"], res["signal_delay_s"]
    lead = t * 60 - d - SIGNAL_EARLY_S
    if lead < START_S:
        most = t * 60 - SIGNAL_EARLY_S - START_S
        raise err(f"slurm.signal_delay_s = {d} with slurm.time_min = {t}: the USR2 may come "
                  f"{max(lead, 0)} s into the job (SLURM sends it up to {SIGNAL_EARLY_S} s early), "
                  f"before the job has started (it needs {START_S} s); allowed: signal_delay_s <= "
                  f"{most}" if most >= 1 else
                  f"slurm.time_min = {t} is too short for a USR2 before the limit (SLURM sends it "
                  f"up to {SIGNAL_EARLY_S} s early, and a job needs {START_S} s to start); "
                  f"allowed: time_min >= 2")


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
