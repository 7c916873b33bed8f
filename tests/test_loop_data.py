"""The training prompts (harness/loop/data.py): a finite, cycling training set and
No-Positive-Resampling (algo.retire = no_positive, ScaleRL)."""

from __future__ import annotations

import json

import torch

from harness import algos
from harness.config import load_config
from harness.loop import train
from harness.loop import checkpoint
from harness.loop.data import TrainSet
from harness.tasks.base import Item


def test_no_positive_retires_items_at_the_threshold_by_hand():
    """passes/attempts: 9/10 = 0.9 retires (>=), 8/10 stays, never sampled stays, 5/5 retires."""
    f = algos.RETIREMENTS["no_positive"]
    passes, attempts = torch.tensor([9, 8, 0, 5, 0]), torch.tensor([10, 10, 0, 5, 3])
    assert f(passes, attempts, threshold=0.9).tolist() == [True, False, False, True, False]
    assert not algos.RETIREMENTS["none"](passes, attempts, threshold=0.9).any()


class _Stream:
    def take(self, split, cursor, n):
        return [Item(f"p{i}", "", str(i), {}) for i in range(cursor, cursor + n)], cursor + n


def test_finite_set_cycles_in_seeded_passes_and_skips_retired_items():
    """4 items, drawn 2 at a time: each pass is a permutation (every item once per pass); once
    items 0 and 1 score 4/4, they are never drawn again."""
    ts = TrainSet(_Stream(), 4, seed=3, retire="no_positive", threshold=0.9)
    _, ids_a, cur = ts.take(0, 2)
    _, ids_b, cur = ts.take(cur, 2)
    assert sorted(ids_a + ids_b) == [0, 1, 2, 3] and cur == 4
    ts.record([0, 1, 2, 3], torch.tensor([1.0] * 8 + [1.0, 0, 0, 0] + [0.0] * 4), group_size=4)
    assert ts.retired().tolist() == [True, True, False, False]
    drawn = []
    for _ in range(5):
        items, ids, cur = ts.take(cur, 2)
        drawn += ids
        assert [it.prompt for it in items] == [f"p{i}" for i in ids]
    assert set(drawn) == {2, 3}
    assert ts.stats() == {"data/retired_items": 2, "data/seen_items": 4}


def test_infinite_stream_is_the_task_stream_and_records_nothing():
    ts = TrainSet(_Stream(), 0, seed=0, retire="none", threshold=0.9)
    items, ids, cur = ts.take(5, 2)
    assert [it.prompt for it in items] == ["p5", "p6"] and ids is None and cur == 7
    assert ts.stats() == {} and ts.state_dict() == {}


def _easy_scores(monkeypatch):
    """A verifier that calls every item whose prompt starts with an even digit correct."""
    from harness.tasks.chain_sum import ChainSumTask
    monkeypatch.setattr(ChainSumTask, "score", lambda self, resp, item: float(int(item.prompt[0]) % 2 == 0))


def test_easy_items_stop_being_drawn_and_resume_restores_the_history(tiny_overrides, tmp_path,
                                                                      monkeypatch):
    """The real loop on a finite set of 8 items (4 prompts x 4 samples a step, 6 steps): an easy
    item (always correct) retires after its first draw (4/4 >= 0.9), so it is sampled exactly
    once; the hard ones keep being drawn. A run paused at step 3 and resumed ends with the same
    per-item history, bit for bit, and the same metrics as the uninterrupted run."""
    _easy_scores(monkeypatch)
    over = tiny_overrides + ["task.train_items=8", "algo.retire=no_positive", "train.steps=6",
                             "train.checkpoint_every=1"]
    ref = load_config(None, over)
    assert train(ref, progress=False)["status"] == "finished"
    ckpt = checkpoint.load(ref.run_dir() / "checkpoints")
    hist = ckpt["train_set"]
    from harness.tasks import make_task  # the finite set's items, to tell easy from hard
    items = TrainSet(make_task(ref), 8, ref.run.seed, "none", 0.9).items
    easy = torch.tensor([int(it.prompt[0]) % 2 == 0 for it in items])
    assert 0 < int(easy.sum()) < 8
    assert (hist["attempts"][easy] == 4).all()             # drawn once, then retired
    assert (hist["passes"][easy] == 4).all() and (hist["passes"][~easy] == 0).all()
    assert int(hist["attempts"].sum()) == 6 * 4 * 4        # every sampled response counted
    assert (hist["attempts"][~easy] > 4).all()              # the hard ones cycle on
    rows = [r for r in map(json.loads, (ref.run_dir() / "metrics.jsonl").read_text().splitlines())
            if r.get("kind") == "train"]
    assert rows[-1]["data/retired_items"] == int(easy.sum())
    # paused at step 3, resumed: the same history and metrics
    cut = load_config(None, over + [f"run.results_dir={tmp_path / 'cut'}"])
    assert train(cut, progress=False, pause_at=3)["status"] == "interrupted"
    assert train(cut, progress=False)["status"] == "finished"
    hist2 = checkpoint.load(cut.run_dir() / "checkpoints")["train_set"]
    assert torch.equal(hist["attempts"], hist2["attempts"]) and torch.equal(hist["passes"], hist2["passes"])
    strip = lambda rs: [{k: v for k, v in r.items() if not k.startswith(("perf/", "compute/wall"))} for r in rs]
    rows2 = [r for r in map(json.loads, (cut.run_dir() / "metrics.jsonl").read_text().splitlines())]
    rows1 = [r for r in map(json.loads, (ref.run_dir() / "metrics.jsonl").read_text().splitlines())]
    assert strip(rows1) == strip(rows2)


def test_configs_scalerl_runs_the_whole_recipe_in_the_real_loop(tiny_overrides):
    """configs/scalerl.yaml (the scalerl preset + No-Positive-Resampling on a finite set + forced
    interruptions) runs the loop on the tiny model; the rows log both pieces."""
    from pathlib import Path
    cfg = load_config(Path(__file__).parents[1] / "configs" / "scalerl.yaml",
                      tiny_overrides + ["train.steps=3", "task.train_items=16"])
    assert cfg.algo.surrogate == "cispo" and cfg.algo.retire == "no_positive" and cfg.rollout.think_budget == 16
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r.get("kind") == "train"]
    assert len(train_rows) == 3
    assert all("rollout/interrupted_frac" in r and "data/retired_items" in r for r in train_rows)
