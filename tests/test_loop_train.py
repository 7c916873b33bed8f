"""The shared loop end to end on a tiny model: run directory contents, resume after SIGKILL with
identical results, divergence handling, and never overwriting a finished run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from harness import algos
from harness.config import load_config
from harness.loop import train

VOLATILE = ("perf/", "compute/wall_s")


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]


def stable(rs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(VOLATILE)} for r in rs]


def test_tiny_run_writes_a_complete_run_dir(tiny_overrides):
    cfg = load_config(None, tiny_overrides)
    summary = train(cfg, progress=False)
    d = cfg.run_dir()
    assert summary["status"] == "finished" and summary["step"] == 4
    assert json.loads((d / "summary.json").read_text())["status"] == "finished"
    assert yaml.safe_load((d / "config.yaml").read_text()) == cfg.to_dict()
    rs = rows(d)
    assert [r["step"] for r in rs if r["kind"] == "train"] == [1, 2, 3, 4]
    assert [r["step"] for r in rs if r["kind"] == "eval"] == [0, 2, 4]
    flops = [r["compute/flops"] for r in rs]
    assert flops[0] == 0 and all(b >= a for a, b in zip(flops, flops[1:])) and flops[-1] > 0
    tr = [r for r in rs if r["kind"] == "train"][0]
    for key in ("rollout/reward_mean", "loss/policy", "policy/entropy", "policy/clip_frac",
                "compute/tokens", "perf/tokens_per_s"):
        assert key in tr
    ev = [r for r in rs if r["kind"] == "eval"][-1]
    for s in ("in_dist", "held_out"):
        assert 0 <= ev[f"eval/{s}/pass@1"] <= 1 and ev[f"eval/{s}/n_items"] == 16 and ev[f"eval/{s}/k"] == 2
    assert (d / "checkpoints" / "last.pt").exists()
    assert any((d / "tb").iterdir())
    items = [json.loads(l) for l in (d / "eval_items.jsonl").read_text().splitlines()]
    assert len(items) == 6 and len(items[0]["correct"]) == 16
    # FLOP accounting: per step, sampling costs 2N per prompt+generated token and the update 6N per
    # prompt+response token: 8N per generated token, plus 8N per prompt token (16 prompts of <= 7)
    from harness.models import build_model, count_params, get_tokenizer
    from harness.tasks import make_task
    n = count_params(build_model(cfg, get_tokenizer(cfg, make_task(cfg).corpus), 0))
    tr_rows = [r for r in rs if r["kind"] == "train"]
    prev_f, prev_t = 0.0, 0
    for r in tr_rows:
        df, dt = r["compute/flops"] - prev_f, r["compute/tokens"] - prev_t
        assert 8 * n * dt <= df <= 8 * n * (dt + 16 * 7), (df, dt, n)
        prev_f, prev_t = r["compute/flops"], r["compute/tokens"]


def test_same_config_and_seed_give_identical_metrics(tiny_overrides, tmp_path):
    a = load_config(None, tiny_overrides)
    b = load_config(None, tiny_overrides + [f"run.results_dir={tmp_path / 'other'}"])
    train(a, progress=False)
    train(b, progress=False)
    assert stable(rows(a.run_dir())) == stable(rows(b.run_dir()))
    c = load_config(None, tiny_overrides + ["run.seed=1", f"run.results_dir={tmp_path / 'c'}"])
    train(c, progress=False)
    assert stable(rows(c.run_dir())) != stable(rows(a.run_dir()))


def test_finished_run_is_never_overwritten(tiny_overrides):
    cfg = load_config(None, tiny_overrides)
    train(cfg, progress=False)
    before = (cfg.run_dir() / "metrics.jsonl").read_bytes()
    again = train(cfg, progress=False)
    assert again["status"] == "finished"
    assert (cfg.run_dir() / "metrics.jsonl").read_bytes() == before


def _cli(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "train", *args, "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.parametrize("kill_after_rows", [3, 8])
def test_sigkill_then_resume_gives_identical_results(tiny_overrides, tmp_path, kill_after_rows):
    common = tiny_overrides + ["train.steps=10", "train.checkpoint_every=3", "eval.every=3"]
    ref_cfg = load_config(None, common + [f"run.results_dir={tmp_path / 'ref'}"])
    train(ref_cfg, progress=False)

    cut = common + [f"run.results_dir={tmp_path / 'cut'}"]
    cut_dir = load_config(None, cut).run_dir()
    p = _cli(cut)
    deadline = time.time() + 120
    while time.time() < deadline:
        m = cut_dir / "metrics.jsonl"
        if m.exists() and len(m.read_text().splitlines()) >= kill_after_rows:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    summary_path = cut_dir / "summary.json"  # absent if killed before the first checkpoint
    assert not summary_path.exists() or json.loads(summary_path.read_text())["status"] != "finished"
    q = _cli(cut)
    out, err = q.communicate(timeout=300)
    assert q.returncode == 0, err
    got, want = rows(cut_dir), rows(ref_cfg.run_dir())
    assert stable(got) == stable(want)
    steps = [(r["kind"], r["step"]) for r in got]
    assert len(steps) == len(set(steps))  # nothing duplicated
    a = torch.load(cut_dir / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(ref_cfg.run_dir() / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_non_finite_advantage_stops_the_run_as_diverged(tiny_overrides):
    name = "test_nan_after_step_2"
    calls = {"n": 0}
    if name not in algos.ADVANTAGES:
        @algos.ADVANTAGES.register(name, needs_group=False)
        def _nan(rewards, mask, *, group_size, eps, **_):  # a test-only estimator
            calls["n"] += 1
            adv = (rewards - rewards.mean()).unsqueeze(-1) * mask
            return adv * float("nan") if calls["n"] > 2 else adv
    cfg = load_config(None, tiny_overrides + [f"algo.advantage={name}", "train.steps=6"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "diverged"
    assert summary["diverged_step"] == 3
    assert "non-finite advantage at step 3" in summary["error"]
    on_disk = json.loads((cfg.run_dir() / "summary.json").read_text())
    assert on_disk["status"] == "diverged" and on_disk["diverged_step"] == 3


def test_cli_train_runs_and_reports(tiny_overrides):
    p = _cli(tiny_overrides)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.startswith("finished: ") and "in_dist pass@1" in out
