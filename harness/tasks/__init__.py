"""Tasks: name -> constructor (`TASKS`), one file per task behind the small interface of
`tasks.base` (nanochat's `tasks/`). `make_task(cfg)` builds the one `task.name` names.

Properties of each entry: `keys`, the task.* config keys it reads (the config rules refuse any
other task key that is not at its default: it would have no effect).
"""

from __future__ import annotations

from ..registry import Registry
from . import chain_sum, math_problems
from .base import SPLIT_SEED, Item, Task

TASKS = Registry("task.name", keys=())
TASKS.add("chain_sum", chain_sum.from_config, keys=chain_sum.KEYS)
TASKS.add("math", math_problems.from_config, keys=math_problems.KEYS)


def make_task(cfg) -> Task:
    """The task named by `task.name` (the config has validated the name)."""
    return TASKS[cfg.task.name](cfg)


__all__ = ["Item", "SPLIT_SEED", "TASKS", "Task", "make_task"]
