"""The design-choice table and the seed-claim verdicts, on synthetic sweeps with known truth.

The sweep is a preset grid plus two single-choice ablations of GRPO, written as the harness
writes runs (algo.preset + algo.deviates_from_preset). The true curves and training trends are
chosen so that each verdict is known: clip-higher raises A by 0.08, the zero-variance filter only
doubles B, GRPO's incorrect responses grow by 0.05 tokens/step while Dr. GRPO's stay flat, and the
algorithms differ in-distribution but not held-out.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.claims import between_variants, paired, run_trend, t_interval, train_series
from analysis.load import algorithm_label, shared_deviations
from analysis.report import AnalysisOptions, run_analysis
from analysis.synth import CurveSpec, RunSpec, write_run

STEPS, C_MID = 200, 40 * 1e12
# label -> (preset, deviations, A in-dist, B, incorrect-length slope per step, entropy)
VARIANTS = {
    "grpo": ("grpo", {}, 0.60, 1.5, 0.05, 0.70),
    "dr_grpo": ("dr_grpo", {}, 0.62, 1.5, 0.0, 0.70),
    "cispo": ("cispo", {}, 0.70, 1.5, 0.05, 0.72),
    "dapo": ("dapo", {}, 0.66, 1.5, 0.05, 0.80),
    "grpo+clip_high=0.28": ("grpo", {"clip_high": 0.28}, 0.68, 1.5, 0.05, 0.90),
    "grpo+group_filter=zero_variance": ("grpo", {"group_filter": "zero_variance"}, 0.60, 3.0,
                                        0.05, 0.70),
}
BASE_ALGO = {"advantage": "group_norm", "clip_high": 0.2, "group_filter": "none"}
PRESET_ALGO = {"dr_grpo": {"advantage": "group_mean"}, "cispo": {"clip_high": 4.0},
               "dapo": {"clip_high": 0.28, "group_filter": "zero_variance"}}


def write_sweep(root, variants=VARIANTS, seeds=(0, 1, 2), scales=("tiny-0.3m", "tiny-1m"),
                a_jitter=0.003, mixed_slope=None):
    """``mixed_slope``: label -> slope per step of the incorrect length in groups with both
    outcomes (logged only when given, as runs before that column)."""
    for si, scale in enumerate(scales):
        for vi, (label, (preset, dev, a_in, b, slope, ent)) in enumerate(variants.items()):
            for seed in seeds:
                rng = np.random.default_rng(100 * si + 10 * vi + seed)
                algo = {**BASE_ALGO, **PRESET_ALGO.get(preset, {}), **dev, "preset": preset,
                        "deviates_from_preset": sorted(dev)}
                cfg = {"algo": algo, "model": {"scale": scale}, "run": {"seed": seed}}
                curves = {"in_dist": CurveSpec(a_in + rng.normal(0, a_jitter), b, C_MID, 0.30),
                          "held_out": CurveSpec(0.40 + rng.normal(0, 0.003), 1.5, C_MID, 0.35)}
                noise = rng.normal(0, 0.3, STEPS + 1)
                ent_noise = rng.normal(0, 0.01, STEPS + 1)

                def train(step, slope=slope, ent=ent, noise=noise, ent_noise=ent_noise,
                          ms=(mixed_slope or {}).get(label)):
                    row = {"rollout/response_len_incorrect": 9.0 + slope * step + noise[step],
                           "policy/entropy": ent + ent_noise[step]}
                    if ms is not None:
                        row["rollout/response_len_incorrect_mixed"] = 8.0 + ms * step + noise[step]
                    return row
                write_run(root / f"{label}-{scale}-s{seed}",
                          RunSpec(config=cfg, curves=curves, steps=STEPS, eval_every=10,
                                  noise=0.004, seed=int(rng.integers(1 << 31)), train=train))


def test_algorithm_label_is_preset_plus_deviations():
    assert algorithm_label({"algo.preset": "grpo", "algo.deviates_from_preset": "[]"}) == "grpo"
    assert algorithm_label({"algo.preset": "grpo", "algo.deviates_from_preset":
                            '["clip_high", "kl"]', "algo.clip_high": 0.28,
                            "algo.kl": "k3"}) == "grpo+clip_high=0.28+kl=k3"


def test_deviations_every_run_shares_are_the_study_setting_not_the_label():
    def run(preset, **algo):
        return {"algo.preset": preset, "algo.deviates_from_preset": json.dumps(sorted(algo)),
                **{f"algo.{k}": v for k, v in algo.items()}}
    study = pd.DataFrame([run("grpo", minibatches=8), run("dapo", minibatches=8),
                          run("grpo", clip_high=0.28, minibatches=8)])
    assert shared_deviations(study) == ["minibatches=8"]
    assert [algorithm_label(r, drop=shared_deviations(study)) for _, r in study.iterrows()] == \
        ["grpo", "dapo", "grpo+clip_high=0.28"]
    # one arm at another value: minibatches tells the arms apart and stays in every label
    mixed = pd.DataFrame([run("grpo", minibatches=8), run("rloo", minibatches=1)])
    assert shared_deviations(mixed) == []
    assert [algorithm_label(r) for _, r in mixed.iterrows()] == ["grpo+minibatches=8",
                                                                "rloo+minibatches=1"]
    assert shared_deviations(pd.DataFrame([run("grpo"), run("grpo", minibatches=8)])) == []


def test_t_interval_and_paired_by_hand():
    m, lo, hi, n = t_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, t(0.975, 2) = 4.302653: half width 4.302653 / sqrt(3) = 2.484138
    assert (m, n) == (2.0, 3) and lo == pytest.approx(2 - 2.484138, abs=1e-6)
    assert hi == pytest.approx(2 + 2.484138, abs=1e-6)
    trend = pd.DataFrame({"variant": ["a", "a", "b", "b", "b"], "scale": ["s"] * 5,
                          "seed": [0, 1, 0, 1, 2], "value": [3.0, 5.0, 1.0, 2.0, 9.0]})
    m, lo, hi, n = paired(trend, "a", "b")   # pairs (seed 0: 2, seed 1: 3); seed 2 has no partner
    assert (m, n) == (2.5, 2)


def test_between_variants_anova_by_hand():
    finals = pd.DataFrame({"variant": list("aabbcc"), "r0": [0.0] * 6,
                           "final": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    # means 1.5, 3.5, 5.5; MS_between = 2 * (4 + 0 + 4) / 2 = 8; MS_within = 6 * 0.25 / 3 = 0.5
    # F = 16 on (2, 3) df: p = 0.0251; variance component (8 - 0.5) / 2 = 3.75
    var, p, rng = between_variants(finals)
    assert var == pytest.approx(3.75) and rng == pytest.approx(4.0)
    assert p == pytest.approx(0.02509, abs=1e-4)
    same = finals.assign(final=[1.0, 2.0, 2.0, 1.0, 1.5, 1.5])  # equal means: no between part
    var, p, _ = between_variants(same)
    assert var == 0.0 and p > 0.9


def test_report_reproduces_every_claim_on_a_sweep_built_to_show_them(tmp_path):
    """Seed-to-seed sd of A 0.0015 here: "only B" needs the dA interval inside +-0.02 (A shown
    not to move), which 3 seeds with sd 0.003 just miss (dA_lo -0.021)."""
    write_sweep(tmp_path / "sweep", a_jitter=0.0015)
    done = run_analysis(AnalysisOptions(str(tmp_path / "sweep"), n_boot=200, per_run=False))
    effects = done["tables"]["effects"].set_index(["scale", "variant"])
    assert len(effects) == 2 * 5
    ch = effects.loc[("tiny-1m", "grpo+clip_high=0.28")]
    assert ch["verdict"].startswith("moved A") and ch["dA"] == pytest.approx(0.08, abs=0.02)
    assert ch["choices"] == "clip_high=0.28"
    flt = effects.loc[("tiny-0.3m", "grpo+group_filter=zero_variance")]
    assert flt["verdict"] == "only B", flt.to_dict()
    assert flt["B_ratio"] == pytest.approx(2.0, rel=0.35) and abs(flt["dA"]) < 0.02
    assert effects.loc[("tiny-1m", "dr_grpo")]["choices"] == "advantage=group_mean"
    claims = done["tables"]["claims"].set_index("claim")
    assert list(claims["verdict"]) == ["reproduces"] * 4, claims.to_dict("records")
    # the evidence carries the numbers: GRPO's incorrect responses grew ~0.05 x 150 = 7.5 tokens
    grpo_growth = float(claims.loc[1, "evidence"].split("grpo ")[1].split(" ")[0])
    assert grpo_growth == pytest.approx(7.5, abs=1.0)
    assert "Exploratory" not in claims.loc[1, "evidence"]  # no run logs the mixed-group length
    median = claims.loc[1, "evidence"].split("grpo's median run ")[1]
    assert float(median.split(" ")[0]) == pytest.approx(7.5, abs=1.0) and "(6 of 6 grow)" in median
    text = (done["out"] / "report.md").read_text()
    assert "The seed claims at this scale" in text and "only B" in text
    _claim_lines_read_as_sentences(done["out"] / "report.md")


def test_claims_that_do_not_hold_are_reported_as_such(tmp_path):
    """Dr. GRPO's incorrect length grows as fast as GRPO's, clip-higher lowers entropy, the filter
    moves A: claims 1-3 must not be "reproduces". Both lengths grow alike, so claim 1 reads as an
    equivalence (the paired difference lies inside +-5% of GRPO's incorrect length)."""
    v = dict(VARIANTS)
    v["dr_grpo"] = ("dr_grpo", {}, 0.62, 1.5, 0.05, 0.70)
    v["grpo+clip_high=0.28"] = ("grpo", {"clip_high": 0.28}, 0.60, 1.5, 0.05, 0.50)
    v["grpo+group_filter=zero_variance"] = ("grpo", {"group_filter": "zero_variance"}, 0.70, 1.5,
                                            0.05, 0.70)
    write_sweep(tmp_path / "sweep", v)
    done = run_analysis(AnalysisOptions(str(tmp_path / "sweep"), n_boot=200, per_run=False))
    verdicts = done["tables"]["claims"].set_index("claim")["verdict"].to_dict()
    assert verdicts[1].startswith("no effect within +-"), verdicts[1]
    assert verdicts[2] == "does not reproduce"
    assert verdicts[3] == "does not reproduce"


def test_claim1_mixed_group_line_is_exploratory(tmp_path):
    """Runs that log the incorrect length in groups with both outcomes get claim 1's exploratory
    line beside the verdict: here GRPO's growth is all composition (its mixed-group length is
    flat: change 0), while the verdict's statistic still grows ~7.5 tokens and decides."""
    v = {k: VARIANTS[k] for k in ("grpo", "dr_grpo")}
    write_sweep(tmp_path / "sweep", v, seeds=(0, 1, 2, 3), scales=("tiny-1m",),
                mixed_slope={"grpo": 0.0, "dr_grpo": -0.02})
    done = run_analysis(AnalysisOptions(str(tmp_path / "sweep"), n_boot=50, per_run=False))
    claim = done["tables"]["claims"].set_index("claim").loc[1]
    assert claim["verdict"] == "reproduces"
    line = claim["evidence"].split("Exploratory, not the verdict's statistic")[1]
    # change = mean of the last quarter of steps - the first: slope x 150 steps, + noise
    grpo_mixed = float(line.split("grpo ")[1].split(" ")[0])
    dr_mixed = float(line.split("dr_grpo ")[1].split(" ")[0])
    assert grpo_mixed == pytest.approx(0.0, abs=0.2) and dr_mixed == pytest.approx(-3.0, abs=0.2)
    assert "(n=4)" in line and "  " not in claim["evidence"]
    inputs = json.loads((done["out"] / "claim_inputs.json").read_text())
    assert len(inputs["1"]["trend_mixed"]) == 8
    _claim_lines_read_as_sentences(done["out"] / "report.md")


def test_missing_variants_say_not_tested(tmp_path):
    write_sweep(tmp_path / "sweep", {k: VARIANTS[k] for k in ("grpo", "cispo")}, seeds=(0, 1))
    done = run_analysis(AnalysisOptions(str(tmp_path / "sweep"), n_boot=50, per_run=False))
    claims = done["tables"]["claims"]
    assert list(claims["verdict"]) == ["not tested"] * 4
    assert "dr_grpo" in claims.iloc[0]["evidence"]
    _claim_lines_read_as_sentences(done["out"] / "report.md")


def _claim_lines_read_as_sentences(report):
    """Each claim paragraph ends with one full stop, and no sentence ends twice ('..'; an
    ellipsis '...' is allowed)."""
    import re
    lines = [ln for ln in report.read_text().splitlines() if re.match(r"[1-4]\. ", ln)]
    assert len(lines) == 4
    for ln in lines:
        assert ln.endswith(".") and not ln.endswith(".."), ln
        assert not re.search(r"(?<!\.)\.\.(?!\.)", ln), ln


def test_trends_come_from_the_loaded_train_rows_and_ignore_excluded_runs(tmp_path):
    from analysis.groups import assign_groups, detect_axes
    from analysis.load import load_results
    write_sweep(tmp_path / "s", {"grpo": VARIANTS["grpo"]}, seeds=(0,), scales=("tiny-1m",))
    res = load_results(tmp_path / "s")
    assert len(res.train) == STEPS and res.train["policy/entropy"].notna().all()
    runs = assign_groups(res, detect_axes(res))
    series = train_series(runs, res.train, ["policy/entropy"])
    assert len(series) == STEPS
    assert run_trend(series, "policy/entropy", "late_mean")["value"].iloc[0] == pytest.approx(0.70, abs=0.01)
    runs["excluded"] = "diverged at step 3"
    assert train_series(runs, res.train, ["policy/entropy"]).empty


def test_trends_of_two_variants_are_compared_over_the_same_steps():
    """GRPO run 600 steps (to fit its asymptote) and Dr. GRPO 240: claim 1 and 2 trends use the
    first 240 steps of both; other scales keep their own common step."""
    from analysis.claims import matched, run_trend
    rows = []
    for variant, scale, steps in [("grpo", "1m", 600), ("dr_grpo", "1m", 240), ("dapo", "1m", 60),
                                  ("grpo", "0.3m", 40), ("dr_grpo", "0.3m", 40)]:
        for step in range(1, steps + 1):
            # length grows 0.01 token per step for GRPO, flat for Dr. GRPO
            rows.append({"run_id": f"{variant}-{scale}", "variant": variant, "scale_value": scale,
                         "seed": 0, "step": step,
                         "len": 10 + (0.01 * step if variant == "grpo" else 0.0)})
    series = pd.DataFrame(rows)
    m = matched(series, ("grpo", "dr_grpo"))
    assert set(m["variant"]) == {"grpo", "dr_grpo"}  # dapo's 60 steps do not cut the pair
    assert m.groupby("run_id")["step"].max().to_dict() == {
        "grpo-1m": 240, "dr_grpo-1m": 240, "grpo-0.3m": 40, "dr_grpo-0.3m": 40}
    trend = run_trend(m, "len", "change").set_index("run_id")["value"]
    # last quarter minus first quarter of 240 steps: 0.01 * 180 = 1.8 tokens (not 4.5 over 600)
    assert trend["grpo-1m"] == pytest.approx(1.8) and trend["dr_grpo-1m"] == pytest.approx(0.0)
