"""Fault injection, storage: a read-only results dir, a disk that fills up mid-run, truncated and
corrupted checkpoints. Each gives one clear line, leaves the previous good checkpoint in use and no
half-written file behind, and the run, once storage is back, ends identical to an uninterrupted one.

Disk full and a read-only file system are real: a small tmpfs mounted for the test (root only;
skipped with the reason otherwise) and always unmounted in `finally`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import torch

from faultlib import (KILLED, assert_same_as_reference, checksums, lines, overrides, run_child,
                      stale_tmp, train_reference, tree)
from harness.cli import main
from harness.config import load_config
from harness.storage import CheckpointError, load_checkpoint_file

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]
ROOT_USER = os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cache_dir) -> Path:
    return train_reference(tmp_path_factory.mktemp("ref"), cache_dir)


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A real size-limited file system at `path`, unmounted whatever happens."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", str(path)],
                   check=True, timeout=60)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=60)


def remount(path: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True, timeout=60)


def train_cli(over: list[str], capsys) -> tuple[int, str]:
    rc = main(["train", *over, "--quiet"])
    err = capsys.readouterr().err
    ours = [x for x in err.splitlines() if x.startswith("rlablate:")]
    return rc, "\n".join(ours)


needs_root = pytest.mark.skipif(not ROOT_USER, reason="mounting a tmpfs (disk full, read-only "
                                "file system) needs root; run the suite as root (make test does in CI)")


# ------------------------------------------------------------------------------------ read-only
def test_read_only_results_root_is_one_line_exit_1_and_creates_nothing(tmp_path, cache_dir, capsys):
    root = tmp_path / "ro"
    with contextlib.ExitStack() as stack:
        if ROOT_USER:  # root ignores permission bits: a read-only mount is the real thing
            stack.enter_context(tmpfs(root, "1m"))
            remount(root, "ro")
        else:
            root.mkdir()
            root.chmod(stat.S_IRUSR | stat.S_IXUSR)
            stack.callback(root.chmod, stat.S_IRWXU)
        rc, err = train_cli(overrides(root / "results", cache_dir), capsys)
        assert rc == 1
        assert err.count("\n") == 0 and err.startswith("rlablate: run failed: cannot write ")
        assert ("Read-only file system" if ROOT_USER else "Permission denied") in err, err
        assert tree(root) == []


@needs_root
def test_results_dir_turning_read_only_mid_run_changes_nothing_then_resumes(
        reference, tmp_path, cache_dir, capsys):
    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        over = overrides(mnt / "results", cache_dir)
        run_dir = load_config(None, over).run_dir()
        assert run_child(over, "kill=rollout:5") == KILLED
        before = checksums(run_dir)
        remount(mnt, "ro")
        rc, err = train_cli(over, capsys)
        assert rc == 1 and err.count("\n") == 0 and "Read-only file system" in err, err
        assert checksums(run_dir) == before  # nothing touched, nothing half-written
        remount(mnt, "rw")
        rc, err = train_cli(over, capsys)
        assert rc == 0, err
        assert_same_as_reference(run_dir, reference)


# ------------------------------------------------------------------------------------ disk full
@needs_root
def test_disk_full_mid_run_fails_cleanly_keeps_the_good_checkpoint_then_resumes(
        reference, tmp_path, cache_dir, capsys):
    """8 MiB hold two 3.2 MB checkpoints but not the temp file of a third: the run fails at a
    checkpoint with one line; last.pt and prev.pt stay valid, the temp file is gone, metrics.jsonl
    has no torn line. With space again the same command resumes and ends identical."""
    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        over = overrides(mnt / "results", cache_dir)
        run_dir = load_config(None, over).run_dir()
        rc, err = train_cli(over, capsys)
        assert rc == 1 and err.count("\n") == 0, err
        assert "No space left on device" in err and "run the same command again" in err, err
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "failed" and "No space left on device" in summary["error"]
        ck = run_dir / "checkpoints"
        assert stale_tmp(run_dir) == []                                 # no half-written file
        last = load_checkpoint_file(ck / "last.pt")                     # still complete and valid
        assert last["state"]["step"] == summary["step"] > 0
        assert load_checkpoint_file(ck / "prev.pt")["state"]["step"] == summary["step"] - 2
        for line in lines(run_dir / "metrics.jsonl"):
            json.loads(line)                                            # no torn row
        remount(mnt, "size=64m")
        rc, err = train_cli(over, capsys)
        assert rc == 0, err
        assert_same_as_reference(run_dir, reference)


# ------------------------------------------------------------------------------------ corruption
def flip_middle(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


DAMAGE = {
    "flipped-byte": lambda p: flip_middle(p),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 3]),
    "zero-length": lambda p: p.write_bytes(b""),
    "garbage": lambda p: p.write_bytes(b"not a checkpoint\n" * 100),
}


def test_a_flipped_byte_is_caught_by_the_checksum_not_by_torch_load(tmp_path, cache_dir):
    """Why checkpoints carry a sha256: torch.load reads a flipped byte inside a tensor silently."""
    over = overrides(tmp_path / "results", cache_dir)
    assert run_child(over, "kill=rollout:3") == KILLED
    p = load_config(None, over).run_dir() / "checkpoints" / "last.pt"
    flip_middle(p)
    torch.load(p, map_location="cpu", weights_only=True)  # loads without complaint
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        load_checkpoint_file(p)


@pytest.mark.parametrize("damage", [*DAMAGE, "both-flipped"])
def test_damaged_last_checkpoint_falls_back_to_prev_with_one_line(reference, tmp_path, cache_dir,
                                                                  capfd, damage):
    over = overrides(tmp_path / "results", cache_dir)
    run_dir = load_config(None, over).run_dir()
    assert run_child(over, "kill=rollout:5") == KILLED  # last.pt = step 4, prev.pt = step 2
    ck = run_dir / "checkpoints"
    assert load_checkpoint_file(ck / "prev.pt")["state"]["step"] == 2
    if damage == "both-flipped":
        flip_middle(ck / "last.pt")
        flip_middle(ck / "prev.pt")
    else:
        DAMAGE[damage](ck / "last.pt")
    capfd.readouterr()
    rc = main(["train", *over, "--quiet"])
    err = [x for x in capfd.readouterr().err.splitlines() if x.startswith("rlablate:")]
    assert rc == 0
    assert err[0].startswith(f"rlablate: warning: checkpoint {ck / 'last.pt'}: ")
    assert ("checksum mismatch" if "flipped" in damage else "unreadable") in err[0]
    if damage == "both-flipped":  # nothing usable: the run starts over (same seed, same result)
        assert "trying prev.pt" in err[0] and "starting the run over" in err[1] and len(err) == 2
    else:
        assert err[0].endswith("trying prev.pt") and len(err) == 1
    assert_same_as_reference(run_dir, reference)
