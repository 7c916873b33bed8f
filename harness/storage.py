"""Every file rlablate writes or reads back: atomic writes (a temp file, fsync, rename), so a
reader or a resumed run never takes a half-written file as valid; JSON and JSONL records (a torn
last line of a killed writer is skipped); checkpoints with a checksum; advisory file locks.

One module for all of it: the run (`harness.loop`), the warm-start and tokenizer caches and the
sweep records (`harness.sweep`) share these helpers instead of keeping copies."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from . import faults
from .lazy import lazy_module

torch = lazy_module("torch")  # checkpoints only; `rlablate status` and --help never load it


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextlib.contextmanager
def _removed_on_error(tmp: Path) -> Iterator[None]:
    """A temp file that is not complete (disk full, read-only, an exception) is deleted, never
    left behind to be mistaken for data."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def remove_stale_tmp(directory: Path) -> list[Path]:
    """Delete temp files left by a killed writer (`.<name>.tmp<pid>`); call it holding the run lock."""
    gone = []
    for p in Path(directory).glob(".*.tmp*"):
        with contextlib.suppress(OSError):
            p.unlink()
            gone.append(p)
    return gone


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    tmp = _tmp(path)
    with _removed_on_error(tmp):
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


# ------------------------------------------------------------------------------------ checkpoints
class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be trusted (truncated, corrupted, checksum mismatch)."""


def state_digest(obj: Any) -> str:
    """sha256 over a checkpoint's content: every tensor's dtype, shape and bytes, and the repr of
    every other value, walking dicts in key order. Stored in the checkpoint as `sha256`; a file
    whose content does not hash to it (a flipped byte inside a tensor that torch.load cannot see)
    is refused."""
    h = hashlib.sha256()

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            t = x.detach().to("cpu").contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}:".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(x, dict):
            h.update(b"{")
            for k in sorted(x, key=repr):
                h.update(repr(k).encode() + b":")
                walk(x[k])
            h.update(b"}")
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                walk(v)
            h.update(b"]")
        else:
            h.update(repr(x).encode() + b";")
    walk(obj)
    return h.hexdigest()


def save_checkpoint_file(obj: dict, last: Path, prev: Path | None = None, step: int = -1) -> None:
    """Write `obj` (with its `sha256`) to a temp file, fsync it, then (if `prev`) move the current
    `last` to `prev`, and rename the temp file to `last`. At every instant `last` or `prev` is a
    complete, verified checkpoint; a failed write (disk full) deletes its temp file and leaves both."""
    last = Path(last)
    tmp = _tmp(last)
    obj = {**obj, "sha256": state_digest(obj)}
    with _removed_on_error(tmp):
        with open(tmp, "wb") as f:
            try:
                torch.save(obj, f)
            except RuntimeError as e:  # torch wraps a failed write (ENOSPC): surface the OSError
                if isinstance(e.__context__, OSError):
                    raise e.__context__ from None
                raise
            f.flush()
            if faults.armed("checkpoint", step) == "kill":  # test-only: a torn temp file
                f.truncate(f.tell() // 2)
                os.fsync(f.fileno())
                faults.kill()
            os.fsync(f.fileno())
        if prev is not None and last.exists():
            os.replace(last, prev)
            faults.point("rotate", step)
        os.replace(tmp, last)
    _fsync_dir(last.parent)


def load_checkpoint_file(path: Path) -> dict:
    """torch.load (weights_only: a checkpoint cannot run code) and verify its checksum. Raises
    CheckpointError with one line saying what is wrong."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:120]
        raise CheckpointError(f"{path}: unreadable ({type(e).__name__}: {first})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: not a checkpoint (a {type(obj).__name__})")
    want = obj.pop("sha256", None)
    if want is not None and state_digest(obj) != want:
        raise CheckpointError(f"{path}: checksum mismatch (corrupted content)")
    return obj


def _fsync_dir(d: Path) -> None:
    """Make renames in `d` durable (a crash after the rename must not bring the old name back)."""
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


def _write_all(f, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[f.write(view):]


class MetricsLog:
    """Append-only `metrics.jsonl`: one JSON object per line, flushed and fsynced per row."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, row: dict) -> None:
        """One line, fsynced. A failed write (disk full) is cut back to the last complete row, so
        no torn line sits before rows a resumed run appends later."""
        line = (json.dumps(clean_row(row), sort_keys=True, default=_jsonable) + "\n").encode()
        with open(self.path, "ab", buffering=0) as f:  # unbuffered: nothing left to flush on error
            start = f.seek(0, os.SEEK_END)
            try:
                if "kind" in row:  # test-only hook: a writer killed halfway through a row
                    faults.torn("metrics" if row["kind"] == "train" else "eval", row["step"], f, line)
                else:
                    _write_all(f, line)
                os.fsync(f.fileno())
            except BaseException:
                with contextlib.suppress(OSError):
                    f.truncate(start)
                raise

    def read(self) -> list[dict]:
        """All complete rows; a torn last line (a killed writer) is skipped."""
        return read_jsonl(self.path)

    def truncate_after(self, step: int) -> None:
        """Keep rows with step <= `step` (rewritten atomically): a resumed run then re-logs the
        steps after its checkpoint exactly once."""
        rows = [r for r in self.read() if r.get("step", -1) <= step]
        atomic_write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


class LockHeld(RuntimeError):
    """`file_lock(..., blocking=False)` found the lock held by another process."""


@contextlib.contextmanager
def file_lock(path: Path, blocking: bool = True,
              on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock (fcntl) held for the block; released if the process dies.
    blocking=False raises `LockHeld` at once instead of waiting; `on_wait()` is called once when
    a blocking caller finds the lock held and is about to wait (to say so)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                raise LockHeld(str(path)) from None
            if on_wait is not None:
                on_wait()
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def lock_held(path: Path) -> bool:
    """True when a live process holds the lock file `path` (the kernel drops a lock when its
    process dies, so a killed holder never looks alive)."""
    path = Path(path)
    if not path.exists():
        return False
    with open(path, "r") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return False


# ------------------------------------------------------------------------------------ JSON records
def read_json(path: Path) -> dict | None:
    """A JSON file, or None when it is missing or not (yet) valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def read_jsonl(path: Path) -> list[dict]:
    """Every complete line of a JSONL file ([] when missing); a torn line is skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line
    return out


def append_jsonl(path: Path, row: dict) -> None:
    """Append one row as one line. A single write of one line: appends from several processes do
    not interleave (records shared by a sweep's jobs; a run's metrics use `MetricsLog`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")


def last_step(metrics: Path) -> int | None:
    """The step of the last complete row of a metrics.jsonl, reading only its tail."""
    try:
        with open(metrics, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None
