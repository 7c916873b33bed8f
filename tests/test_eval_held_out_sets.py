"""Several named held-out sets (eval.held_out_sets, issue 17): each is evaluated and reported
under its own name; its items never reach training, the in-dist eval or the warm-up; a bad list
is one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.config import ConfigError, load_config
from harness.loop import train
from harness.loop.warm_start import warm_start_key
from harness.models import get_tokenizer
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
              "first_ends_in_7, more_terms, countdown)"),
    ("[more_terms, more_terms]", "'more_terms' is listed twice"),
    ("[first_ends_in_7]", "'first_ends_in_7' is listed twice (or is task.held_out"),
])
def test_bad_held_out_sets_are_one_line(value, msg):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"eval.held_out_sets={value}"])
    assert msg in str(e.value) and "\n" not in str(e.value)


# ---- another task: chain_sum's `countdown` set (issue 17, part 3) --------------------------------
CD = ["eval.held_out_sets=[countdown]"]


def test_the_countdown_set_is_countdown_items_scored_by_countdowns_verifier():
    task = make_task(load_config(None, CD))
    items = task.eval_set("countdown", 20)
    assert {it.entry["metadata"]["source_dataset"] for it in items} == {"countdown"}
    for it in items:
        m = it.entry["metadata"]
        assert it.prompt == ",".join(map(str, m["numbers"])) + f">{m['target']}:" and len(m["numbers"]) == 3
        assert task.score(it.reference, it) == 1.0                      # Countdown's verifier
        assert task.score(f"{m['numbers'][0]}+{m['target']}.", it) == 0.0
        assert task.score(f"1+1={m['target']}.", it) == 0.0              # chain_sum's reading fails
    # its own stream: not Countdown's in-dist items; chain_sum's splits are what they were
    own = make_task(load_config(None, ["task.name=countdown"])).eval_set("in_dist", 20)
    assert [it.prompt for it in own] != [it.prompt for it in items]
    plain = make_task(load_config(None, []))
    for split in ("train", "in_dist", "held_out", "warmup"):
        assert [i.prompt for i in plain.take(split, 0, 30)[0]] == [i.prompt for i in task.take(split, 0, 30)[0]]
    ref = plain.eval_set("held_out", 1)[0]
    assert task.score(ref.reference, ref) == 1.0                          # chain_sum's items: its own


def test_only_a_requested_countdown_set_changes_the_tokenizer_and_it_has_no_unknowns(tmp_path):
    plain_cfg = load_config(None, [f"run.cache_dir={tmp_path}"])
    plain = get_tokenizer(plain_cfg, make_task(plain_cfg).corpus)
    cfg = load_config(None, CD + [f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    text = "".join(it.prompt + it.reference for it in task.eval_set("countdown", 200))
    assert set(text) >= set(">:*/") and tok.unk_token_id not in tok.encode(text, add_special_tokens=False)
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert plain.unk_token_id in plain.encode("14,9,2>63:14*9/2.", add_special_tokens=False)  # why
    # a config without the set: the tokenizer and warm start of main (b085368), to the byte
    digest = hashlib.sha256(json.dumps(make_task(plain_cfg).corpus()).encode()).hexdigest()[:12]
    assert digest == "81e38bc9b704" and Path(plain.name_or_path).name == f"chars-{digest}"
    assert warm_start_key(plain_cfg, f"chars-{digest}") == "b67b09c4a6111632"


def test_the_warm_up_sees_countdown_only_under_held_out_in_warmup():
    mixed = make_task(load_config(None, CD + ["task.held_out_in_warmup=true"]))
    for split in ("warmup", "warmup_check"):
        src = [it.entry["metadata"]["source_dataset"] for it in mixed.take(split, 0, 10)[0]]
        assert src == ["chain_sum", "countdown"] * 5, split
    a, cur = mixed.take("warmup", 0, 12)
    assert cur == 12 and [i.prompt for i in mixed.take("warmup", 5, 7)[0]] == [i.prompt for i in a[5:]]
    warm = {it.prompt for it in mixed.take("warmup", 0, 400)[0]}
    assert sum(it.prompt in warm for it in mixed.eval_set("countdown", 100)) < 30  # another stream
    assert not any(it.entry["metadata"]["source_dataset"] == "countdown"
                   for it in mixed.take("train", 0, 200)[0] + mixed.eval_set("in_dist", 100))
    alone = make_task(load_config(None, CD))
    assert {it.entry["metadata"]["source_dataset"] for it in alone.take("warmup", 0, 50)[0]} == {"chain_sum"}


def test_a_run_with_the_countdown_set_warm_started_on_both_tasks(tiny_overrides):
    cfg = load_config(None, tiny_overrides + CD + [
        "task.held_out_in_warmup=true", "warmup.max_steps=10", "warmup.min_steps=10",
        "warmup.check_every=10", "warmup.check_items=8", "train.steps=2"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert all(r["eval/countdown/n_items"] == 16 and r["eval/countdown/k"] == 2 for r in evals)
    assert 0.0 <= evals[-1]["eval/countdown/pass@1"] <= 1.0


def test_the_report_gives_each_named_held_out_set_its_own_spread_and_compression(tmp_path):
    """`rlablate analyze` on runs with math's named sets (synthetic curves of known ceilings, the
    resolved config carrying task.held_out_paths): each set gets its own spread row, and its
    compression is the in-dist spread of the gains over that set's spread (OXRL's ratio)."""
    import argparse

    from analysis.cli import add_analyze_parser, run_analyze
    from analysis.synth import CurveSpec, RunSpec, make_config, write_run
    # gains (A - R0) per variant: in_dist 0.10 apart, held_out 0.02, hard 0.05, same 0.02
    ceil = {"grpo": {"in_dist": 0.40, "held_out": 0.22, "hard": 0.15, "same": 0.22},
            "dr_grpo": {"in_dist": 0.50, "held_out": 0.24, "hard": 0.20, "same": 0.24}}
    for algo, sets in ceil.items():
        for seed in (0, 1):
            cfg = make_config(algo, "tiny-1m", seed, **{"task.name": "math"})
            cfg["task"]["held_out_paths"] = {"hard": "hard.jsonl", "same": "m.jsonl"}
            curves = {s: CurveSpec(a, 2.0, 2e13, 0.1) for s, a in sets.items()}
            write_run(tmp_path / "sweep" / f"{algo}-s{seed}",
                      RunSpec(config=cfg, curves=curves, steps=200, eval_every=20, noise=1e-4, seed=seed))
    parser = argparse.ArgumentParser(prog="rlablate")
    add_analyze_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["analyze", str(tmp_path / "sweep"), "--out", str(tmp_path / "out"),
                              "--bootstrap", "50", "--seed", "1", "--calibrate", "0"])
    assert run_analyze(args) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    head = "| scale | eval_set | n_variants | spread_gain | spread_fit_gain | best | ratio_spread_gain"
    table = md[md.index(head):].split("\n\n")[0].splitlines()[2:]   # the spreads table's rows
    spreads = {c[1]: c for c in ([x.strip() for x in row.strip("|").split("|")] for row in table)}
    assert set(spreads) == {"in_dist", "held_out", "hard", "same"}
    num = lambda name, col: float(spreads[name][col])
    assert num("in_dist", 3) == pytest.approx(0.10, abs=0.005) and spreads["in_dist"][6] == ""
    assert num("hard", 3) == pytest.approx(0.05, abs=0.005)
    assert num("hard", 6) == pytest.approx(2.0, rel=0.1)              # compression per set
    assert num("same", 6) == pytest.approx(5.0, rel=0.1) and num("held_out", 6) == pytest.approx(5.0, rel=0.1)
