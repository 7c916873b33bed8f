"""Files a run writes: atomically (write a temp file, fsync, rename), so a reader or a resumed run
never takes a half-written file as valid."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import torch


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


def atomic_torch_save(obj: Any, path: Path) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonable(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.item() if x.numel() == 1 else x.tolist()
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")


def clean_row(row: dict) -> dict:
    """Floats as plain floats; NaN/Inf become None (JSON has no NaN)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, torch.Tensor):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


class MetricsLog:
    """Append-only `metrics.jsonl`: one JSON object per line, flushed and fsynced per row."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, row: dict) -> None:
        line = json.dumps(clean_row(row), sort_keys=True, default=_jsonable)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[dict]:
        """All complete rows; a torn last line (a killed writer) is skipped."""
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def truncate_after(self, step: int) -> None:
        """Keep rows with step <= `step` (rewritten atomically): a resumed run then re-logs the
        steps after its checkpoint exactly once."""
        rows = [r for r in self.read() if r.get("step", -1) <= step]
        atomic_write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl) held for the block; released if the process dies."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
