"""retire: (passes (N,), attempts (N,), *, threshold) -> (N,) bool, the items of a finite, cycling
training set that are never drawn again.

`passes[i]` / `attempts[i]` count the correct / all sampled responses of item i over the whole run
so far (every sampled group, kept or filtered). Property: active (the entry retires something, so
it needs a finite training set, `task.train_items > 0`: an infinite stream never repeats an item).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

RETIREMENTS = Registry("algo.retire", active=False)


@RETIREMENTS.register("none")
def retire_nothing(passes: torch.Tensor, attempts: torch.Tensor, *, threshold: float) -> torch.Tensor:
    """Every item stays in the cycle (GRPO, Shao et al. 2024, arXiv 2402.03300; every epoch revisits
    every prompt)."""
    return torch.zeros(len(passes), dtype=torch.bool)


@RETIREMENTS.register("no_positive", active=True)
def retire_no_positive(passes: torch.Tensor, attempts: torch.Tensor, *,
                       threshold: float) -> torch.Tensor:
    """No-Positive-Resampling (ScaleRL, Khatri et al. 2025, arXiv 2510.13786, Sec. 3.2): an item
    whose historical pass rate passes_i / attempts_i >= threshold (ScaleRL 0.9) is permanently
    removed from later epochs. An item never sampled is kept."""
    seen = attempts > 0
    rate = passes.double() / attempts.clamp(min=1).double()
    return seen & (rate >= threshold)
