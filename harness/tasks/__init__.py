"""Tasks: name -> constructor (`TASKS`), one file per task behind the small interface of
`tasks.base` (nanochat's `tasks/`). `make_task(cfg)` builds the one `task.name` names.

Properties of each entry: `keys`, the task.* config keys it reads (the config rules refuse any
other task key that is not at its default: it would have no effect; `COMMON_KEYS` are read by
every task); `check`, the task's own combination rules, a pure `check(cfg) -> str | None` that
returns the one-line message of a broken rule (so tasks never import the config package);
`held_out_sets`, a pure `held_out_sets(cfg) -> names` of the sets `eval.held_out_sets` may list
(extra held-out splits: a fixed table for the procedural tasks, the names `task.held_out_paths`
defines for math) and `held_out_sets_from`, where a reader finds them (the config error says it).
"""

from __future__ import annotations

from ..registry import Registry
from . import chain_sum, countdown, math_problems
from .base import SPLIT_SEED, Item, Task

COMMON_KEYS = ("name", "train_items")  # task.* keys every task reads (train_items: the loop)
# read by the RL loop only (train_items) or only by the RL streams (chain_sum's hard share): not
# part of the warm start's identity
RL_ONLY_KEYS = ("train_items", *chain_sum.HARD_KEYS)

TASKS = Registry("task.name", keys=(), check=None, held_out_sets=lambda cfg: (),
                 held_out_sets_from="")
TASKS.add("chain_sum", chain_sum.from_config, keys=chain_sum.KEYS, check=chain_sum.check,
          held_out_sets=lambda cfg: chain_sum.HELD_OUT_SETS)
TASKS.add("math", math_problems.from_config, keys=math_problems.KEYS, check=math_problems.check,
          held_out_sets=math_problems.held_out_sets,
          held_out_sets_from="; a math set is a file named in task.held_out_paths: {name: file}")
TASKS.add("countdown", countdown.from_config, keys=countdown.KEYS, check=countdown.check)


def make_task(cfg) -> Task:
    """The task named by `task.name` (the config has validated the name)."""
    return TASKS[cfg.task.name](cfg)


__all__ = ["COMMON_KEYS", "RL_ONLY_KEYS", "Item", "SPLIT_SEED", "TASKS", "Task", "make_task"]
