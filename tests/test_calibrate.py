"""Calibration by simulation (analysis/calibrate.py, `rlablate calibrate`): false-positive rates
with binomial intervals under known null truths, power under known alternatives, the spec reader,
and the simulated trends equal the report's own trend code."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.calibrate import (Group, NoiseModel, calibrate,
                                clopper_pearson, effect_cells, read_schedule)
from analysis.calibrate_claims import _trend_frame, claim4_cells
from analysis.claims import run_trend

PRESETS = {s: ["cispo", "dapo", "dr_grpo", "grpo", "gspo", "minpro", "ppo", "reinforce_pp",
               "reinforce_pp_baseline", "rloo", "scalerl", "vapo"] for s in ("0.3m", "1m")}


def test_clopper_pearson_by_hand():
    assert clopper_pearson(0, 500) == pytest.approx((0.0, 0.00735), abs=1e-4)
    lo, hi = clopper_pearson(25, 500)
    assert lo == pytest.approx(0.0326, abs=1e-3) and hi == pytest.approx(0.0729, abs=1e-3)


def _old_claim4(fin):
    """The rule before issue 15: 'larger' when the in-dist F-test p < 0.05 and the in-dist
    variance component's point estimate exceeds the held-out one, at every scale."""
    from analysis.claims import between_variants
    calls = []
    for _, s in fin.groupby("scale_value"):
        vi, pi, _ = between_variants(s[s["eval_set"] == "in_dist"])
        vh, _, _ = between_variants(s[s["eval_set"] == "held_out"])
        calls.append(pi < 0.05 and vi > vh)
    return all(calls)


def test_claim4_false_positive_rate_is_at_most_5_percent():
    """500 simulated demo-shaped sweeps (12 presets x 2 scales x 2 seeds) whose true spreads are
    equal (0.05 / 0.05): 'reproduces' 0/500 [0, 0.7%] and 'does not reproduce' <= 5% within its
    interval; with the held-out spread at 0.01 it reproduces in ~97%. The old rule read
    'reproduces' in ~25% of the same null sweeps (43.5% in the audit's simulation)."""
    cells = claim4_cells(PRESETS, 2, NoiseModel(), 256, 4, 500, seed=3)
    fp = sum(v == "reproduces" for v in cells["null"] + cells["zero"])
    assert clopper_pearson(fp, 1000)[0] <= 0.05 and fp / 1000 <= 0.05
    dn = sum(v == "does not reproduce" for v in cells["null"])
    assert clopper_pearson(dn, 500)[0] <= 0.05
    power = np.mean([v == "reproduces" for v in cells["alt"]])
    assert power >= 0.85
    # the old rule on the same kind of null sweeps
    rng = np.random.default_rng(0)
    old = []
    for _ in range(200):
        rows = []
        for scale, names in PRESETS.items():
            for es in ("in_dist", "held_out"):
                mu = rng.normal(0, 1, len(names))
                mu = 0.05 * (mu - mu.mean()) / mu.std(ddof=1)
                for a, name in enumerate(names):
                    for s in range(2):
                        rows.append({"variant": name, "scale_value": scale, "eval_set": es,
                                     "r0": 0.0, "final": mu[a] + rng.normal(0, 0.02)})
        old.append(_old_claim4(pd.DataFrame(rows)))
    assert np.mean(old) >= 0.15


@pytest.mark.slow
def test_effect_verdicts_false_positive_and_power_with_known_truth():
    """A design where effects can be resolved (4 seeds, 400 steps, eval every 20, C_mid at
    0.2 x the run, seed sd of A 0.005), 200 sweeps per truth (~35 s): 'moved A' is given in
    <= 5% of sweeps where A did not move; where it moved by 0.05 in ~20% (measured 0.205: the
    x1.6 small-sample widening of 4 seeds costs most of the power); 'only B' never when
    nothing moved."""
    noise = NoiseModel(mid_frac=0.2, seed_sd_A=0.005, seed_sd_logB=0.05)
    g = Group("grpo", "", 400, 20, 4)
    cells = effect_cells(g, g, noise, 200, seed=1)
    moved_a = {t: np.mean([v.startswith("moved A") for v in cells[t]]) for t in cells}
    assert clopper_pearson(int(moved_a["null"] * 200), 200)[0] <= 0.05
    assert clopper_pearson(int(moved_a["B"] * 200), 200)[0] <= 0.05
    assert moved_a["A"] >= 0.12
    only_b = {t: np.mean([v == "only B" for v in cells[t]]) for t in cells}
    assert only_b["null"] <= 0.05 and only_b["A"] <= 0.05
    assert all(v != "no effect" for v in cells["A"])


@pytest.mark.slow
def test_demo_schedule_calibration_every_false_positive_rate_within_5_percent():
    """`rlablate calibrate` on the demo spec at 500 sweeps per cell: every false-positive rate's
    95% interval reaches 5% or below (measured: all point rates <= 5.8%). 26 rows: the 20 of
    issue 15 plus issue 16's equivalence verdicts ('no effect on A' for each of the 4 comparison
    settings, 'no effect' of claims 1 and 2)."""
    _, groups = read_schedule("results/reference/demo/spec.yaml")
    table = calibrate(groups, NoiseModel(), 500, seed=0)
    fp = table[table["kind"] == "false positive"]
    assert len(fp) == 26 and (fp["lo"] <= 0.05).all(), fp


def test_demo_spec_is_read_without_the_harness():
    name, groups = read_schedule("results/reference/demo/spec.yaml")
    by = {(g.variant, g.scale): g for g in groups}
    assert name == "demo" and len(groups) == 26
    assert (by[("grpo", "tiny-1m")].steps, by[("grpo", "tiny-1m")].every) == (480, 30)
    assert by[("grpo+group_filter=zero_variance", "tiny-1m")].steps == 480
    assert (by[("dr_grpo", "tiny-1m")].steps, by[("cispo", "tiny-1m")].every) == (240, 15)
    assert by[("cispo", "tiny-0.3m")].steps == 40 and by[("cispo", "tiny-0.3m")].seeds == 2
    assert ("grpo", "tiny-0.3m") in by and by[("grpo", "tiny-0.3m")].n_items == 256


def test_simulated_trends_equal_the_report_trend_code():
    rng = np.random.default_rng(0)
    vals = {"a": rng.normal(size=(2, 37)), "b": rng.normal(size=(2, 37))}
    pairs = [("1m", 0), ("1m", 1)]
    for how in ("change", "late_mean"):
        fast = _trend_frame(vals, pairs, how, 37).set_index("run_id")["value"]
        rows = [pd.DataFrame({"run_id": f"{v}-{s}-{seed}", "variant": v, "scale_value": s,
                              "seed": seed, "step": np.arange(1, 38), "x": vals[v][j]})
                for v in vals for j, (s, seed) in enumerate(pairs)]
        slow = run_trend(pd.concat(rows), "x", how).set_index("run_id")["value"]
        assert fast.sort_index().to_numpy() == pytest.approx(slow.sort_index().to_numpy())


def test_cli_prints_the_table(tmp_path, capsys):
    from analysis.cli import calibrate_main
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dapo, cispo]\nset:\n  train.steps: 60\n"
                    "  eval.every: 10\nseeds: 2\n")
    assert calibrate_main([str(spec), "--sweeps", "20", "--out", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert "| verdict |" in out and "claim 4 reproduces" in out
    table = pd.read_csv(tmp_path / "c.csv")
    assert set(table["kind"]) == {"false positive", "power"} and (table["n_sweeps"] == 20).all()
    assert calibrate_main([str(tmp_path / "missing.yaml")]) == 2
    # replications: the comparisons pooled, the claims over the union (4 + 2 seeds an arm)
    assert calibrate_main([str(spec), "--sweeps", "5", "--bootstrap", "50", "--replications",
                           "4,2", "--out", str(tmp_path / "r.csv"), "--wobble-sd", "0.005",
                           "--runaway-p", "0.25", "--runaway-dA", "-0.03"]) == 0
    out = capsys.readouterr().out
    assert "2 replications (seeds 4+2 an arm) pooled as `rlablate combine`" in out
    assert "within-run wobble sd 0.0050" in out
    assert "a run runs away with probability 0.25, moving its ceiling by -0.03" in out
    table = pd.read_csv(tmp_path / "r.csv")
    assert table["setting"].str.contains("2 replications pooled, seeds 4\\+2 an arm").any()
    assert table["setting"].str.contains(r"claim 4 \(3 presets x 1 scales x 6 seeds\)").any()
    for bad in ("4", "4,x", "4,1"):
        assert calibrate_main([str(spec), "--replications", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--replications" in err


def test_each_verdict_carries_its_own_false_positive_rate():
    """The report's effects and claims tables get the simulated false-positive rate of the
    verdict each row gives, at that comparison's own schedule (issue 16: "every verdict type
    used carries its simulated false-positive rate")."""
    import pandas as pd

    from analysis.trust import attach_claim_false_positive, attach_false_positive
    table = pd.DataFrame([
        # verdict, setting, kind, truth, n, rate, lo, hi
        ("moved A", "S1", "false positive", "null", 100, 0.03, 0.006, 0.085),
        ("moved A", "S1", "power", "A", 100, 0.60, 0.50, 0.70),
        ("no effect on A", "S1", "false positive", "edge", 100, 0.01, 0.0, 0.054),
        ("moved A", "S2", "false positive", "B", 100, 0.07, 0.03, 0.14),
        ("claim 1 does not reproduce", "C1", "false positive", "alt", 100, 0.02, 0.0, 0.07),
    ], columns=["verdict", "setting", "kind", "truth", "n_sweeps", "rate", "lo", "hi"])
    table.attrs["members"] = {"S1": ["dapo @ s", "cispo @ s"], "S2": ["gspo @ s"]}
    effects = pd.DataFrame({"variant": ["dapo", "cispo", "gspo", "dr_grpo"],
                            "scale": ["s"] * 4,
                            "verdict": ["moved A and B", "no effect on A", "moved A", "not resolved"]})
    got = attach_false_positive(effects, table)
    assert list(got["fp_rate"].iloc[:3]) == [0.03, 0.01, 0.07]
    assert list(got["fp_hi"].iloc[:3]) == [0.085, 0.054, 0.14]
    assert np.isnan(got["fp_rate"].iloc[3])  # "not resolved" asserts nothing
    claims = pd.DataFrame({"claim": [1, 2], "verdict": ["does not reproduce", "not resolved"]})
    got = attach_claim_false_positive(claims, table)
    assert got["fp_rate"].iloc[0] == 0.02 and got["fp_hi"].iloc[0] == 0.07
    assert np.isnan(got["fp_rate"].iloc[1])
    # the power of *reproduces* rides along for every simulated claim, resolved or not
    from analysis.trust import claim_trust
    table.loc[len(table)] = ("claim 2 reproduces", "C2", "power", "alt", 100, 0.16, 0.1, 0.25)
    got = attach_claim_false_positive(claims, table)
    assert np.isnan(got["power"].iloc[0]) and got["power"].iloc[1] == 0.16
    assert claim_trust(got.iloc[1].to_dict()) == (
        " (power of *reproduces* at this design and noise 16.0%)")
    assert claim_trust(got.iloc[0].to_dict()) == (
        " (simulated false-positive rate 2.0%, 95% upper bound 7.0%)")


def test_a_simulated_effect_on_A_moves_the_mean_ceiling_by_exactly_dA():
    """Near the top many item ceilings sit at 1 and cannot move: a plain shift of 0.05 moves the
    mean ceiling (what the fit's A estimates) by less, and the truth "dA = 0.05" of the
    calibration was really one inside the +-0.05 margin (session 14: "no effect on A" read 27%
    false positives at A 0.79). The shift is solved so that the mean moves by dA."""
    from analysis.calibrate import Simulator, ceiling_shift
    sim = Simulator(NoiseModel(item_spread=0.27), 2048, 1, np.random.default_rng(0))
    r0_i, a_i = sim.items(0.79, 0.40)
    plain = float(np.mean(np.clip(a_i + 0.05, r0_i, 1.0)) - np.mean(a_i))
    assert plain < 0.04  # the bug: a shift of 0.05 moves A by much less
    for dA in (0.05, 0.02, -0.05):
        x = ceiling_shift(a_i, r0_i, dA)
        assert float(np.mean(np.clip(a_i + x, r0_i, 1.0)) - np.mean(a_i)) == pytest.approx(dA, abs=1e-6)
    assert ceiling_shift(a_i, r0_i, 0.9) == 1.0  # beyond reach: the largest move


def _finals(noise: NoiseModel, seeds: int = 200, dA: float = 0.0) -> np.ndarray:
    """Each simulated run's last pass rate, 4000 items x k 1 (eval noise sd ~0.007)."""
    from analysis.calibrate import Simulator
    sim = Simulator(noise, 4000, 1, np.random.default_rng(3))
    r0_i, a_i = sim.items(0.79, 0.456)
    g = Group("grpo", "", 400, 100, seeds, 4000, 1)
    curve = sim.group("x", g, r0_i, a_i, (0.456, 0.01), B=3.0, c_mid=20.0, dA=dA)
    return np.array([r.y[-1] for r in curve.runs])


def test_runaways_make_a_bimodal_seed_effect_of_the_stated_size_and_share():
    """``runaway_p`` / ``runaway_dA`` (the report's length run-aways as a noise component): with
    p = 0.3 and dA -0.1, no Gaussian seed effect, the 200 runs' finals fall into two clusters
    0.1 apart (the run-away shift moves the mean ceiling by exactly dA, as ``ceiling_shift``) with
    ~30% in the lower one; p = 1 moves every run; p = 0 draws exactly what the model without
    run-aways draws, whatever runaway_dA says."""
    quiet = dict(seed_sd_A=0.0, seed_sd_logB=0.0, item_spread=0.27)
    base = _finals(NoiseModel(**quiet))
    assert np.array_equal(base, _finals(NoiseModel(**quiet, runaway_p=0.0, runaway_dA=-0.1)))
    assert base.std() < 0.012  # eval noise and the curve's last step only
    every = _finals(NoiseModel(**quiet, runaway_p=1.0, runaway_dA=-0.1))
    assert every.mean() - base.mean() == pytest.approx(-0.1, abs=0.004)
    mixed = _finals(NoiseModel(**quiet, runaway_p=0.3, runaway_dA=-0.1))
    low = mixed < base.mean() - 0.05
    assert 0.22 <= low.mean() <= 0.38, low.mean()
    assert mixed[low].mean() - mixed[~low].mean() == pytest.approx(-0.1, abs=0.006)
    # on top of a true effect on A, the run-away moves the ceiling by its own dA
    both = _finals(NoiseModel(**quiet, runaway_p=1.0, runaway_dA=-0.1), dA=0.05)
    assert both.mean() - base.mean() == pytest.approx(-0.05, abs=0.004)


@pytest.mark.slow
def test_pooled_replications_verdicts_false_positive_and_power_with_known_truth():
    """`rlablate combine`'s verdicts, simulated (``replications``): three studies of the design
    above (4 seeds each, sharing the eval items and R0 as real replications do), each analysed
    alone and pooled by analysis.meta.pool_effect, 150 sweeps per truth (~70 s). 'moved A' stays
    <= 5% where A did not move (null, B) and 'no effect on A' <= 5% at the edge (dA = margin),
    where it is false. Power is what pooling buys, and what it loses: a comparison with an
    unidentified fit in any study gets no pooled verdict (62 of 150 sweeps here: one study's
    fits are identified ~75% of the time); where all three are identified, 'moved A' is given
    for a real 0.05 in 51 of 88 (one study alone: 14 of 60 sweeps of all). Measured under the
    null: 'moved A' 4 of 150."""
    noise = NoiseModel(mid_frac=0.2, seed_sd_A=0.005, seed_sd_logB=0.05)
    g = Group("grpo", "", 400, 20, 4)
    n = 150
    cells = effect_cells(g, g, noise, n, seed=1, replications=(4, 4, 4))
    assert all(len(v) == n for v in cells.values())

    def count(truth, pred):
        return sum(map(pred, cells[truth]))

    moved_a = lambda v: v.startswith("moved A")  # noqa: E731
    no_effect_a = lambda v: v in ("no effect", "no effect on A", "only B")  # noqa: E731
    refused = lambda v: v.endswith("in some study")  # noqa: E731
    for truth in ("null", "B"):
        assert clopper_pearson(count(truth, moved_a), n)[0] <= 0.05, truth
    assert clopper_pearson(count("edge", no_effect_a), n)[0] <= 0.05
    pooled = n - count("A", refused)
    assert 0.25 * n <= pooled <= 0.85 * n
    assert count("A", moved_a) / pooled >= 0.45


def test_two_looks_draw_exactly_the_single_look_runs():
    """The sequential rule's cells (analysis/halving.py's `resolved`): a look at the last step is
    the single look, verdict for verdict; a look half-way changes only the pairs it stopped, each
    to a resolved verdict, and the share it reports counts them."""
    from analysis.calibrate import two_look_cells
    from analysis.halving import RESOLVED
    noise = NoiseModel(mid_frac=0.2, seed_sd_A=0.005, seed_sd_logB=0.05)
    g = Group("grpo", "", 200, 10, 4, 2048, 1)
    single = effect_cells(g, g, noise, 8, seed=2, margin=0.05, n_boot=60)
    same, share = two_look_cells(g, g, noise, 200, 8, seed=2, margin=0.05, n_boot=60)
    assert same == single
    assert share == {t: sum(v in RESOLVED for v in single[t]) / 8 for t in single}
    half, share = two_look_cells(g, g, noise, 120, 8, seed=2, margin=0.05, n_boot=60)
    for t in single:
        changed = [a for a, b in zip(half[t], single[t]) if a != b]
        assert all(v in RESOLVED for v in changed)
        assert len(changed) <= round(share[t] * 8)
    assert sum(share.values()) > 0  # measured: 1 of 8 under A and under edge (moved A at 120)


def test_cli_look_at(tmp_path, capsys):
    from analysis.cli import calibrate_main
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dapo]\nset:\n  train.steps: 60\n"
                    "  eval.every: 10\nseeds: 2\n")
    assert calibrate_main([str(spec), "--sweeps", "4", "--bootstrap", "40", "--look-at", "30",
                           "--out", str(tmp_path / "c.csv")]) == 0
    table = pd.read_csv(tmp_path / "c.csv")
    looked = table[table["setting"].str.startswith("looks at step 30 and the end: grpo 60 steps")]
    assert len(looked) == 8 and looked["stopped_early"].between(0, 1).all()
    capsys.readouterr()
    for bad in (["--look-at", "60"], ["--look-at", "0"], ["--look-at", "30", "--replications",
                                                           "2,2"]):
        assert calibrate_main([str(spec)] + bad) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--look-at" in err


def test_a_look_at_fewer_seeds_draws_the_same_runs():
    """Adding seeds to what a look leaves open (a report's resolve_at) is a second look too: a
    look at every seed is the single look, verdict for verdict; a look at 2 of 4 seeds changes
    only the pairs it stopped, each to a resolved verdict, and the share it reports counts them."""
    from analysis.calibrate import two_look_cells
    from analysis.effects import RESOLVED
    noise = NoiseModel(mid_frac=0.2, seed_sd_A=0.005, seed_sd_logB=0.05)
    g = Group("grpo", "", 200, 10, 4, 2048, 1)
    single = effect_cells(g, g, noise, 8, seed=2, margin=0.05, n_boot=60)
    same, all_seeds = two_look_cells(g, g, noise, None, 8, seed=2, margin=0.05, n_boot=60,
                                     look_seeds=4)
    assert same == single
    few, share = two_look_cells(g, g, noise, None, 8, seed=2, margin=0.05, n_boot=60,
                                look_seeds=2)
    for t in single:
        changed = [a for a, b in zip(few[t], single[t]) if a != b]
        assert all(v in RESOLVED for v in changed)
        assert len(changed) <= round(share[t] * 8)
    # measured: the 2-seed look stops 1 of 8 null pairs (the full look none) and changes its verdict
    assert share != all_seeds and any(a != b for t in single for a, b in zip(few[t], single[t]))


def test_cli_look_at_seeds(tmp_path, capsys):
    from analysis.cli import calibrate_main
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dapo]\nset:\n  train.steps: 60\n"
                    "  eval.every: 10\nseeds: 3\n")
    for args, where in ((["--look-at-seeds", "2"], "2 seeds"),
                        (["--look-at", "30", "--look-at-seeds", "2"], "step 30 with 2 seeds")):
        assert calibrate_main([str(spec), "--sweeps", "4", "--bootstrap", "40", *args,
                               "--out", str(tmp_path / "c.csv")]) == 0
        table = pd.read_csv(tmp_path / "c.csv")
        looked = table[table["setting"].str.startswith(f"looks at {where} and the end: grpo 60")]
        assert len(looked) == 8 and looked["stopped_early"].between(0, 1).all()
    capsys.readouterr()
    for bad in (["--look-at-seeds", "3"], ["--look-at-seeds", "1"],
                ["--look-at-seeds", "2", "--replications", "3,3"]):
        assert calibrate_main([str(spec)] + bad) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--look-at-seeds" in err


def test_claims_look_at_fewer_seeds_draw_the_same_runs():
    """The seed claims under a seed look (`calibrate --look-at-seeds`, a report's claim budget
    run after it was read): a look at every seed is the single look, draw for draw; a look at
    fewer changes only the draws it decided, each to a decided verdict, and counts them."""
    from analysis.calibrate_claims import claim12_cells
    from analysis.variance import CLAIM4_DECIDED
    noise = NoiseModel()
    pairs = [("s", i) for i in range(6)]
    for claim in ("claim 1", "claim 2"):
        single = claim12_cells(pairs, 40, noise, 30, seed=5, claim=claim)
        assert "stopped" not in single
        same = claim12_cells(pairs, 40, noise, 30, seed=5, claim=claim, look_seeds=6)
        assert {t: same[t] for t in single} == single
        few = claim12_cells(pairs, 40, noise, 30, seed=5, claim=claim, look_seeds=3)
        for t in single:
            changed = [a for a, b in zip(few[t], single[t]) if a != b]
            assert all(v != "not resolved" for v in changed)
            assert len(changed) <= round(few["stopped"][t] * 30)
        assert any(few["stopped"][t] > 0 for t in single)
    presets = {"s": ["a", "b", "c", "d", "e"]}
    single = claim4_cells(presets, 6, noise, 256, 1, 40, seed=3)
    same = claim4_cells(presets, 6, noise, 256, 1, 40, seed=3, look_seeds=6)
    assert {t: same[t] for t in single} == single and same["stopped"]["zero"] <= 0.1
    few = claim4_cells(presets, 6, noise, 256, 1, 40, seed=3, look_seeds=3)
    for t in single:
        changed = [a for a, b in zip(few[t], single[t]) if a != b]
        assert all(v in CLAIM4_DECIDED for v in changed)
        assert len(changed) <= round(few["stopped"][t] * 40)
    assert few["stopped"]["alt"] > 0


def test_calibrate_table_labels_the_claims_seed_look():
    """`calibrate(look_seeds=N)` takes the look for every claim whose runs have more than N seeds,
    names it in the setting and gives the share it decided; one look for the rest."""
    from analysis.calibrate import calibrate
    groups = [Group(v, "s", 40, 10, 4, 256, 1) for v in
              ("grpo", "dr_grpo", "dapo", "gspo", "grpo+clip_high=0.28")]
    table = calibrate(groups, NoiseModel(), n_sweeps=6, seed=1, n_boot=40, look_seeds=2)
    for claim in ("claim 1", "claim 2", "claim 4"):
        rows = table[table["verdict"].str.startswith(claim)]
        assert len(rows) and rows["setting"].str.startswith("looks at 2 seeds and all: ").all()
        assert rows["stopped_early"].between(0, 1).all()
    one = calibrate(groups, NoiseModel(), n_sweeps=6, seed=1, n_boot=40)
    assert not one["setting"].str.startswith("looks at").any()


def _claim_inputs_by_hand() -> dict:
    # claim 2: late entropy per run, seeds 0-3. grpo 0.08, 0.10, 0.09, 0.11 (var 1.6667e-4);
    # clip 0.07, 0.10, 0.08, 0.12 (var 4.9167e-4); pooled sd sqrt(3.2917e-4) = 0.018143;
    # paired clip - grpo -0.01, 0, -0.01, +0.01: sd 0.0095743
    t2 = [["grpo", "s", i, v] for i, v in enumerate([0.08, 0.10, 0.09, 0.11])]
    t2 += [["clip", "s", i, v] for i, v in enumerate([0.07, 0.10, 0.08, 0.12])]
    # claim 1: length change per run; grpo 3, 1, 5, -1 (var 6.6667), dr 2, 1, 3, -2 (var 4.6667);
    # pooled sd sqrt(5.6667) = 2.3805; paired grpo - dr 1, 0, 2, 1: sd 0.81650
    t1 = [["grpo", "s", i, v] for i, v in enumerate([3.0, 1.0, 5.0, -1.0])]
    t1 += [["dr_grpo", "s", i, v] for i, v in enumerate([2.0, 1.0, 3.0, -2.0])]
    # claim 4: 3 algorithms x 2 seeds. in_dist gains (r0 0) means 0.1, 0.4, 0.7: MS_b 0.18,
    # MS_w 0.02, V 0.08 (spread 0.28284), within sd 0.14142; held out all 0 and 0.2: V 0 (floored),
    # within sd 0.14142
    fin = [[v, "s", "in_dist", g, 0.0] for v, gs in (("a", (0.0, 0.2)), ("b", (0.3, 0.5)),
                                                     ("c", (0.6, 0.8))) for g in gs]
    fin += [[v, "s", "held_out", g, 0.0] for v in "abc" for g in (0.0, 0.2)]
    return {"eval_set": "in_dist", "held_out": "held_out",
            "1": {"first": "grpo", "second": "dr_grpo", "trend": t1, "level": [10.0, 99]},
            "2": {"first": "clip", "second": "grpo", "confounded": False, "trend": t2,
                  "level": [0.08, 99], "clip_frac": [0.01, 99]},
            "4": {"presets": ["a", "b", "c"], "finals": fin}}


def test_measured_claim_noise_by_hand():
    from analysis.calibrate_claims import measured_claim_noise
    m = measured_claim_noise(_claim_inputs_by_hand())
    # claim 2: own = 0.0095743 / sqrt 2 = 0.0067700; shared = sqrt(0.018143^2 - 0.00677^2)
    # = 0.016832; the alternative twice the 10% margin: 0.016 nats
    assert m["entropy_level"] == 0.08 and m["entropy_step_sd"] == 0.0
    assert m["entropy_seed_sd"] == pytest.approx(0.0067700, rel=1e-4)
    assert m["entropy_shared_sd"] == pytest.approx(0.016832, rel=1e-4)
    assert m["entropy_effect"] == pytest.approx(0.016)
    # claim 1, in growth units (/ 0.75): sd 3.1740, paired sd 1.08866; own 0.76980, shared
    # sqrt(3.1740^2 - 0.7698^2) = 3.0792; GRPO's alternative growth twice the 5% margin: 1.0
    assert m["len_seed_sd"] == pytest.approx(0.76980, rel=1e-4)
    assert m["len_shared_sd"] == pytest.approx(3.0792, rel=1e-4)
    assert m["len_growth"] == pytest.approx(1.0) and m["len_level"] == 10.0
    assert m["spread"] == pytest.approx(0.28284, rel=1e-4) and m["spread_alt_held_out"] == 0.0
    assert m["gain_sd_in_dist"] == pytest.approx(0.14142, rel=1e-4)
    assert m["gain_sd_held_out"] == pytest.approx(0.14142, rel=1e-4)
    assert measured_claim_noise({"eval_set": "in_dist", "held_out": "held_out"}) == {}


def test_simulated_claim_runs_scatter_as_measured():
    """At the measured noise, the simulated per-run values of claims 1 and 2 scatter as the
    study's did (one run's sd and the paired difference's sd), and claim 4's simulated gains
    carry the measured within-algorithm sd on each set: the calibration simulates this study."""
    from dataclasses import replace

    from analysis.calibrate_claims import (_trend_frame, claim12_series, measured_claim_noise)
    from analysis.claims import paired_values
    inputs = _claim_inputs_by_hand()
    noise = replace(NoiseModel(), **measured_claim_noise(inputs))
    rng = np.random.default_rng(0)
    n, steps = 4000, 40
    pairs = [("s", i) for i in range(n)]
    for claim, names, how, (sd, sd_diff) in (
            ("claim 1", ("grpo", "dr_grpo"), "change", (2.3805, 0.81650)),
            ("claim 2", ("grpo", "clip"), "late_mean", (0.018143, 0.0095743))):
        trend = _trend_frame(claim12_series(rng, noise, claim, n, steps, 0.0), pairs, how, steps)
        one = trend.loc[trend["variant"] == names[0], "value"].std(ddof=1)
        diff = np.std(paired_values(trend, *names), ddof=1)
        assert one == pytest.approx(sd, rel=0.05) and diff == pytest.approx(sd_diff, rel=0.05)
    # claim 4: the measured within-algorithm sd replaces the seed sd and the binomial eval noise.
    # Spreads 0.28 in-distribution vs 0 held out with 6 algorithms x 6 seeds: a within sd of
    # 0.001 on both sets resolves the alternative every time, 1.0 never (the binomial eval noise
    # of 256 items alone, ~0.03, would resolve it too)
    alt = replace(noise, spread=0.28, spread_alt_held_out=0.0)
    presets = {"s": list("abcdef")}
    sharp = claim4_cells(presets, 6, replace(alt, gain_sd_in_dist=1e-3, gain_sd_held_out=1e-3),
                         256, 1, 20, seed=0)
    blurred = claim4_cells(presets, 6, replace(alt, gain_sd_in_dist=1.0, gain_sd_held_out=1.0),
                           256, 1, 20, seed=0)
    binomial = claim4_cells(presets, 6, replace(alt, gain_sd_in_dist=0.0, gain_sd_held_out=0.0,
                                                gain_seed_sd=1e-3), 256, 1, 20, seed=0)
    assert sharp["alt"].count("reproduces") == 20 and blurred["alt"].count("reproduces") == 0
    assert binomial["alt"].count("reproduces") >= 15


def test_cli_claim_noise_from(tmp_path, capsys):
    """`calibrate --claim-noise-from claim_inputs.json` simulates the claims at a study's own
    measured noise (and says so); a file that is not one fails with one line, exit 2."""
    import json

    from analysis.cli import calibrate_main
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dr_grpo]\nset:\n  train.steps: 40\n"
                    "  eval.every: 10\nseeds: 3\n")
    inputs = tmp_path / "claim_inputs.json"
    inputs.write_text(json.dumps(_claim_inputs_by_hand()))
    assert calibrate_main([str(spec), "--sweeps", "3", "--bootstrap", "30",
                           "--claim-noise-from", str(inputs)]) == 0
    out = capsys.readouterr().out
    assert "incorrect responses of 10 tokens, GRPO grows 1," in out
    assert "per-run sd of the growth 0.77 each arm + 3.08 shared by paired runs" in out
    assert "entropy 0.08 nats, clip-higher +0.016" in out
    # a flag still overrides the measured value
    assert calibrate_main([str(spec), "--sweeps", "3", "--bootstrap", "30",
                           "--claim-noise-from", str(inputs), "--spread", "0.5"]) == 0
    assert "claim 4: spreads 0.5/0.5 (null)" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert calibrate_main([str(spec), "--claim-noise-from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--claim-noise-from" in err


def test_plan_claims_before_the_runs(tmp_path, capsys):
    """`rlablate plan SPEC --claim-noise-from claim_inputs.json` says in advance what the design
    can decide of claims 1, 2 and 4 (their rows of the calibration at the spec's seeds, at the
    pilot's claim noise) and how often the pilot's own estimates, as the truth, decide claim 4;
    --write pre-registers them."""
    import json

    import yaml

    import argparse

    from analysis.plan_cli import configure_plan_parser, run_plan
    from analysis.resolve import claim4_share

    def plan_main(argv):
        return run_plan(configure_plan_parser(argparse.ArgumentParser()).parse_args(argv))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dr_grpo, gspo]\ninclude:\n"
                    "  - {algo.preset: grpo, algo.clip_high: 0.28}\nset:\n  train.steps: 40\n"
                    "  eval.every: 10\nseeds: 3\n")
    inputs = tmp_path / "claim_inputs.json"
    by_hand = _claim_inputs_by_hand()
    inputs.write_text(json.dumps(by_hand))
    assert plan_main([str(spec), "--sweeps", "10", "--no-budget", "--claim-noise-from",
                      str(inputs), "--write"]) == 0
    out = capsys.readouterr().out
    assert "the seed claims at this design" in out
    for row in ("| claim 1 reproduces | claim 1 (3 paired runs, 40 common steps) | power | alt |",
                "| claim 2 no effect | claim 2 (3 paired runs, 40 common steps) | power | null |",
                "| claim 4 reproduces | claim 4 (3 presets x 1 scales x 3 seeds) | power | alt |"):
        assert row in out
    fin = pd.DataFrame(by_hand["4"]["finals"],
                       columns=["variant", "scale_value", "eval_set", "final", "r0"])
    share = claim4_share(fin, "in_dist", "held_out", 3, 100, 0)["reproduces"]
    assert (f"| claim 4 reproduces | claim 4 (3 presets x 3 seeds), the pilot's estimates as the "
            f"truth | share | pilot | 100 | {share:.3f} |") in out
    written = yaml.safe_load(spec.read_text())["plan"]["claims"]
    assert written["claim 4 reproduces (share, pilot)"] == round(share, 3)
    assert 0 <= written["claim 1 reproduces (power, alt)"] <= 1
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert plan_main([str(spec), "--sweeps", "10", "--no-budget",
                      "--claim-noise-from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--claim-noise-from" in err
