"""A non-finite reward, advantage or loss stops the run with status `diverged` (exit 3)."""

from __future__ import annotations

import torch

from .. import distributed, faults


class Diverged(RuntimeError):
    """A non-finite reward, advantage or loss: the run stops with status `diverged`."""

    def __init__(self, what: str, step: int):
        super().__init__(f"non-finite {what} at step {step}")
        self.step = step


def check_finite(name: str, t: torch.Tensor, step: int) -> None:
    # every rank stops together; poison is test-only (see faults.py)
    if distributed.any_rank(not bool(torch.isfinite(faults.poison(name, step, t)).all())):
        raise Diverged(name, step)
