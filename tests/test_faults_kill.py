"""Fault injection, kill and resume: a run SIGKILLed at an exact point of every phase (rollout,
update, metrics row, eval row, checkpoint temp file, checkpoint rotation), then resumed, ends
bit-identical to an uninterrupted run: metrics, per-item evals, model, optimizer and RNG state,
with no row of metrics.jsonl lost or duplicated and no temp file left behind.

The kill points come from the test-only hook `RLABLATE_FAULT=kill=PHASE:STEP` (harness/faults.py):
the process SIGKILLs itself there. Each trial first checks that the kill left the damage it is
meant to (a torn last line, a half-written temp file, no last.pt) so a hook that stopped firing
fails the test instead of passing it vacuously. Random-time kills from outside are in test_loop_train.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultlib import KILLED, assert_same_as_reference, lines, overrides, row_keys, run_child, train_reference
from harness.config import load_config
from harness.storage import load_checkpoint_file

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

@pytest.fixture(scope="module")
def reference(tmp_path_factory, cache_dir) -> Path:
    return train_reference(tmp_path_factory.mktemp("ref"), cache_dir)


def torn_last_line(p: Path) -> bool:
    ls = lines(p)
    try:
        json.loads(ls[-1])
        return False
    except (IndexError, json.JSONDecodeError):
        return bool(ls)


# (id, faults injected one per attempt, what the kill must have left behind)
TRIALS = [
    ("rollout-1", ["kill=rollout:1"], "no_train_row_1"),
    ("rollout-5", ["kill=rollout:5"], "no_train_row_5"),
    ("update-2", ["kill=update:2"], "no_train_row_2"),
    ("update-6", ["kill=update:6"], "no_train_row_6"),
    ("metrics-3", ["kill=metrics:3"], "torn_metrics"),
    ("metrics-6", ["kill=metrics:6"], "torn_metrics"),
    ("eval-0", ["kill=eval:0"], "torn_metrics"),
    ("eval-3", ["kill=eval:3"], "torn_metrics"),
    ("checkpoint-0", ["kill=checkpoint:0"], "torn_tmp"),
    ("checkpoint-2", ["kill=checkpoint:2"], "torn_tmp"),
    ("checkpoint-6", ["kill=checkpoint:6"], "torn_tmp"),
    ("rotate-4", ["kill=rotate:4"], "no_last"),
    ("update-3-then-metrics-5", ["kill=update:3", "kill=metrics:5"], "no_train_row_3"),
]


@pytest.mark.parametrize("name,kills,damage", TRIALS, ids=[t[0] for t in TRIALS])
def test_kill_at_an_exact_point_then_resume_is_bit_identical(reference, tmp_path, cache_dir,
                                                             name, kills, damage):
    over = overrides(tmp_path / "results", cache_dir)
    run_dir = load_config(None, over).run_dir()
    for i, fault in enumerate(kills):
        assert run_child(over, fault) == KILLED, f"{fault}: the process was not killed"
        summary = run_dir / "summary.json"
        assert not summary.exists() or json.loads(summary.read_text())["status"] == "running"
        if i == 0:  # the kill left exactly the damage it simulates
            ck = run_dir / "checkpoints"
            step = int(kills[0].split(":")[1])
            if damage == "torn_metrics":
                assert torn_last_line(run_dir / "metrics.jsonl")
            elif damage == "torn_tmp":
                tmp = list(ck.glob(".last.pt.tmp*"))
                assert len(tmp) == 1 and tmp[0].stat().st_size > 0
                if (ck / "last.pt").exists():  # the old last.pt is untouched and valid
                    assert load_checkpoint_file(ck / "last.pt")["state"]["step"] == step - 2
            elif damage == "no_last":
                assert not (ck / "last.pt").exists() and (ck / "prev.pt").exists()
                assert list(ck.glob(".last.pt.tmp*"))  # the complete new file, not yet renamed
            else:
                want = int(damage.rsplit("_", 1)[1])
                trained = [s for k, s in row_keys(run_dir) if k == "train"]
                assert max(trained, default=0) == want - 1  # killed inside step `want`
    assert run_child(over) == 0, "the resumed run did not finish"

    assert_same_as_reference(run_dir, reference)
