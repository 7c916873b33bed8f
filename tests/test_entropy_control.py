"""Adaptive entropy control (algo.entropy_control = adaptive, Skywork-OR1): the coefficient's update
by hand, and in the real loop: it follows the rule from each step's measured entropy, the bonus
acts with it, and a paused and resumed run continues from the checkpointed coefficient."""

from __future__ import annotations

import json

import pytest

from harness import algos
from harness.config import load_config
from harness.loop import checkpoint, train

KW = dict(target=0.2, step=1e-4, max_coef=5e-3)   # Skywork-OR1's released recipe


def test_adaptive_update_by_hand():
    f = algos.ENTROPY_CONTROLS["adaptive"]
    assert f(0.0, 0.1, **KW) == 1e-4                 # below the target: up one step
    assert f(3e-4, 0.1, **KW) == 3e-4 + 1e-4
    assert f(3e-4, 0.35, **KW) == 3e-4 - 1e-4        # above: down one step
    assert f(0.0, 0.35, **KW) == 0.0                 # never below 0
    assert f(5e-5, 0.35, **KW) == 0.0                # a partial step down is clamped at 0
    assert f(5e-3, 0.01, **KW) == 5e-3               # never above max_coef
    assert f(4.95e-3, 0.01, **KW) == 5e-3
    assert f(2e-4, 0.2, **KW) == 2e-4                # at the target: unchanged
    c, seq = 0.0, []
    for e in (0.1, 0.1, 0.1, 0.3, 0.1, 0.3, 0.3, 0.3, 0.3):
        c = f(c, e, **KW)
        seq.append(round(c, 12))
    assert seq == [1e-4, 2e-4, 3e-4, 2e-4, 3e-4, 2e-4, 1e-4, 0.0, 0.0]
    fixed = algos.ENTROPY_CONTROLS["fixed"]
    assert fixed(0.01, 0.1, **KW) == 0.01 and fixed(0.01, 5.0, **KW) == 0.01
    assert algos.ENTROPY_CONTROLS.meta("adaptive").adaptive
    assert not algos.ENTROPY_CONTROLS.meta("fixed").adaptive


def _rows(cfg):
    return [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("target,start,expect", [
    # the random-init tiny model (TINY: no warm-up) is near uniform over its small vocabulary
    # (token entropy ~2.9 nats, measured): a target of 5 is never reached (the coefficient
    # rises to its bound), one of 0.01 is always exceeded (it falls to 0)
    (5.0, 0.0, [0.0, 0.01, 0.02, 0.025, 0.025]),
    (0.01, 0.025, [0.025, 0.015, 0.005, 0.0, 0.0]),
])
def test_the_loop_moves_the_coefficient_by_the_measured_entropy(tiny_overrides, tmp_path, target,
                                                               start, expect):
    over = tiny_overrides + ["algo.entropy_control=adaptive", f"algo.entropy_target={target}",
                             "algo.entropy_coef_step=0.01", "algo.entropy_coef_max=0.025",
                             f"algo.entropy_coef={start}", "train.steps=5", "train.checkpoint_every=1"]
    ref = load_config(None, over)
    assert train(ref, progress=False)["status"] == "finished"
    rows = [r for r in _rows(ref) if r.get("kind") == "train"]
    coefs = [r["policy/entropy_coef"] for r in rows]
    assert [round(c, 12) for c in coefs] == expect
    f = algos.ENTROPY_CONTROLS["adaptive"]
    for a, b in zip(rows, rows[1:]):   # each step's coefficient from the previous step's entropy
        assert b["policy/entropy_coef"] == f(a["policy/entropy_coef"], a["policy/entropy"],
                                             target=target, step=0.01, max_coef=0.025)
    # the bonus acts exactly on the steps whose coefficient is > 0
    assert [("loss/entropy_bonus" in r) for r in rows] == [c > 0 for c in coefs]
    nxt = checkpoint.load(ref.run_dir() / "checkpoints")["state"]["entropy_coef"]
    assert nxt == f(coefs[-1], rows[-1]["policy/entropy"], target=target, step=0.01, max_coef=0.025)
    # paused after step 2 and resumed: the same coefficients and metrics
    cut = load_config(None, over + [f"run.results_dir={tmp_path / 'cut'}"])
    assert train(cut, progress=False, pause_at=2)["status"] == "interrupted"
    assert train(cut, progress=False)["status"] == "finished"
    strip = lambda rs: [{k: v for k, v in r.items() if not k.startswith(("perf/", "compute/wall"))}
                        for r in rs]
    assert strip(_rows(ref)) == strip(_rows(cut))


def test_fixed_control_logs_no_coefficient_and_keeps_the_metrics(tiny_overrides):
    """The default (fixed) adds no column: existing runs' metrics are unchanged."""
    cfg = load_config(None, tiny_overrides + ["train.steps=2"])
    assert cfg.algo.entropy_control == "fixed"
    assert train(cfg, progress=False)["status"] == "finished"
    assert not any("policy/entropy_coef" in r for r in _rows(cfg))
