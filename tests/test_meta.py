"""Combining replications (`rlablate combine`, analysis/meta.py): pooled values by hand, the
replication checks, coverage of the pooled interval under its own model, and the three committed
replications of study-m4's design."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from analysis import meta
from analysis.claims import decide_claims

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "results" / "reference"
SPEC = {"name": "s", "description": "d", "base": "../configs/default.yaml",
        "set": {"train.steps": 400}, "grid": {"algo.preset": ["grpo", "dapo"]}, "seeds": [1, 2],
        "local": {"parallel": 2}}


def _effect(variant, dA, half, b=1.0, b_half=0.2, verdict="x"):
    return {"scale": "tiny", "variant": variant, "vs": "grpo", "dA": dA, "dA_lo": dA - half,
            "dA_hi": dA + half, "B_ratio": b, "B_ratio_lo": b * np.exp(-b_half),
            "B_ratio_hi": b * np.exp(b_half), "verdict": verdict}


def _study(tmp_path, name, rows, seeds, r0=0.4, **spec_changes):
    d = tmp_path / name
    d.mkdir()
    pd.DataFrame(rows).to_csv(d / "effects.csv", index=False)
    pd.DataFrame({"eval_set": ["in_dist", "held_out"], "R0": [r0, np.nan]}).to_csv(
        d / "fits.csv", index=False)
    spec = {**SPEC, "name": name, "seeds": seeds, **spec_changes}
    (d / "spec.yaml").write_text(yaml.safe_dump(spec))
    return d


def test_fixed_effect_by_hand():
    # w = 1/0.1^2 = 100 and 1/0.2^2 = 25: mean (100*0.1 + 25*0.3)/125 = 0.14, se 1/sqrt(125),
    # Q = 100*0.04^2 + 25*0.16^2 = 0.8 on 1 df, I^2 = 0 (Q < df)
    r = meta.fixed_effect(np.array([0.1, 0.3]), np.array([0.1, 0.2]))
    assert r["est"] == pytest.approx(0.14)
    assert r["se"] == pytest.approx(1 / np.sqrt(125))
    assert r["Q"] == pytest.approx(0.8)
    assert r["Q_p"] == pytest.approx(stats.chi2.sf(0.8, 1))
    assert r["I2"] == 0.0
    # a wider gap: mean 0.12, Q = 100*0.12^2 + 25*0.48^2 = 7.2 on 1 df, I^2 = (Q - 1)/Q
    r = meta.fixed_effect(np.array([0.0, 0.6]), np.array([0.1, 0.2]))
    q = 100 * 0.12 ** 2 + 25 * 0.48 ** 2
    assert r["Q"] == pytest.approx(q) and r["I2"] == pytest.approx((q - 1) / q)


def test_combine_pools_each_comparison_and_applies_the_verdict(tmp_path):
    z = meta.Z975
    # dapo: two studies, se 0.02 and 0.01 (half-widths 1.96 se); pooled (0.03*2500 +
    # 0.01*10000)/12500 = 0.014, se 1/sqrt(12500) = 0.00894: inside +-0.05 -> no effect on A;
    # B ratio 1.0 in both with log-half-width 0.2 -> se 0.102, pooled 1/sqrt(2) of it:
    # (exp(-0.141), exp(0.141)) = (0.868, 1.152), inside (0.8, 1.25) -> "no effect"
    s1 = _study(tmp_path, "a", [_effect("dapo", 0.03, z * 0.02),
                                _effect("cispo", 0.0, 0.05, verdict=meta.UNIDENTIFIED),
                                _effect("gspo", 0.0, 0.01)], [1, 2])
    s2 = _study(tmp_path, "b", [_effect("dapo", 0.01, z * 0.01), _effect("cispo", 0.0, 0.05),
                                _effect("gspo", 0.2, 0.01)], [3, 4])
    studies = [meta.load_study(s1), meta.load_study(s2)]
    assert meta.check_replications(studies) == []
    t = meta.combine(studies, margin=0.05).set_index("variant")
    assert t.loc["dapo", "dA"] == pytest.approx(0.014)
    se = 1 / np.sqrt(12500)
    assert (t.loc["dapo", "dA_lo"], t.loc["dapo", "dA_hi"]) == pytest.approx(
        (0.014 - z * se, 0.014 + z * se))
    assert t.loc["dapo", "B_ratio_hi"] == pytest.approx(np.exp(z * (0.2 / z) / np.sqrt(2)))
    assert t.loc["dapo", "verdict"] == "no effect"
    # an unidentified fit in one study: no pooled number
    assert t.loc["cispo", "verdict"].startswith(meta.UNIDENTIFIED)
    assert np.isnan(t.loc["cispo", "dA"])
    # 0.0 and 0.2 with se 0.005: Q = 800, the studies disagree -> reported, not combined
    assert t.loc["gspo", "verdict"].startswith("heterogeneous (dA")
    # a comparison missing from one study is left out
    s3 = _study(tmp_path, "c", [_effect("dapo", 0.02, 0.02)], [5])
    assert list(meta.combine([*studies, meta.load_study(s3)], 0.05)["variant"]) == ["dapo"]


def test_replications_must_be_one_design_on_disjoint_seeds(tmp_path):
    rows = [_effect("dapo", 0.0, 0.02)]
    a = meta.load_study(_study(tmp_path, "a", rows, [1, 2]))
    other_lr = meta.load_study(_study(tmp_path, "b", rows, [3], set={"train.steps": 200}))
    with pytest.raises(ValueError, match=r"spec key 'set' differs"):
        meta.check_replications([a, other_lr])
    same_seed = meta.load_study(_study(tmp_path, "c", rows, [2, 9], local={"parallel": 1}))
    with pytest.raises(ValueError, match="seed 2 is in both"):
        meta.check_replications([a, same_seed])
    counted = meta.load_study(_study(tmp_path, "f", rows, 2))  # `seeds: 2` = seeds 0 and 1
    with pytest.raises(ValueError, match="seed 1 is in both"):
        meta.check_replications([a, counted])
    extra = meta.load_study(_study(tmp_path, "d", rows, [7], exclude=[{"algo.preset": "dapo"}]))
    with pytest.raises(ValueError, match=r"'exclude' differs \(absent vs"):
        meta.check_replications([a, extra])
    bare = tmp_path / "e"
    bare.mkdir()
    pd.DataFrame(rows).to_csv(bare / "effects.csv", index=False)
    notes = meta.check_replications([a, meta.load_study(bare)])
    assert len(notes) == 2 and "base not checked" in notes[0] and "design not checked" in notes[1]
    with pytest.raises(ValueError, match="no effects.csv"):
        meta.load_study(tmp_path)


def test_replications_must_start_from_one_base(tmp_path):
    """R0 (the step-0 eval, fits.csv) is the base model's pass rate: equal to the bit for one
    warm start, different for a warm start rebuilt on other numerics."""
    rows = [_effect("dapo", 0.0, 0.02)]

    def study(name, seeds, r0):
        return meta.load_study(_study(tmp_path, name, rows, seeds, r0=r0))

    a, b = study("a", [1], 0.400390625), study("b", [2], 0.400390625)
    assert meta.check_replications([a, b]) == []
    other = study("c", [3], 0.45556640625)
    with pytest.raises(ValueError, match=r"did not start where .*a did: R0 \(in_dist, the "
                       r"step-0 eval\) 0.4556 vs 0.4004.*--mixed-base"):
        meta.check_replications([a, b, other])
    notes = meta.check_replications([a, other], mixed_base=True)
    assert len(notes) == 1 and "pooled anyway" in notes[0]
    assert not meta.combine([a, other], 0.05).empty


def test_pooled_interval_covers_the_truth_at_its_nominal_rate():
    """Under the model the pooling assumes (independent normal estimates of one effect, known
    se), the pooled 95% interval covers the truth in 95% of 4,000 simulated triples (MC se
    0.0034); the wrong se (1/sum w instead of 1/sqrt(sum w)) would cover far less."""
    rng = np.random.default_rng(0)
    truth, hits = 0.013, 0
    for _ in range(4000):
        se = rng.uniform(0.005, 0.03, size=3)
        r = meta.fixed_effect(truth + rng.normal(0, se), se)
        hits += abs(r["est"] - truth) <= meta.Z975 * r["se"]
    assert 0.935 <= hits / 4000 <= 0.965


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", "combine", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT)


def test_cli_on_the_three_replications_of_study_m4(tmp_path):
    """study-m4 (seeds 20-23), study-m4-6s (70-75) and study-m4-rep (80-85): one design. The pooled
    Dr. GRPO dA by hand from the three effects.csv rows: se_i = width_i / 3.92, w_i = 1/se_i^2."""
    dirs = [REF / "study-m4", REF / "study-m4-6s", REF / "study-m4-rep"]
    out = tmp_path / "combined.csv"
    r = _cli(*dirs, "--margin", "0.05", "--out", out)
    assert r.returncode == 0, r.stderr
    got = pd.read_csv(out).set_index("variant")
    rows = pd.concat(pd.read_csv(d / "effects.csv") for d in dirs)
    dr = rows[rows["variant"] == "dr_grpo"]
    w = 1 / ((dr["dA_hi"] - dr["dA_lo"]) / (2 * meta.Z975)) ** 2
    assert got.loc["dr_grpo", "dA"] == pytest.approx(float((w * dr["dA"]).sum() / w.sum()))
    assert got.loc["dr_grpo", "dA"] == pytest.approx(-0.030, abs=5e-4)
    assert len(got) == 6 and not got["verdict"].str.startswith("not resolved").any()
    assert "only B" in r.stdout and "normal approximation" in r.stdout
    assert "--replications 4,6,6 --margin 0.05" in r.stdout


def test_cli_refuses_what_is_not_a_replication():
    r = _cli(REF / "study-m4", REF / "demo")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "not a replication" in r.stderr and "'exclude'" in r.stderr
    r = _cli(REF / "study-m4")
    assert r.returncode == 2 and "two or more" in r.stderr
    r = _cli(REF / "study-m4", REF / "study-m4-6s", "--margin", "0")
    assert r.returncode == 2 and "--margin" in r.stderr


def test_cli_refuses_the_same_spec_run_on_another_cpu():
    """study-m4-xeon is study-m4's spec and seeds run again by `make demo` on an Intel Xeon
    (AVX512) instead of the AMD EPYC of the reference: its warm start, and so every run, differ."""
    r = _cli(REF / "study-m4", REF / "study-m4-xeon")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "R0 (in_dist, the step-0 eval) 0.4556 vs 0.4004" in r.stderr
    assert "--mixed-base" in r.stderr
    r = _cli(REF / "study-m4", REF / "study-m4-xeon", "--mixed-base")
    assert r.returncode == 2 and "seed 20 is in both" in r.stderr  # and the seeds are shared


# ------------------------------------------------------------------------------------------------
# The seed claims over the union of the replications' runs
# ------------------------------------------------------------------------------------------------
CLAIM_VARIANTS = ("grpo", "dr_grpo", "dapo", "cispo", "grpo+clip_high=0.28",
                  "grpo+group_filter=zero_variance")


def _analysed(tmp_path, name, seeds):
    from analysis.report import AnalysisOptions, run_analysis
    from tests.test_claims import VARIANTS, write_sweep
    write_sweep(tmp_path / name, {k: VARIANTS[k] for k in CLAIM_VARIANTS}, seeds=seeds,
                scales=("tiny-1m",))
    done = run_analysis(AnalysisOptions(str(tmp_path / name), n_boot=100, per_run=False))
    return done["out"], done["tables"]["claims"].set_index("claim")


def test_claims_of_two_replications_equal_one_study_of_all_their_runs(tmp_path):
    """The synthetic sweep of test_claims (runs seeded by variant and seed, so seed 4 is the same
    run in every directory) on seeds 0-2 and 3-5, analysed apart and combined, decides claims 1, 2
    and 4 exactly as the analysis of one sweep holding all six seeds: same verdicts, same numbers
    in the evidence, same budgets. Claim 3 comes from the pooled filter comparison."""
    out_a, claims_a = _analysed(tmp_path, "a", (0, 1, 2))
    out_b, _ = _analysed(tmp_path, "b", (3, 4, 5))
    _, claims_all = _analysed(tmp_path, "all", (0, 1, 2, 3, 4, 5))
    # the report keeps its claims' inputs, and they decide the claims it printed
    inputs = json.loads((out_a / "claim_inputs.json").read_text())
    assert {"1", "2", "3", "4"} <= set(inputs) and len(inputs["1"]["trend"]) == 2 * 3
    redecided = decide_claims(inputs, pd.read_csv(out_a / "effects.csv")).set_index("claim")
    assert redecided[["verdict", "evidence"]].equals(claims_a[["verdict", "evidence"]])

    studies = [meta.load_study(out_a), meta.load_study(out_b)]
    combined = meta.combine(studies, 0.02)
    claims, why_not = meta.combine_claims(studies, combined)
    assert why_not == ""
    claims = claims.set_index("claim")
    for n in (1, 2, 4):
        assert claims.loc[n, "verdict"] == claims_all.loc[n, "verdict"], n
        assert claims.loc[n, "evidence"] == claims_all.loc[n, "evidence"], n
        assert claims.loc[n, "would_resolve"] == claims_all.loc[n, "would_resolve"], n
    assert "(n=6)" in claims.loc[1, "evidence"] and claims.loc[1, "verdict"] == "reproduces"
    flt = combined.set_index("variant").loc["grpo+group_filter=zero_variance"]
    assert f"dA = {flt['dA']:+.3f}" in claims.loc[3, "evidence"]


def test_claims_are_not_combined_without_their_inputs(tmp_path):
    """Reports from before claim_inputs.json, or replications that tested other variants."""
    a = tmp_path / "a"
    a.mkdir()
    pd.DataFrame([_effect("dapo", 0.0, 0.02)]).to_csv(a / "effects.csv", index=False)
    studies = [meta.load_study(a), meta.load_study(a)]
    claims, why_not = meta.combine_claims(studies, meta.combine(studies, 0.05))
    assert claims.empty and "no claim_inputs.json" in why_not
    one = {"eval_set": "in_dist", "held_out": "held_out",
           "1": {"first": "grpo", "second": "dr_grpo", "trend": [["grpo", "m", 1, 2.0]],
                 "level": [10.0, 4]}}
    other = json.loads(json.dumps(one))
    other["1"]["second"] = "dr_grpo+lr=0.1"
    with pytest.raises(ValueError, match="claim 1 compares 'dr_grpo' in one report"):
        meta.merge_claim_inputs([one, other])
    with pytest.raises(ValueError, match="claim 1 was tested in some"):
        meta.merge_claim_inputs([one, {"eval_set": "in_dist", "held_out": "held_out"}])
    # levels are means over logged values: re-weighted by their counts (10*4 + 16*2) / 6 = 12
    other = json.loads(json.dumps(one))
    other["1"]["level"] = [16.0, 2]
    merged = meta.merge_claim_inputs([one, other])
    assert merged["1"]["level"] == [pytest.approx(12.0), 6] and len(merged["1"]["trend"]) == 2
    assert "trend_mixed" not in merged["1"]
    # the exploratory mixed-group trend: kept from whichever reports have it (runs that log it)
    other["1"]["trend_mixed"] = [["grpo", "m", 1, 0.5]]
    assert meta.merge_claim_inputs([one, other])["1"]["trend_mixed"] == [["grpo", "m", 1, 0.5]]


def test_cli_says_why_the_committed_replications_claims_are_not_combined(tmp_path):
    """The three committed study-m4 reports predate claim_inputs.json: combine says so, and
    refuses --claims-out (exit 2, nothing written)."""
    dirs = [REF / "study-m4", REF / "study-m4-6s"]
    r = _cli(*dirs)
    assert r.returncode == 0 and "claims not combined: no claim_inputs.json" in r.stdout
    out = tmp_path / "claims.csv"
    r = _cli(*dirs, "--claims-out", out, "--out", tmp_path / "e.csv")
    assert r.returncode == 2 and "--claims-out" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists() and not (tmp_path / "e.csv").exists()
