"""Length run-aways (analysis/runaway.py): a run whose responses hit the length limit in >= 5% of
its samples over its last quarter of steps is counted per arm, on a synthetic sweep whose
truncated shares are known."""
from __future__ import annotations

import pytest

from analysis.report import AnalysisOptions, run_analysis
from analysis.runaway import RUNAWAY_TRUNC
from analysis.synth import CurveSpec, RunSpec, make_config, write_run

STEPS = 80
# (algo, seed) -> (start, level, stop): the truncated share is `level` at steps start+1 .. stop
TRUNC = {("grpo", 0): (0, 0.0, STEPS), ("grpo", 1): (0, 0.01, STEPS), ("grpo", 2): (0, 0.0, STEPS),
         ("cispo", 0): (40, 0.9, STEPS), ("cispo", 1): (0, 0.0, STEPS),
         ("cispo", 2): (50, 0.3, STEPS)}


def _sweep(root, trunc=TRUNC, log_trunc=True, ceilings=None):
    for (algo, seed), (start, level, stop) in trunc.items():
        def train(step, start=start, level=level, stop=stop):
            share = level if start < step <= stop else 0.0
            return {"rollout/truncated_frac": share} if log_trunc else {}
        a = (ceilings or {}).get((algo, seed), 0.62 if algo == "grpo" else 0.60)
        write_run(root / f"{algo}-s{seed}",
                  RunSpec(config=make_config(algo, "tiny-0.3m", seed),
                          curves={"in_dist": CurveSpec(a, 1.5, 16e12, 0.3)}, steps=STEPS,
                          eval_every=10, noise=0.004, seed=seed, train=train))


def test_runaways_are_counted_per_arm_with_their_late_share_and_seeds(tmp_path):
    _sweep(tmp_path / "s")
    done = run_analysis(AnalysisOptions(str(tmp_path / "s"), n_boot=50, per_run=False))
    t = done["tables"]["runaways"].set_index("variant")
    # the last quarter is steps 61-80: cispo s0 0.9 throughout, s2 0.3 throughout, s1 0
    assert t.loc["cispo", "runs"] == 3 and t.loc["cispo", "runaways"] == 2
    assert t.loc["cispo", "runaway_seeds"] == "0 2"
    assert t.loc["cispo", "late_truncated_median"] == pytest.approx(0.3)
    assert t.loc["cispo", "late_truncated_max"] == pytest.approx(0.9)
    # grpo s1 truncates 1% of its responses all run long: below the 5% threshold
    assert t.loc["grpo", "runaways"] == 0 and t.loc["grpo", "late_truncated_max"] == pytest.approx(0.01)
    assert 0.01 < RUNAWAY_TRUNC < 0.3
    text = (done["out"] / "report.md").read_text()
    assert "## Length run-aways" in text and "2 of 6 runs ran away: cispo 2 of 3" in text
    assert (done["out"] / "runaways.csv").exists()


def test_a_share_logged_only_early_is_not_a_runaway_and_no_log_means_no_section(tmp_path):
    # a run that truncated heavily only in its first half recovers: not a run-away
    early = {("grpo", 0): (0, 0.0, STEPS), ("grpo", 1): (0, 0.0, STEPS),
             ("cispo", 0): (0, 0.8, 40), ("cispo", 1): (0, 0.0, STEPS)}
    _sweep(tmp_path / "a", early)
    done = run_analysis(AnalysisOptions(str(tmp_path / "a"), n_boot=50, per_run=False))
    cispo = done["tables"]["runaways"].set_index("variant").loc["cispo"]
    assert cispo["runaways"] == 0 and cispo["late_truncated_max"] == 0.0
    assert "Here 0 of 4 runs ran away." in (done["out"] / "report.md").read_text()
    _sweep(tmp_path / "b", early, log_trunc=False)
    done = run_analysis(AnalysisOptions(str(tmp_path / "b"), n_boot=50, per_run=False))
    assert done["tables"]["runaways"].empty
    assert "Length run-aways" not in (done["out"] / "report.md").read_text()


def test_a_shift_is_the_run_aways_A_minus_their_arms_other_runs_and_the_report_says_how_to_simulate(
        tmp_path):
    """cispo's run-aways (s0, s2) have ceiling 0.56, its other run 0.64: A_shift ~ -0.08 from the
    per-run fits; grpo has no run-away, so no shift; the section gives the calibrate flags with
    the share of runs that ran away (2 of 6) and the mean shift."""
    ceilings = {("cispo", 0): 0.56, ("cispo", 1): 0.64, ("cispo", 2): 0.56}
    _sweep(tmp_path / "s", ceilings=ceilings)
    done = run_analysis(AnalysisOptions(str(tmp_path / "s"), n_boot=50))
    t = done["tables"]["runaways"].set_index("variant")
    assert t.loc["cispo", "A_shift"] == pytest.approx(-0.08, abs=0.01)
    assert t["A_shift"].isna()["grpo"]
    text = (done["out"] / "report.md").read_text()
    d = t.loc["cispo", "A_shift"]
    assert f"`rlablate calibrate SPEC --runaway-p 0.33 --runaway-dA {d:.3f}`" in text
    assert "1 arm(s) have both" in text
