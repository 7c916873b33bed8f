"""Several named held-out sets (eval.held_out_sets, issue 17): each is evaluated and reported
under its own name; its items never reach training, the in-dist eval or the warm-up; a bad list
is one line."""

from __future__ import annotations

import json

import pytest

from harness.config import ConfigError, load_config
from harness.loop import train
from harness.loop.warm_start import warm_start_key
from harness.tasks import make_task
from harness.tasks.chain_sum import SHIFTS, _operands


def _nums(item):
    return _operands(item.entry["metadata"]["expression"])[0]


def test_extra_held_out_sets_are_disjoint_from_training_and_shifted_as_named():
    cfg = load_config(None, ["eval.held_out_sets=[first_two_ge_50, more_terms]"])
    task = make_task(cfg)
    train_items = task.take("train", 0, 400)[0] + task.eval_set("in_dist", 200) + \
        task.take("warmup", 0, 200)[0]
    assert not any(SHIFTS[s](_nums(it)) for it in train_items for s in ("first_ends_in_7", "first_two_ge_50"))
    far = task.eval_set("first_two_ge_50", 50)
    assert all(SHIFTS["first_two_ge_50"](_nums(it)) for it in far)
    assert all(len(_nums(it)) == 3 for it in task.eval_set("more_terms", 20))
    assert all(len(_nums(it)) == 2 for it in train_items)
    # without the list every split is what it was (the default warm start's key is unchanged)
    plain = load_config(None, [])
    assert warm_start_key(plain, "t") != warm_start_key(cfg, "t")
    assert [it.prompt for it in make_task(plain).eval_set("held_out", 30)] == \
        [it.prompt for it in task.eval_set("held_out", 30)]


def test_each_held_out_set_is_reported(tiny_overrides):
    cfg = load_config(None, tiny_overrides + ["eval.held_out_sets=[more_terms, first_two_ge_50]"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["kind"] == "eval"]
    for name in ("in_dist", "held_out", "more_terms", "first_two_ge_50"):
        assert all(r[f"eval/{name}/n_items"] == 16 and r[f"eval/{name}/k"] == 2 for r in evals), name
    items = [json.loads(l) for l in (cfg.run_dir() / "eval_items.jsonl").read_text().splitlines()]
    assert {r["set"] for r in items} == {"in_dist", "held_out", "more_terms", "first_two_ge_50"}


@pytest.mark.parametrize("value,msg", [
    ("[far]", "'far' is not a held-out set of task.name = chain_sum (allowed: first_two_ge_50, "
              "first_ends_in_7, more_terms)"),
    ("[more_terms, more_terms]", "'more_terms' is listed twice"),
    ("[first_ends_in_7]", "'first_ends_in_7' is listed twice (or is task.held_out"),
])
def test_bad_held_out_sets_are_one_line(value, msg):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"eval.held_out_sets={value}"])
    assert msg in str(e.value) and "\n" not in str(e.value)
