"""Countdown (reasoning-gym) as a second task family: compact prompts, reasoning-gym's scorer,
a held-out split with one more number, and the real loop on it."""

from __future__ import annotations

import json

from harness.config import load_config
from harness.loop import train
from harness.tasks import make_task


def test_compact_prompt_reference_and_score_by_hand(tmp_path):
    cfg = load_config(None, ["task.name=countdown", "model.scale=tiny-0.3m"])
    task = make_task(cfg)
    (it,), _ = task.take("train", 0, 1)
    m = it.entry["metadata"]
    assert it.prompt == ",".join(map(str, m["numbers"])) + f">{m['target']}:"
    assert it.reference == m["expression"].replace(" ", "") + "."
    assert task.score(it.reference, it) == 1.0                      # the reference solves it
    assert task.score(it.reference + "garbage", it) == 1.0           # text after the '.' is ignored
    assert task.score(it.reference[:-1], it) == 0.0                  # no '.': unfinished, no answer
    a, b, c = m["numbers"]
    assert task.score(f"{a}+{b}.", it) == 0.0                        # not every number used
    wrong = f"{a}+{b}+{c}." if a + b + c != m["target"] else f"{a}*{b}*{c}."
    assert task.score(wrong, it) == 0.0                              # every number, wrong value
    assert len(m["numbers"]) == 3 and 1 <= m["target"] <= 100
    (h,), _ = task.take("held_out", 0, 1)
    assert len(h.entry["metadata"]["numbers"]) == 4                  # the shift: one more number
    assert task.take("train", 5, 2)[0][0].prompt == task.take("train", 0, 7)[0][5].prompt
    assert set("".join(task.corpus(40))) <= set("0123456789+-*/(),>:.")


def test_countdown_runs_the_loop_and_refuses_chain_sum_keys(tiny_overrides):
    import pytest
    from harness.config import ConfigError
    with pytest.raises(ConfigError, match="task.n_terms = 3: only used with task.name = chain_sum"):
        load_config(None, ["task.name=countdown", "task.n_terms=3"])
    cfg = load_config(None, tiny_overrides + ["task.name=countdown", "train.steps=2"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("kind") == "train"] == [1, 2]
