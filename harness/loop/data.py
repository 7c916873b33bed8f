"""The training prompts: the task's own stream, or a finite, cycling training set with per-item
history (for prompt retirement, `algo.retire`).

`task.train_items = 0`: `take` is the task's stream (`task.take("train", cursor, n)`), exactly as
before; nothing is recorded. `task.train_items = N > 0`: the training set is the stream's first N
items, visited in passes, each pass a permutation seeded by (run.seed, pass); the cursor counts
positions in that endless cycle, so it stays one integer. Every sampled response's score is added
to its item's history (`passes`, `attempts`), and the retirement choice (`algo.retire`, a registered
function of that history) says which items are skipped from then on. The history is part of the
checkpoint (`state_dict`), so a resumed run draws and retires exactly as an uninterrupted one.
"""

from __future__ import annotations

import torch

from .. import algos


class TrainSet:
    def __init__(self, task, size: int, seed: int, retire: str, threshold: float):
        self.task, self.size, self.seed = task, size, seed
        self._retire = algos.RETIREMENTS[retire]
        self.threshold = threshold
        self.items = task.take("train", 0, size)[0] if size else []
        self.passes = torch.zeros(size, dtype=torch.long)
        self.attempts = torch.zeros(size, dtype=torch.long)
        self._perms: dict[int, list[int]] = {}

    @property
    def finite(self) -> bool:
        return self.size > 0

    def retired(self) -> torch.Tensor:
        return self._retire(self.passes, self.attempts, threshold=self.threshold)

    def _order(self, k: int) -> list[int]:
        """Pass k's visiting order: a permutation of 0..N-1 that is a pure function of (seed, k)."""
        if k not in self._perms:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + k)
            self._perms = {k: torch.randperm(self.size, generator=g).tolist()}  # keep one pass
        return self._perms[k]

    def take(self, cursor: int, n: int) -> tuple[list, list[int] | None, int]:
        """n items from position `cursor`: (items, their indices in the finite set or None, new
        cursor). A finite set skips retired items; if every item is retired the run cannot go on."""
        if not self.finite:
            items, cursor = self.task.take("train", cursor, n)
            return items, None, cursor
        retired = self.retired().tolist()
        if all(retired):
            raise RuntimeError(f"every one of the task.train_items = {self.size} training items is "
                               f"retired (historical pass rate >= algo.retire_threshold = "
                               f"{self.threshold}); nothing is left to train on")
        ids = []
        while len(ids) < n:
            i = self._order(cursor // self.size)[cursor % self.size]
            cursor += 1
            if not retired[i]:
                ids.append(i)
        return [self.items[i] for i in ids], ids, cursor

    def record(self, ids: list[int] | None, scores: torch.Tensor, group_size: int) -> None:
        """Add a step's scores (every sampled row, groups of `group_size` in draw order) to the
        history of the items they were sampled for."""
        if ids is None or not self.finite:
            return
        idx = torch.tensor(ids, dtype=torch.long).repeat_interleave(group_size)
        self.attempts.index_add_(0, idx, torch.ones_like(idx))
        self.passes.index_add_(0, idx, (scores > 0).long())

    def stats(self) -> dict:
        """Train-row columns (only with a finite set)."""
        if not self.finite:
            return {}
        return {"data/retired_items": int(self.retired().sum()),
                "data/seen_items": int((self.attempts > 0).sum())}

    def state_dict(self) -> dict:
        return {"passes": self.passes.clone(), "attempts": self.attempts.clone()} if self.finite else {}

    def load_state_dict(self, d: dict) -> None:
        if self.finite:
            self.passes.copy_(d["passes"])
            self.attempts.copy_(d["attempts"])
