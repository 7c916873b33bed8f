"""ScaleRL comparison rule, extrapolation error, eval-set resolution, OXRL spreads and the
cross-scale ranking (analysis/compare.py, analysis/leaderboard.py)."""
import numpy as np
import pandas as pd
import pytest

from analysis.bootstrap import CurveData, RunCurve, fit_curve_data
from analysis.compare import (check_extrapolation, compare_fits, mark_resolution,
                              resolvable_difference)
from analysis.fit import FitWindow, predict_reward
from analysis.leaderboard import rank_across_scales, spread_of_gains

R0 = 0.3
STEPS = np.arange(1, 31)
COMPUTE = STEPS * 8 * 2542.0 / 30


def group(label, a, b, c_mid=2542.0, sigma=0.0, seed=0, n=2):
    rng = np.random.default_rng(seed)
    runs = [RunCurve(f"{label}{s}", STEPS, COMPUTE,
                     predict_reward(COMPUTE, a, b, c_mid, R0) + rng.normal(0, sigma, STEPS.size),
                     np.full(STEPS.size, 0.01), R0, 0.01) for s in range(n)]
    return CurveData(label, runs)


def test_large_A_difference_is_decided_by_A():
    g1, g2 = group("x", 0.66, 1.2), group("y", 0.61, 2.5)
    c = compare_fits("x", fit_curve_data(g1), g1, "y", fit_curve_data(g2), g2)
    assert c.decided_by == "A" and c.winner == "x"
    assert c.delta == pytest.approx(0.05, abs=1e-4)
    assert "wins on A" in c.describe()


def test_A_within_margin_is_decided_by_B_at_the_shared_A():
    """Same A (0.61 vs 0.62 < 0.02): the one with the higher B (ScaleRL: CISPO 2.01 vs DAPO 1.77
    in their leave-one-out study) wins although its A is lower."""
    cispo, dapo = group("cispo", 0.61, 2.01), group("dapo", 0.62, 1.77)
    c = compare_fits("cispo", fit_curve_data(cispo), cispo, "dapo", fit_curve_data(dapo), dapo)
    assert c.decided_by == "B" and c.winner == "cispo"
    assert c.A_shared == pytest.approx(0.615, abs=1e-4)
    assert c.B_first > c.B_second
    assert "refit at shared A" in c.describe()
    # with a tighter margin the same pair is decided by A, and dapo wins
    c = compare_fits("cispo", fit_curve_data(cispo), cispo, "dapo", fit_curve_data(dapo), dapo,
                     margin=0.005)
    assert c.decided_by == "A" and c.winner == "dapo"


def test_extrapolation_error_is_a_number():
    exact = check_extrapolation(group("g", 0.61, 1.92), fit_fraction=0.5)
    assert exact["n_fit"] == 2 * 15 and exact["n_heldout"] == 15
    assert exact["rmse"] < 1e-6 and exact["max_abs_error"] < 1e-6
    noisy = check_extrapolation(group("g", 0.61, 1.92, sigma=0.01, seed=3, n=3), fit_fraction=0.5)
    assert 0.0 < noisy["rmse"] < 0.03 and noisy["max_abs_error"] >= noisy["rmse"]
    assert abs(noisy["dA"]) < 0.05


def test_extrapolation_with_too_little_data_says_why():
    rec = check_extrapolation(group("g", 0.61, 1.92), fit_fraction=0.05)
    assert np.isnan(rec["rmse"]) and "refused" in rec["message"] and "too few points" in rec["message"]


def test_resolvable_difference_and_marking():
    assert resolvable_difference(0.02, 0.02) == pytest.approx(1.959964 * np.sqrt(2) * 0.02, rel=1e-5)
    # 256 items, pass rate ~0.5, k=1: se = 0.5 / 16 = 0.03125 -> resolvable ~0.087
    table = pd.DataFrame({"v": ["a", "b", "c"], "rate": [0.60, 0.55, 0.40],
                          "se": [0.03125, 0.03125, 0.03125]})
    marks = mark_resolution(table, "rate", "se", "v").set_index(["first", "second"])
    assert marks.loc[("a", "b"), "verdict"] == "not resolved"
    assert marks.loc[("a", "c"), "verdict"] == "resolved"
    assert marks.loc[("a", "b"), "resolvable"] == pytest.approx(0.0866, abs=1e-3)


def test_rank_across_scales_kendall_and_inversions():
    board = pd.DataFrame({
        "scale": ["1m"] * 3 + ["4m"] * 3,
        "variant": ["grpo", "dapo", "cispo", "cispo", "dapo", "grpo"],
        "rank": [1, 2, 3, 1, 2, 3],
        "A": [0.70, 0.65, 0.60, 0.75, 0.74, 0.62]})
    ranks, taus, flips = rank_across_scales(board)
    assert taus["kendall_tau"].item() == pytest.approx(-1.0)
    assert len(flips) == 3  # every pair flips
    flips = flips.set_index(["first", "second"])
    assert not flips.loc[("cispo", "grpo"), "within_margin"]
    assert flips.loc[("cispo", "dapo"), "within_margin"]  # 0.01 apart at 4m: not a firm flip
    assert ranks.set_index("variant").loc["cispo", "4m"] == 1


def test_spread_of_gains_and_ratio():
    """OXRL's numbers: spread 19.33 pp in-distribution, 0.54 pp held-out -> ratio ~36."""
    gains = pd.DataFrame({
        "scale": ["7B"] * 4, "variant": ["a", "b", "a", "b"],
        "eval_set": ["in_dist", "in_dist", "held_out", "held_out"],
        "gain": [0.2, 0.2 - 0.1933, 0.010, 0.010 - 0.0054], "fit_gain": [0.3, 0.1, 0.02, 0.01]})
    spreads = spread_of_gains(gains).set_index("eval_set")
    assert spreads.loc["in_dist", "spread_gain"] == pytest.approx(0.1933)
    assert spreads.loc["held_out", "spread_gain"] == pytest.approx(0.0054)
    assert spreads.loc["held_out", "ratio_spread_gain"] == pytest.approx(35.8, abs=0.1)
    assert spreads.loc["held_out", "ratio_spread_fit_gain"] == pytest.approx(20.0)
    assert spreads.loc["in_dist", "best"] == "a"


def test_leaderboard_ranks_only_converged_fits(tmp_path):
    """A straight line in log-compute never saturates: its fit stops with A at the bound 1. That
    A is an extrapolation and must not outrank a saturating curve with a lower, identified A."""
    import json

    import yaml

    from analysis.fit import FitWindow
    from analysis.groups import assign_groups, detect_axes, final_points, fit_all, summarise_groups
    from analysis.leaderboard import rank_groups
    from analysis.load import load_results

    def run(name, preset, curve):
        d = tmp_path / "s" / name
        d.mkdir(parents=True)
        (d / "config.yaml").write_text(yaml.safe_dump({"algo": {"preset": preset}, "run": {"seed": 0}}))
        rows = [{"kind": "eval", "step": s, "compute/flops": s * 1e12,
                 "eval/in_dist/pass@1": curve(s), "eval/in_dist/stderr": 0.01}
                for s in range(0, 201, 10)]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "summary.json").write_text(json.dumps({"status": "finished"}))

    run("sat", "grpo", lambda s: 0.3 + 0.3 / (1 + (40 / s) ** 1.5) if s else 0.3)  # A = 0.6
    run("lin", "dapo", lambda s: 0.3 + 0.002 * s)  # no saturation
    res = load_results(tmp_path)
    axes = detect_axes(res)
    fits = fit_all(res, axes, window=FitWindow(), n_boot=0)
    groups = summarise_groups(final_points(res, assign_groups(res, axes)))
    board, comps = rank_groups(fits, groups, "in_dist")
    board = board.set_index("variant")
    assert board.loc["grpo", "rank"] == 1 and bool(board.loc["grpo", "converged"])
    assert board.loc["grpo", "A"] == pytest.approx(0.6, abs=0.01)
    assert pd.isna(board.loc["dapo", "rank"]) and not board.loc["dapo", "converged"]
    assert board.loc["dapo", "A"] > board.loc["grpo", "A"]  # higher, but not identified
    assert comps.empty  # one ranked group: no neighbour to compare with


def test_rank_by_gain_across_scales_when_fits_cannot_rank():
    from analysis.leaderboard import rank_gains_across_scales
    gains = pd.DataFrame([
        {"scale": s, "variant": v, "eval_set": e, "gain": g}
        for s, order in (("tiny-0.3m", [0.01, 0.03, 0.02]), ("tiny-1m", [0.05, 0.09, 0.07]))
        for v, g in zip(("a", "b", "c"), order) for e in ("in_dist", "held_out")])
    gains.loc[(gains["scale"] == "tiny-1m") & (gains["variant"] == "a"), "gain"] = [0.10, 0.0]
    ranks, taus = rank_gains_across_scales(gains, "in_dist")
    r = ranks.set_index("variant")
    assert r["tiny-0.3m"].tolist() == [3, 1, 2] and r["tiny-1m"].tolist() == [1, 2, 3]
    # orders (b, c, a) vs (a, b, c): one concordant pair of three -> tau = -1/3
    assert taus.iloc[0]["kendall_tau"] == pytest.approx(-1 / 3) and taus.iloc[0]["n_variants"] == 3


def test_cycle_of_scalerl_decisions_gets_no_strict_order():
    """X beats Y on B (A within the margin), Z beats X on A (dA >= margin), Y beats Z on B:
    a cycle. The three share rank 1 and say so; a fourth variant below all of them is #4."""
    from analysis.leaderboard import consistent_ranks
    winners = {("X", "Y"): "X", ("X", "Z"): "Z", ("Y", "Z"): "Y",
               ("W", "X"): "X", ("W", "Y"): "Y", ("W", "Z"): "Z"}
    ranks, cycles = consistent_ranks(["X", "Y", "Z", "W"], winners)
    assert ranks == {"X": 1, "Y": 1, "Z": 1, "W": 4}
    assert cycles == [("X", "Y", "Z")]
    ranks, cycles = consistent_ranks(["X", "Y", "Z"], {("X", "Y"): "X", ("Y", "Z"): "Y",
                                                       ("X", "Z"): "X"})
    assert ranks == {"X": 1, "Y": 2, "Z": 3} and cycles == []
    ranks, _ = consistent_ranks(["X", "Y"], {("X", "Y"): None})  # undecided: tied
    assert ranks == {"X": 1, "Y": 1}


def test_non_transitive_triple_from_real_fits_is_flagged_in_the_leaderboard():
    """Noise-free curves built so that the ScaleRL rule cycles: A_Y = 0.60, A_X = 0.59,
    A_Z = 0.611 (X-Y and Y-Z within 0.02, Z-X = 0.021), B_X 3.0 > B_Y 2.0 > B_Z 1.2."""
    from analysis.bootstrap import CurveData, RunCurve, fit_curve_data, window_curve
    from analysis.groups import GroupFit
    from analysis.leaderboard import rank_groups
    c = np.linspace(1, 40, 40)
    fits = []
    for name, a, b in (("X", 0.59, 3.0), ("Y", 0.60, 2.0), ("Z", 0.611, 1.2)):
        y = predict_reward(c, a, b, 8.0, 0.3)
        curve = CurveData(name, [RunCurve(name, np.arange(1, 41), c, y, np.full(40, 0.003),
                                          0.3, 0.003)])
        g = GroupFit("group", name, "1m", "in_dist", curve, window_curve(curve, FitWindow()))
        g.fit = fit_curve_data(g.windowed)
        assert g.fit.identified, g.fit.message
        fits.append(g)
    groups = pd.DataFrame(columns=["variant", "scale", "eval_set", "final", "final_se"])
    board, comps = rank_groups(fits, groups, "in_dist")
    assert board["rank"].tolist() == [1, 1, 1]
    assert all("cycle of ScaleRL decisions" in n for n in board["note"])
    assert comps["in_cycle"].all()


def _paired_sweep(root, ref_shift, var_shift, steps=200, c_mid=40e12):
    """GRPO and DAPO, one seed per entry of the shift lists: seed s's ceiling is 0.60 (GRPO) /
    0.62 (DAPO) plus its shift; the eval noise is small (sd 0.002) next to the shifts (0.02)."""
    from analysis.synth import CurveSpec, RunSpec, make_config, write_run
    for algo, base, shifts in (("grpo", 0.60, ref_shift), ("dapo", 0.62, var_shift)):
        for seed, shift in enumerate(shifts):
            spec = RunSpec(config=make_config(algo, "tiny-0.3m", seed),
                           curves={"in_dist": CurveSpec(base + shift, 1.5, c_mid, 0.30)},
                           steps=steps, eval_every=10, noise=0.002, seed=1000 + seed)
            write_run(root / f"{algo}-s{seed}", spec)


def test_seed_pairing_is_measured_and_decides_how_much_pairing_narrows_dA(tmp_path):
    """seed_rho_A is the correlation of the per-run A of variant and reference across seeds:
    ~1 where a seed's ceiling shift carries over to the other variant (the paired interval of dA
    is then narrow: the shifts cancel), the hand-computed correlation of the shifts where they do
    not (here -0.2: pairing cannot help, and the interval is as wide as the shifts' spread)."""
    from analysis.report import AnalysisOptions, run_analysis
    shifts = np.array([-0.04, -0.02, 0.0, 0.02, 0.04])
    perm = shifts[[2, 4, 1, 0, 3]]  # corr(shifts, perm) by hand: (0 - 2 + 0 - 2 + 2) / 10 = -0.2
    assert np.corrcoef(shifts, perm)[0, 1] == pytest.approx(-0.2)
    rows = {}
    for name, var_shift in (("shared", shifts), ("independent", perm)):
        _paired_sweep(tmp_path / name, shifts, var_shift)
        done = run_analysis(AnalysisOptions(str(tmp_path / name), n_boot=200))
        rows[name] = done["tables"]["effects"].iloc[0]
        assert "`seed_rho_A`" in (done["out"] / "report.md").read_text()
    shared, indep = rows["shared"], rows["independent"]
    assert shared["seed_pairs"] == 5 and indep["seed_pairs"] == 5
    assert shared["seed_rho_A"] > 0.98
    assert indep["seed_rho_A"] == pytest.approx(-0.2, abs=0.1)
    assert shared["dA"] == pytest.approx(0.02, abs=0.005)
    width = {k: r["dA_hi"] - r["dA_lo"] for k, r in rows.items()}
    assert width["shared"] < 0.25 * width["independent"], width
