"""Combining replications (`rlablate combine`, analysis/meta.py): pooled values by hand, the
replication checks, coverage of the pooled interval under its own model, and the three committed
replications of study-m4's design."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from analysis import meta

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "results" / "reference"
SPEC = {"name": "s", "description": "d", "base": "../configs/default.yaml",
        "set": {"train.steps": 400}, "grid": {"algo.preset": ["grpo", "dapo"]}, "seeds": [1, 2],
        "local": {"parallel": 2}}


def _effect(variant, dA, half, b=1.0, b_half=0.2, verdict="x"):
    return {"scale": "tiny", "variant": variant, "vs": "grpo", "dA": dA, "dA_lo": dA - half,
            "dA_hi": dA + half, "B_ratio": b, "B_ratio_lo": b * np.exp(-b_half),
            "B_ratio_hi": b * np.exp(b_half), "verdict": verdict}


def _study(tmp_path, name, rows, seeds, **spec_changes):
    d = tmp_path / name
    d.mkdir()
    pd.DataFrame(rows).to_csv(d / "effects.csv", index=False)
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
    assert len(notes) == 1 and "design not checked" in notes[0]
    with pytest.raises(ValueError, match="no effects.csv"):
        meta.load_study(tmp_path)


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


def test_cli_refuses_what_is_not_a_replication():
    r = _cli(REF / "study-m4", REF / "demo")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "not a replication" in r.stderr and "'exclude'" in r.stderr
    r = _cli(REF / "study-m4")
    assert r.returncode == 2 and "two or more" in r.stderr
    r = _cli(REF / "study-m4", REF / "study-m4-6s", "--margin", "0")
    assert r.returncode == 2 and "--margin" in r.stderr
