"""The planner's noise matched to the scatter of the pilot's per-run fits (analysis/scatter.py).

Known truths: noise models whose seed sd is set by hand, simulated at a pilot's design, and the
matching must recover the seed sd from the scatter alone (the double count of the within-run
noise removed), or shrink the wobble where the fits scatter less than the noise implies.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from analysis.calibrate import NoiseModel
from analysis.scatter import match_run_scatter, robust_sd, run_scatter
from analysis.schedule import Group

TRUTH = NoiseModel(R0=0.3, A=0.6, B=1.2, seed_sd_A=0.03, seed_sd_logB=0.2, item_spread=0.15,
                   wobble_sd=0.01)
DESIGN = Group("pilot", "", 200, 10, 1, 512, 1)
MID = 30.0


def test_robust_sd_of_a_normal_sample_and_one_wild_value():
    x = np.random.default_rng(0).normal(0, 2.0, 20000)
    assert robust_sd(x) == pytest.approx(2.0, rel=0.03)
    assert robust_sd(np.r_[x, 1e6]) == pytest.approx(2.0, rel=0.03)  # the plain sd would be ~7


def test_matching_recovers_the_seed_sd_the_scatter_holds():
    """Per-run fits of a truth with seed sd 0.03 scatter by more than 0.03 (their fit error adds
    to it); taking that scatter as the seed sd, as the planner did, counts the within-run noise
    twice. Matched, the seed sd comes back to the truth."""
    obs_a, obs_b = run_scatter(TRUTH, MID, DESIGN, 400, seed=5)
    assert obs_a > 1.25 * TRUTH.seed_sd_A  # the double count the raw planner made
    matched, note = match_run_scatter(replace(TRUTH, seed_sd_A=obs_a, seed_sd_logB=obs_b), MID,
                                      DESIGN)
    assert matched.seed_sd_A == pytest.approx(TRUTH.seed_sd_A, rel=0.2)
    assert matched.seed_sd_logB == pytest.approx(TRUTH.seed_sd_logB, rel=0.35)
    assert matched.wobble_sd == TRUTH.wobble_sd  # the wobble is kept where it fits
    assert "a seed sd of A of" in note
    # and the matched noise reproduces the observed scatter on fresh draws
    again = run_scatter(matched, MID, DESIGN, 400, seed=11)[0]
    assert again == pytest.approx(obs_a, rel=0.15)


def test_matching_shrinks_the_wobble_when_fits_scatter_less_than_it_implies():
    """A pilot whose fits scatter less than its measured wobble would make them (the real runs of
    issue 16's regime): no seed effect, and the wobble scaled until simulated fits scatter as the
    pilot's did."""
    loud = replace(TRUTH, seed_sd_A=0.0, seed_sd_logB=0.0, wobble_sd=0.03)
    floor = run_scatter(replace(loud, wobble_sd=0.0), MID, DESIGN, 400)[0]
    full = run_scatter(loud, MID, DESIGN, 400)[0]
    assert full > 1.3 * floor
    target = (floor + full) / 2
    matched, note = match_run_scatter(replace(loud, seed_sd_A=target, seed_sd_logB=0.1), MID,
                                      DESIGN)
    assert matched.seed_sd_A == 0.0
    assert 0.0 < matched.wobble_sd < 0.03
    assert "wobble is scaled" in note
    assert run_scatter(matched, MID, DESIGN, 400, seed=11)[0] == pytest.approx(target, rel=0.15)


def test_matching_at_the_binomial_floor_says_so():
    matched, note = match_run_scatter(replace(TRUTH, seed_sd_A=0.001), MID, DESIGN)
    assert matched.seed_sd_A == 0.0 and matched.wobble_sd == 0.0
    assert "even the binomial eval noise alone" in note


def test_matching_is_deterministic():
    a = match_run_scatter(TRUTH, MID, DESIGN)
    b = match_run_scatter(TRUTH, MID, DESIGN)
    assert a == b
