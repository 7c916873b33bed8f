"""The power planner (`rlablate plan`), the equivalence verdicts and the paired bootstrap.

Known truths: synthetic pilots with a known curve and seed noise (analysis.synth), verdicts from
intervals computed by hand, and a pair of groups whose seed effects are shared, where pairing
must narrow the dA interval by the amount the shared part contributes.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from analysis import plan, plan_report
from analysis.bootstrap import CurveData, RunCurve, bootstrap_fit, fit_curve_data
from analysis.effects import effect_intervals, effect_verdict
from analysis.fit import FitWindow
from analysis.groups import detect_axes, fit_all
from analysis.load import load_results
from analysis.schedule import Group
from analysis.synth import CurveSpec, RunSpec, make_config, write_run

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------
# Verdicts (by hand)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dA, a_ci, b_ci, expected", [
    (0.001, (-0.012, 0.015), (0.70, 1.60), "no effect on A"),     # A equal, B undecided
    (0.001, (-0.012, 0.015), (0.90, 1.10), "no effect"),          # both equal
    (0.001, (-0.012, 0.015), (1.30, 2.10), "only B"),             # A equal, B moved
    (0.001, (-0.030, 0.015), (0.70, 1.60), "not resolved"),       # A interval crosses -0.02
    (0.060, (0.030, 0.090), (0.70, 1.60), "moved A"),
    (0.015, (0.005, 0.025), (0.70, 1.60), "not resolved"),        # excludes 0 but |dA| < margin
])
def test_effect_verdicts_by_hand(dA, a_ci, b_ci, expected):
    assert effect_verdict(dA, a_ci, b_ci, True, margin=0.02) == expected


def test_unidentified_fits_give_no_verdict_even_inside_the_margin():
    assert effect_verdict(0.0, (-0.001, 0.001), (0.99, 1.01), False).startswith("not resolved")


# ------------------------------------------------------------------------------------------------
# Pairing: the same seeds and items in replicate r of both groups
# ------------------------------------------------------------------------------------------------
def _group(label, A, offsets, rng, steps=np.arange(10, 201, 10), R0=0.3, B=1.5, c_mid=40.0):
    runs = []
    for s, off in enumerate(offsets):
        frac = 1 / (1 + (c_mid / steps) ** B)
        y = R0 + (A + off - R0) * frac + rng.normal(0, 0.004, steps.size)
        runs.append(RunCurve(f"{label}-s{s}", steps, steps.astype(float), y,
                             np.full(steps.size, 0.004), R0, 0.004))
    return CurveData(label, runs, FitWindow())


def test_paired_bootstrap_cancels_shared_seed_effects():
    """Seed s shifts both variants' ceilings by the same offset (a shared prompt stream): the
    paired dA interval is much narrower than the one from the same runs with the variant's seeds
    in reverse order (unpaired draws of the same data)."""
    rng = np.random.default_rng(0)
    offsets = [-0.04, -0.01, 0.0, 0.02, 0.05, -0.03]
    ref = _group("ref", 0.60, offsets, rng)
    var = _group("var", 0.60, offsets, rng)
    shuffled = CurveData("var", list(reversed(var.runs)), FitWindow())

    def width(a, b):
        fa, fb = fit_curve_data(a), fit_curve_data(b)
        ba = bootstrap_fit(a, 400, seed=0, point=fa)
        bb = bootstrap_fit(b, 400, seed=0, point=fb)
        (lo, hi), _ = effect_intervals(bb, ba)
        return hi - lo, lo, hi

    paired_w, lo, hi = width(ref, var)
    unpaired_w, _, _ = width(ref, shuffled)
    assert lo < 0 < hi  # no true difference
    # measured: 0.029 paired vs 0.081 unpaired (the rest is eval noise and the 6-seed widening)
    assert paired_w < 0.5 * unpaired_w, (paired_w, unpaired_w)


def test_fit_all_orders_each_groups_runs_by_seed(tmp_path):
    """Run ids sort s10 before s2; the groups' runs must still come in seed order (pairing)."""
    for seed in (2, 10, 1):
        for algo in ("grpo", "dapo"):
            cfg = make_config(algo, "1m", seed)
            cfg["run"]["name"] = f"{'zz' if seed == 1 else 'aa'}-{algo}"  # names against order
            write_run(tmp_path / f"{algo}-s{seed}", RunSpec(
                config=cfg, curves={"in_dist": CurveSpec(0.6, 1.5, 4e13, 0.3)}, steps=100,
                eval_every=10, seed=seed))
    res = load_results(tmp_path)
    fits = fit_all(res, detect_axes(res), window=FitWindow(), n_boot=0, per_run=False)
    for g in fits:
        seeds = [res.runs.set_index("run_id").loc[r.run_id, "run.seed"] for r in g.curve.runs]
        assert seeds == [1, 2, 10], (g.label, seeds)


# ------------------------------------------------------------------------------------------------
# The planner
# ------------------------------------------------------------------------------------------------
def _pilot(root, seeds=(0, 1, 2, 3), A=0.55, a_sd=0.01, n_items=256, steps=200, every=10, k=4,
           scale="tiny-1m"):
    """GRPO alone, the ScaleRL curve with C_mid at step 30 (1e12 FLOPs per step)."""
    rng = np.random.default_rng(7)
    for seed in seeds:
        spec = RunSpec(config=make_config("grpo", scale, seed),
                       curves={"in_dist": CurveSpec(A + rng.normal(0, a_sd), 1.5, 30e12, 0.25)},
                       steps=steps, eval_every=every, n_items=n_items, k=k, seed=100 + seed)
        write_run(root / f"grpo-{scale}-s{seed}", spec)


def test_pilot_noise_recovers_the_known_curve(tmp_path):
    _pilot(tmp_path)
    groups = [Group("grpo", "tiny-1m", 200, 10, 4)]
    p = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", groups)
    assert p.noise.R0 == pytest.approx(0.25, abs=0.03)
    assert p.noise.A == pytest.approx(0.55, abs=0.02)
    assert p.mid_steps == pytest.approx(30, rel=0.25)
    assert p.noise.B == pytest.approx(1.5, rel=0.4)
    # synth's items: starts drawn with sd 0.15 around R0 (clipped at 0.02)
    assert 0.08 < p.noise.item_spread < 0.2
    assert p.noise.seed_sd_A < 0.05


def test_pilot_noise_is_measured_per_scale(tmp_path):
    """A pilot at two scales: each scale's plan uses its own reference curve; a scale the pilot
    did not run falls back to the one with the most reference runs."""
    _pilot(tmp_path, A=0.55)
    _pilot(tmp_path, seeds=(0, 1, 2), A=0.35, scale="tiny-0.3m")
    p = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", [])
    assert p.for_scale("tiny-1m").noise.A == pytest.approx(0.55, abs=0.03)
    assert p.for_scale("tiny-0.3m").noise.A == pytest.approx(0.35, abs=0.03)
    assert p.for_scale("tiny-4m") is p and p.noise.A == pytest.approx(0.55, abs=0.03)
    assert any(n.startswith("at tiny-0.3m: pilot: ") for n in p.notes)


def test_pilot_item_spread_with_one_sample_per_item(tmp_path):
    """k = 1: the spread comes from the covariance of an item's outcomes between evals (the
    binomial part is independent between evals); it must agree with the k = 4 estimate of the
    same truth and not be the raw 0/1 variance (sqrt(p(1-p)) ~ 0.45)."""
    _pilot(tmp_path / "k1", n_items=1024, k=1)
    _pilot(tmp_path / "k4", n_items=1024, k=4)
    groups = [Group("grpo", "tiny-1m", 200, 10, 4, 1024, 1)]
    k1 = plan.pilot_from_dir(str(tmp_path / "k1"), "grpo", "in_dist", groups)
    k4 = plan.pilot_from_dir(str(tmp_path / "k4"), "grpo", "in_dist", groups)
    assert any("k = 1" in n for n in k1.notes)
    assert 0.08 < k1.noise.item_spread < 0.2
    assert k1.noise.item_spread == pytest.approx(k4.noise.item_spread, abs=0.04)


def test_predicted_widths_shrink_with_seeds_and_match_a_direct_simulation(tmp_path):
    _pilot(tmp_path)
    pilot = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist",
                                [Group("grpo", "tiny-1m", 200, 10, 4)])
    w = {s: plan.simulate_widths(Group("grpo", "tiny-1m", 200, 10, s),
                                 Group("v", "tiny-1m", 200, 10, s), pilot.noise, pilot.mid_steps,
                                 n_sweeps=30, n_boot=200)
         for s in (3, 8)}
    assert w[3]["identified_rate"] > 0.8 and w[8]["identified_rate"] > 0.8
    assert w[8]["dA_width"] < 0.7 * w[3]["dA_width"], w
    # the table carries the same numbers and the rule mde = (z.975 + z.8) / (2 z.975) x width
    groups = [Group("grpo", "tiny-1m", 200, 10, 8), Group("grpo+x=1", "tiny-1m", 200, 10, 8)]
    table = plan.predict(groups, pilot, n_sweeps=30, n_boot=200, margin=0.0)
    row = table.iloc[0]
    assert row["variant"] == "grpo+x=1"
    assert row["dA_width"] == pytest.approx(w[8]["dA_width"], rel=0.3)
    assert row["mde_A"] == pytest.approx(0.7143 * row["dA_width"], rel=1e-3)
    # the spread of the width itself: its 10th-90th percentiles bracket the median, and the
    # share of sweeps within a factor 1.5 of the median is a probability
    assert row["dA_width_p10"] <= row["dA_width"] <= row["dA_width_p90"]
    assert 0 < row["p_within_1.5x"] <= 1


def test_planned_vs_achieved_checks_the_predicted_range():
    """A pre-registered plan with its 80% range: an achieved width inside it reads True, one
    outside False, and one without a recorded range None; ratios by hand."""
    import pandas as pd
    spec_plan = {"comparisons": {
        "a @ s": {"dA_width": 0.06, "dA_width_p10": 0.045, "dA_width_p90": 0.08},
        "b @ s": {"dA_width": 0.06, "dA_width_p10": 0.045, "dA_width_p90": 0.08},
        "c @ s": {"dA_width": 0.06}}}
    effects = pd.DataFrame([
        {"scale": "s", "variant": "a", "dA_lo": -0.03, "dA_hi": 0.04, "verdict": "x"},
        {"scale": "s", "variant": "b", "dA_lo": -0.05, "dA_hi": 0.06, "verdict": "x"},
        {"scale": "s", "variant": "c", "dA_lo": -0.03, "dA_hi": 0.03, "verdict": "x"}])
    out = plan.planned_vs_achieved(spec_plan, effects).set_index("comparison")
    assert out.loc["a @ s", "ratio"] == pytest.approx(0.07 / 0.06)
    assert list(out["in_80pct"]) == [True, False, None]
    assert out.loc["b @ s", "predicted_80pct"] == "0.045-0.080"


def _arm(root, algo, a_sd, seeds=(0, 1, 2, 3), A=0.55, scale="tiny-1m"):
    """A second arm beside :func:`_pilot`'s GRPO: the same curve, its own seed sd of A."""
    rng = np.random.default_rng(11)
    for seed in seeds:
        write_run(root / f"{algo}-{scale}-s{seed}", RunSpec(
            config=make_config(algo, scale, seed),
            curves={"in_dist": CurveSpec(A + rng.normal(0, a_sd), 1.5, 30e12, 0.25)},
            steps=200, eval_every=10, n_items=256, k=4, seed=300 + seed))


def test_each_arm_can_be_planned_with_its_own_noise(tmp_path):
    """A pilot of GRPO (seed sd of A ~0.01) and of a noisier arm (~0.06): with per-variant noise
    the noisy arm's own sd is measured and its predicted dA width grows beyond the width the
    reference's noise predicts; an arm the pilot did not run keeps the reference's noise."""
    _pilot(tmp_path, a_sd=0.01)
    _arm(tmp_path, "dapo", a_sd=0.06)
    groups = [Group("grpo", "tiny-1m", 200, 10, 4), Group("dapo", "tiny-1m", 200, 10, 4),
              Group("cispo", "tiny-1m", 200, 10, 4)]
    ref_only = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", groups)
    own = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", groups, per_variant=True)
    assert ref_only.by_variant == () and ref_only.for_variant("dapo", "tiny-1m") is None
    nz = own.for_variant("dapo", "tiny-1m")
    assert nz is not None and own.for_variant("cispo", "tiny-1m") is None
    assert nz.seed_sd_A > 2 * own.noise.seed_sd_A and 0.02 < nz.seed_sd_A < 0.15
    assert (nz.A, nz.item_spread) == (own.noise.A, own.noise.item_spread)  # truth: the reference's
    assert any(n.startswith("dapo @ tiny-1m: its own noise, seed sd from 4") for n in own.notes)
    a = plan.predict(groups, ref_only, n_sweeps=20, n_boot=150)
    b = plan.predict(groups, own, n_sweeps=20, n_boot=150)
    assert "noise" not in a.columns
    wa, wb = (t.set_index("variant")["dA_width"] for t in (a, b))
    assert wb["dapo"] > 1.5 * wa["dapo"], (wa, wb)
    assert wb["cispo"] == wa["cispo"]  # same simulation: the reference's noise
    assert dict(zip(b["variant"], b["noise"])) == {"cispo": "reference", "dapo": "own"}


def test_pilot_noise_is_matched_to_its_per_run_scatter_unless_raw(tmp_path):
    """The plan's noise: matched to the scatter of the pilot's per-run fits by default (a note
    says how, analysis/scatter.py), the per-run sds as measured with match=False; an arm with
    its own noise is matched too."""
    _pilot(tmp_path, a_sd=0.01)
    _arm(tmp_path, "dapo", a_sd=0.06)
    raw = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", [], per_variant=True, match=False)
    matched = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", [], per_variant=True)
    assert not any("scatter matched" in n for n in raw.notes)
    assert sum("scatter matched" in n for n in matched.notes) == 2  # the reference and dapo
    # GRPO's per-run fits scatter (~0.01) no more than the eval noise alone makes them: no seed
    # effect is left; dapo's (~0.06) is mostly seed effect, so its seed sd stays near the scatter
    assert matched.noise.seed_sd_A < 0.5 * raw.noise.seed_sd_A
    r, m = raw.for_variant("dapo", "tiny-1m"), matched.for_variant("dapo", "tiny-1m")
    assert m.seed_sd_A == pytest.approx(r.seed_sd_A, rel=0.2)
    assert m.seed_sd_logB < r.seed_sd_logB  # log B's fit error taken out
    assert (m.A, m.B) == (r.A, r.B)  # the truth is not touched


def test_the_simulator_takes_a_groups_own_noise():
    """Simulator.group(noise=...) draws that group's seed effects from the given noise and
    leaves the default group's draws unchanged."""
    from dataclasses import replace

    from analysis.calibrate import NoiseModel, Simulator
    g = Group("grpo", "tiny-1m", 200, 20, 40, 256, 1)
    quiet = NoiseModel(seed_sd_A=0.0, seed_sd_logB=0.0)
    loud = replace(quiet, seed_sd_A=0.08)
    finals = {}
    for name, nz in (("default", None), ("loud", loud)):
        sim = Simulator(quiet, 256, 4, np.random.default_rng(0))
        r0_i, a_i = sim.items(0.5, 0.25)
        c = sim.group("x", g, r0_i, a_i, sim.r0(r0_i), 1.5, 40.0, noise=nz)
        finals[name] = np.array([r.y[-1] for r in c.runs])
    assert finals["default"].std() < 0.02 < finals["loud"].std()


def test_the_reports_planner_simulates_the_design_that_ran(tmp_path):
    """A study evaluated with one sample per item: the report's own prediction (beside the
    achieved widths) must simulate k = 1 and measure the item spread the k = 1 way, as the runs
    did (it assumed k = 4, and read a k = 1 study's raw 0/1 variance as item spread)."""
    from types import SimpleNamespace

    import pandas as pd

    from analysis.groups import assign_groups
    from analysis.schedule import schedule_from_results
    _pilot(tmp_path, seeds=(0, 1, 2), n_items=512, k=1)
    rng = np.random.default_rng(8)
    for seed in (0, 1, 2):
        write_run(tmp_path / f"dapo-tiny-1m-s{seed}",
                  RunSpec(config=make_config("dapo", "tiny-1m", seed),
                          curves={"in_dist": CurveSpec(0.55 + rng.normal(0, 0.01), 1.5, 30e12,
                                                       0.25)},
                          steps=200, eval_every=10, n_items=512, k=1, seed=200 + seed))
    results = load_results(tmp_path)
    axes = detect_axes(results)
    fits = fit_all(results, axes, window=FitWindow(), n_boot=50, per_run=True)
    schedule = schedule_from_results(assign_groups(results, axes), results.evals)
    assert {(g.n_items, g.k) for g in schedule} == {(512, 1)}
    opt = SimpleNamespace(plan=4, seed=0, margin=0.05, reference="grpo")
    table, _ = plan_report.plan_tables(opt, fits, pd.DataFrame(), "in_dist", [], schedule)
    assert list(table["variant"]) == ["dapo"] and list(table["eval"]) == ["512x1"]
    assert any("k = 1" in n for n in table.attrs["notes"])


@pytest.mark.parametrize("sd, rho_eval", [(0.0, 0.0), (0.03, 0.0), (0.03, 0.6)])
def test_wobble_is_measured_from_per_run_residuals(sd, rho_eval):
    """Runs simulated with a known AR(1) wobble around the curve (plus binomial eval noise):
    the per-run fits' residuals give back its sd and its correlation between evals."""
    from analysis.calibrate import NoiseModel, Simulator
    every = 10
    noise = NoiseModel(R0=0.4, A=0.75, B=1.2, item_spread=0.2, seed_sd_A=0.0, seed_sd_logB=0.0,
                       wobble_sd=sd, wobble_rho_step=rho_eval ** (1 / every))
    sim = Simulator(noise, 2048, 1, np.random.default_rng(3))
    pairs = []
    for _ in range(8):
        r0_i, a_i = sim.items(noise.A, noise.R0)
        curve = sim.group("g", Group("grpo", "s", 400, every, 1), r0_i, a_i, sim.r0(r0_i),
                          noise.B, 60.0)
        pairs.append((curve.runs[0], fit_curve_data(curve)))
    got_sd, got_rho_step, n = plan.wobble_from_runs(pairs, every)
    assert n == 8
    assert got_sd == pytest.approx(sd, abs=0.008)
    if sd:
        assert got_rho_step ** every == pytest.approx(rho_eval, abs=0.2)


def test_wobble_lowers_the_predicted_identification():
    """The same design with and without the measured wobble: the planner must predict far
    fewer identified fits when runs wobble (session 13's study, which the wobble-free plan
    over-promised: 85% predicted, 4 of 7 arms and not the reference identified)."""
    from dataclasses import replace

    from analysis.calibrate import NoiseModel
    ref, var = Group("grpo", "s", 300, 20, 3, 2048, 1), Group("v", "s", 300, 20, 3, 2048, 1)
    base = NoiseModel(R0=0.39, A=0.74, B=1.2, item_spread=0.27, seed_sd_A=0.013,
                      seed_sd_logB=0.23)
    calm = plan.simulate_widths(ref, var, base, 15.0, n_sweeps=20, n_boot=100)
    rough = plan.simulate_widths(ref, var, replace(base, wobble_sd=0.03), 15.0, n_sweeps=20,
                                 n_boot=100)
    assert rough["identified_rate"] < calm["identified_rate"] - 0.2, (calm, rough)


def test_write_plan_keeps_the_spec_loadable_and_replaces_its_block(tmp_path):
    spec = tmp_path / "demo.yaml"
    text = (ROOT / "sweeps" / "demo-quick.yaml").read_text()
    spec.write_text(text.replace("../configs/default.yaml", str(ROOT / "configs/default.yaml")))
    _pilot(tmp_path / "pilot")
    args = type("A", (), {"pilot": str(tmp_path / "pilot"), "sweeps": 10, "seed": 0})
    import pandas as pd
    table = pd.DataFrame([{"variant": "dr_grpo", "scale": "tiny-1m", "dA_width": 0.08,
                           "B_ratio_factor": 1.3, "mde_A": 0.057, "equiv_margin80": 0.05,
                           "identified_rate": 0.9}])
    pilot = plan.pilot_from_dir(args.pilot, "grpo", "in_dist", [Group("grpo", "tiny-1m", 80, 20, 3)])
    for _ in range(2):  # twice: the second write replaces the first block
        plan.write_plan(spec, table, pilot, args)
    out = spec.read_text()
    assert out.count("\nplan:") + out.startswith("plan:") == 1
    assert out.splitlines()[0].startswith("#")  # the header comments stay on top
    data = yaml.safe_load(out)
    assert data["plan"]["comparisons"]["dr_grpo @ tiny-1m"]["dA_width"] == 0.08
    from harness.sweep.expand import expand
    from harness.sweep.spec import load_spec
    assert len(expand(load_spec(spec))) == len(expand(load_spec(ROOT / "sweeps" / "demo-quick.yaml")))
    assert "noise_by_variant" not in data["plan"]
    # a per-variant plan records each arm's own noise beside the reference's
    _arm(tmp_path / "pilot", "dr_grpo", a_sd=0.05)
    own = plan.pilot_from_dir(args.pilot, "grpo", "in_dist", [], per_variant=True)
    plan.write_plan(spec, table, own, args)
    data = yaml.safe_load(spec.read_text())
    rec = data["plan"]["noise_by_variant"]["dr_grpo @ tiny-1m"]
    assert set(rec) == {"seed_sd_A", "seed_sd_logB", "wobble_sd", "wobble_rho_step"}
    assert rec["seed_sd_A"] > data["plan"]["noise"]["seed_sd_A"]
    assert data["plan"]["by"].endswith("--per-variant-noise")


def test_plan_cli_predicts_and_rejects_bad_input(tmp_path):
    _pilot(tmp_path / "pilot", seeds=(0, 1))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nset: {train.steps: 200, eval.every: 10}\n"
                    "grid: {algo.preset: [grpo, dr_grpo]}\nseeds: [0, 1, 2]\n")
    cmd = [sys.executable, "-m", "harness.cli", "plan", str(spec), "--pilot",
           str(tmp_path / "pilot"), "--sweeps", "20", "--no-budget", "--out",
           str(tmp_path / "p.csv")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "dr_grpo" in done.stdout and "dA_width" in done.stdout
    import pandas as pd
    row = pd.read_csv(tmp_path / "p.csv").iloc[0]
    assert row["seeds"] == "3+3" and 0 < row["dA_width"] < 0.5
    bad = subprocess.run(cmd[:5] + ["--sweeps", "3"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--sweeps" in bad.stderr
    missing = subprocess.run(cmd[:5] + ["--pilot", str(tmp_path / "nope")], capture_output=True,
                             text=True, cwd=ROOT)
    assert missing.returncode == 2 and "nope" in missing.stderr
    alone = subprocess.run(cmd[:5] + ["--per-variant-noise"], capture_output=True, text=True,
                           cwd=ROOT)
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1
    assert "--per-variant-noise" in alone.stderr and "--pilot" in alone.stderr
    for extra in (["--pilot-up-to-step", "0"], ["--pilot-up-to-step", "200"]):
        cut = subprocess.run(cmd + extra, capture_output=True, text=True, cwd=ROOT)
        assert cut.returncode == 2 and cut.stderr.count("\n") == 1, cut.stderr
        assert "--pilot-up-to-step" in cut.stderr
    assert "cuts nothing" in cut.stderr and "step 200" in cut.stderr
    looked = subprocess.run(cmd + ["--pilot-up-to-step", "100"], capture_output=True, text=True,
                            cwd=ROOT)
    assert looked.returncode == 0, looked.stderr
    assert "pilot cut at step 100" in looked.stdout


def test_the_reports_calibration_simulates_the_noise_the_study_measured(tmp_path):
    """The report's calibration table simulates the noise this study's own reference runs
    measured (seed sd of A and log B, item spread, within-run wobble: the planner's reading),
    not the defaults: the seeds here scatter A with sd 0.06, six times the default 0.01."""
    from analysis.calibrate import NoiseModel
    from analysis.cli import main
    from analysis.groups import assign_groups
    from analysis.schedule import schedule_from_results
    _pilot(tmp_path, seeds=(0, 1, 2, 3), a_sd=0.06)
    for seed in (0, 1, 2, 3):
        write_run(tmp_path / f"dapo-tiny-1m-s{seed}",
                  RunSpec(config=make_config("dapo", "tiny-1m", seed),
                          curves={"in_dist": CurveSpec(0.6, 1.5, 30e12, 0.25)},
                          steps=200, eval_every=10, n_items=256, k=4, seed=200 + seed))
    results = load_results(tmp_path)
    axes = detect_axes(results)
    fits = fit_all(results, axes, window=FitWindow(), n_boot=50, per_run=True)
    schedule = schedule_from_results(assign_groups(results, axes), results.evals)
    measured = plan_report.study_noise(fits, "grpo", "in_dist", schedule)
    assert measured is not None and measured.noise.seed_sd_A > 0.02
    base = NoiseModel(R0=0.3)
    mixed = plan_report.with_measured_noise(base, measured)
    assert mixed.R0 == 0.3 and mixed.A == base.A  # the truths stay
    assert {f: getattr(mixed, f) for f in plan.MEASURED_NOISE} == {
        f: getattr(measured.noise, f) for f in plan.MEASURED_NOISE}
    assert plan_report.with_measured_noise(base, None) is base
    # with the reference's steps and an identified reference fit, the null truth is its curve
    assert measured.identified
    curve = plan_report.with_measured_noise(base, measured, ref_steps=200)
    assert (curve.A, curve.B) == (measured.noise.A, measured.noise.B)
    assert curve.mid_frac == pytest.approx(measured.mid_steps / 200)
    assert curve.R0 == 0.3
    out = tmp_path.parent / (tmp_path.name + "-report")
    assert main([str(tmp_path), "--out", str(out), "--bootstrap", "50", "--calibrate", "5",
                 "--plan", "0"]) == 0
    text = (out / "report.md").read_text()
    assert "the one this study's reference runs measured" in text
    assert "the null truth is the reference's own identified curve" in text
    assert f"seed sd of A {measured.noise.seed_sd_A:.4g}," in text


def test_the_pilot_can_be_read_as_it_stood_at_a_look(tmp_path):
    """`--pilot-up-to-step N`: the pilot's runs as they stood at step N (a sequential design's
    look planning the runs that go on) give exactly the noise of the same runs physically cut at
    N, each arm's own noise included, and not the noise of the whole runs; a cut at or past the
    runs' end cuts nothing and is refused."""
    from sweeplib import cut_runs
    full, cut = tmp_path / "full", tmp_path / "cut"
    _pilot(full, steps=200)
    _arm(full, "dapo", a_sd=0.06)
    cut_runs(full, cut, 100)
    groups = [Group("grpo", "tiny-1m", 200, 10, 4), Group("dapo", "tiny-1m", 200, 10, 4)]
    at_look = plan.pilot_from_dir(str(full), "grpo", "in_dist", groups, per_variant=True,
                                  up_to_step=100)
    physical = plan.pilot_from_dir(str(cut), "grpo", "in_dist", groups, per_variant=True)
    whole = plan.pilot_from_dir(str(full), "grpo", "in_dist", groups, per_variant=True)
    assert repr(at_look.noise) == repr(physical.noise)
    assert repr(at_look.by_variant) == repr(physical.by_variant)
    assert at_look.mid_steps == physical.mid_steps
    assert at_look.notes[0] == "pilot cut at step 100 (its runs as they stood then; they ran to 200)"
    assert at_look.notes[1:] == physical.notes
    assert repr(at_look.noise) != repr(whole.noise)
    with pytest.raises(ValueError, match="--pilot-up-to-step 200 cuts nothing"):
        plan.pilot_from_dir(str(full), "grpo", "in_dist", groups, up_to_step=200)
