"""The offline paradigm in the loop: the self-play stage (harness/loop/selfplay.py) selects best
and worst per group and skips tied groups, is cached by content hash and shared by every run of
a sweep, and its generation FLOPs are charged to each run; offline runs go through the same eval,
logging, checkpoint and resume (harness/loop/offline.py).

These use the tests' tiny config (no warm-up: a random 0.27M model, whose responses the real
verifier scores all 0, so every group would tie); the task's scorer is replaced by a
deterministic stand-in that scores a response by its length's parity, except that the groups of
items whose prompt ends in an even digit before '=' all score 1 (tied, so skipped).
"""

from __future__ import annotations

import json

import pytest

from harness.config import load_config
from harness.loop import selfplay, train
from harness.loop.offline import pair_indices
from harness.tasks.chain_sum import ChainSumTask

OFFLINE = ["algo.paradigm=offline", "offline.n_prompts=12", "offline.samples=4"]


def _tied_item(item) -> bool:
    return int(item.prompt[-2]) % 2 == 0


def fake_score(self, response, item):
    return 1.0 if _tied_item(item) else float(len(response) % 2)


@pytest.fixture
def tiny(tiny_overrides, tmp_path):
    """The tiny config without its rollout.group_size (the offline paradigm does not read it), with
    a cache of the test's own (the session's would hold another test's self-play set)."""
    return [o for o in tiny_overrides if not o.startswith(("rollout.group_size=", "run.cache_dir="))] \
        + [f"run.cache_dir={tmp_path / 'cache'}"]


@pytest.fixture
def scored(monkeypatch):
    monkeypatch.setattr(ChainSumTask, "score", fake_score)
    builds = []
    real = selfplay.build_selfplay

    def counting(*a, **kw):
        builds.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(selfplay, "build_selfplay", counting)
    return builds


def _rows(cfg):
    return [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]


def _behaviour(rows):
    return [{k: v for k, v in r.items() if not k.startswith("perf/") and k != "compute/wall_s"}
            for r in rows]


def test_select_pair_takes_the_first_best_and_worst_and_skips_ties():
    assert selfplay.select_pair([0.0, 1.0, 0.0, 1.0]) == (1, 0)
    assert selfplay.select_pair([0.5, 0.2, 0.9, 0.2]) == (2, 1)
    assert selfplay.select_pair([1.0, 1.0, 1.0]) is None
    assert selfplay.select_pair([0.0, 0.0]) is None


def test_selfplay_keeps_best_and_worst_and_skips_tied_groups(scored, tiny):
    cfg = load_config(None, tiny + OFFLINE + ["algo.offline_loss=dpo"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished"
    data = json.loads(next((cfg_cache(cfg)).glob("*/data.json")).read_text())
    info, pairs = data["info"], data["pairs"]
    from harness.tasks import make_task
    items, _ = make_task(cfg).take("train", 0, 12)
    tied = [i for i, it in enumerate(items) if _tied_item(it)]
    assert 0 < len(tied) < 12
    assert info["n_prompts"] == 12 and info["n_tied"] + info["n_pairs"] == 12
    assert not {p["item"] for p in pairs} & set(tied)           # every tied group skipped
    for p in pairs:
        r = p["rewards"]
        assert len(r) == 4 and max(r) > min(r)
        assert items[p["item"]].prompt == p["prompt"]
    assert info["n_tied"] >= len(tied)                          # + groups that tied by chance
    assert scored == [1]


def cfg_cache(cfg):
    from pathlib import Path
    return Path(cfg.run.cache_dir) / "selfplay"


def test_selfplay_is_cached_shared_and_charged_to_every_run(scored, tiny):
    cfgs = [load_config(None, tiny + OFFLINE + [f"algo.offline_loss={loss}", f"run.seed={s}"])
            for loss, s in (("dpo", 0), ("kto", 1), ("sft", 2))]
    for cfg in cfgs:
        assert train(cfg, progress=False)["status"] == "finished"
    assert scored == [1]                                         # built once, then read
    assert len(list(cfg_cache(cfgs[0]).glob("*/data.json"))) == 1
    info = json.loads(next(cfg_cache(cfgs[0]).glob("*/data.json")).read_text())["info"]
    assert info["flops"] > 0 and info["tokens"] > 0
    for cfg in cfgs:
        rows = _rows(cfg)
        r0 = rows[0]
        assert r0["kind"] == "eval" and r0["step"] == 0
        assert r0["compute/flops"] == info["flops"]               # the stage, charged before step 1
        assert r0["compute/tokens"] == info["tokens"]
        train_rows = [r for r in rows if r["kind"] == "train"]
        assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
        assert all(r["compute/flops"] > info["flops"] for r in train_rows)
        assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 2, 4]
        assert "eval/held_out/pass@1" in rows[-1]
    # a different offline setting is a different data set
    other = load_config(None, tiny + OFFLINE[:2] + ["offline.samples=3", "algo.offline_loss=dpo"])
    assert selfplay.selfplay_key(other, cfgs[0].run_dir()) != selfplay.selfplay_key(cfgs[0], cfgs[0].run_dir())


@pytest.mark.parametrize("loss", ["dpo", "kto_ema", "sft_gold"])
def test_offline_run_is_deterministic_and_resumes_exactly(scored, tiny, tmp_path, loss):
    over = tiny + OFFLINE[:2] + [f"algo.offline_loss={loss}"] + \
        (["offline.samples=4"] if loss != "sft_gold" else []) + ["train.steps=6", "train.checkpoint_every=1"]
    a = load_config(None, over)
    assert train(a, progress=False)["status"] == "finished"
    b = load_config(None, over + [f"run.results_dir={tmp_path / 'b'}"])
    assert train(b, progress=False, pause_at=3)["status"] == "interrupted"
    assert train(b, progress=False)["status"] == "finished"
    assert _behaviour(_rows(a)) == _behaviour(_rows(b))
    rows = [r for r in _rows(a) if r["kind"] == "train"]
    assert all(r["loss/offline"] == r["loss/offline"] for r in rows)   # finite, logged
    n_pairs = 12 if loss == "sft_gold" else \
        json.loads(next(cfg_cache(a).glob("*/data.json")).read_text())["info"]["n_pairs"]
    assert rows[-1]["offline/epoch"] == pytest.approx(6 * 4 / n_pairs)
    if loss == "sft_gold":
        assert scored == []                                          # no self-play for gold SFT
        assert rows[0]["compute/tokens"] == 0


def test_pair_indices_read_each_epoch_as_a_permutation():
    idx, cur = pair_indices(5, 0, 12, seed=3)
    assert cur == 12 and sorted(idx[:5]) == list(range(5)) and sorted(idx[5:10]) == list(range(5))
    assert idx[:5] != idx[5:10]                                      # a fresh order per epoch
    assert pair_indices(5, 7, 5, seed=3)[0] == idx[7:12]             # a pure function of the cursor
    assert pair_indices(5, 0, 5, seed=4)[0] != idx[:5]
