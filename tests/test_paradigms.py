"""analysis/paradigms.py: the leverage table, the variance decomposition, Welch/Bonferroni, the
seed-sanity check and the paradigm ranks, on synthetic sweeps with known effects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.paradigms import (family_of, leverage_table, paradigm_ranks, seed_sanity,
                                variance_decomposition, welch_vs_reference)

VARIANTS = {"sft": "SFT", "dpo": "preference", "simpo": "preference", "grpo": "online",
            "cispo": "online"}


def sweep(effects: dict, noise: float = 0.0, seeds=(0, 1, 2), rng_seed: int = 0) -> pd.DataFrame:
    """gain = scale + paradigm + variant effects (+ noise), final = 0.3 + gain."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for scale, s_eff in (("tiny-0.3m", 0.0), ("tiny-1m", effects["scale"])):
        for v, fam in VARIANTS.items():
            for seed in seeds:
                gain = s_eff + effects["paradigm"][fam] + effects["variant"].get(v, 0.0) \
                    + rng.normal(0, noise)
                rows.append({"run_id": f"{v}-{scale}-{seed}", "variant": v, "scale": scale,
                             "eval_set": "in_dist", "seed": str(seed), "paradigm": fam,
                             "mode": "online" if fam == "online" else "offline",
                             "r0": 0.3, "final": 0.3 + gain, "gain": gain})
    return pd.DataFrame(rows)


EFFECTS = {"scale": 0.5, "paradigm": {"SFT": 0.0, "preference": -0.1, "online": 0.1},
           "variant": {"simpo": -0.02, "cispo": 0.02}}


def test_family_of_follows_oxrls_table():
    assert family_of("offline", "sft") == family_of("offline", "sft_gold") == "SFT"
    assert family_of("offline", "kto") == "preference" and family_of("online", "none") == "online"
    assert family_of(float("nan"), float("nan")) == "online"  # a sweep from before issue 17


def test_leverage_table_recovers_the_factor_level_differences():
    g = sweep(EFFECTS)
    t = leverage_table(g, "in_dist", n_boot=50).set_index("axis")
    assert t.loc["scale", "spread"] == pytest.approx(0.5)
    # family means (mean over the family's variants): SFT 0, preference -0.11, online 0.11
    assert t.loc["paradigm", "spread"] == pytest.approx(0.22)
    assert t.loc["paradigm", "between"] == "online - preference"
    # online mean 0.11, offline mean (0 - 0.1 - 0.12) / 3
    assert t.loc["mode", "spread"] == pytest.approx(0.11 - (0 - 0.1 - 0.12) / 3)
    # within preference and online the variants differ by 0.02; SFT has one variant
    assert t.loc["loss", "spread"] == pytest.approx(0.02)
    assert t.loc["seed", "spread"] == pytest.approx(0.0, abs=1e-12)
    assert list(t.index[:2]) == ["scale", "paradigm"]      # largest first
    # no noise: every bootstrap replicate is the same value
    assert t.loc["scale", "lo"] == pytest.approx(0.5) and t.loc["scale", "hi"] == pytest.approx(0.5)


def test_leverage_intervals_cover_the_truth_under_noise():
    """95% intervals over 8 simulated sweeps: the scale effect is covered in >= 6 (a binomial(8,
    0.95) gives < 6 with probability 0.6%), each interval a few SE wide."""
    covered = 0
    for r in range(8):
        t = leverage_table(sweep(EFFECTS, noise=0.02, seeds=range(4), rng_seed=r), "in_dist",
                           n_boot=200, seed=r).set_index("axis")
        covered += t.loc["scale", "lo"] < 0.5 < t.loc["scale", "hi"]
        assert 0.005 < t.loc["scale", "hi"] - t.loc["scale", "lo"] < 0.05
    assert covered >= 6, covered


def test_variance_decomposition_hand_case_and_shares_sum_to_one():
    # 4 runs: scale a/b, mode on/off; y = 1 + 2*[b] + 1*[off]: no residual
    g = pd.DataFrame({"eval_set": "x", "scale": ["a", "a", "b", "b"], "mode": ["on", "off"] * 2,
                      "paradigm": ["p", "q"] * 2, "variant": ["v", "w"] * 2, "seed": "0",
                      "final": [1.0, 2.0, 3.0, 4.0]})
    d = variance_decomposition(g, "x").set_index("factor")
    # total SS: mean 2.5 -> 2.25 + 0.25 + 0.25 + 2.25 = 5; scale explains 4, mode 1
    assert d.loc["scale", "ss"] == pytest.approx(4.0) and d.loc["mode", "ss"] == pytest.approx(1.0)
    assert d.loc["paradigm", "ss"] == pytest.approx(0.0) and d.loc["paradigm", "df"] == 0  # aliased
    assert d.loc["residual", "ss"] == pytest.approx(0.0, abs=1e-12)
    assert d["share"].sum() == pytest.approx(1.0)
    noisy = variance_decomposition(sweep(EFFECTS, noise=0.01), "in_dist")
    assert noisy["share"].sum() == pytest.approx(1.0)
    assert noisy.set_index("factor").loc["scale", "share"] > 0.8


def test_welch_against_the_reference_with_bonferroni():
    g = sweep(EFFECTS, noise=0.01, seeds=range(4), rng_seed=3)
    w = welch_vs_reference(g, "dpo")
    assert len(w) == 2 * 4 and set(w["reference"]) == {"dpo"}
    row = w[(w["variant"] == "grpo") & (w["scale"] == "tiny-1m")].iloc[0]
    x = g[(g.variant == "grpo") & (g.scale == "tiny-1m")]["gain"]
    ref = g[(g.variant == "dpo") & (g.scale == "tiny-1m")]["gain"]
    t, p = stats.ttest_ind(x, ref, equal_var=False)
    assert row["t"] == pytest.approx(t) and row["p"] == pytest.approx(p)
    assert row["p_bonferroni"] == pytest.approx(min(1.0, p * 8))
    assert row["alpha_bonferroni"] == pytest.approx(0.05 / 8) and row["significant"]
    assert row["diff"] == pytest.approx(x.mean() - ref.mean())


def test_seed_sanity_flags_collisions_and_bit_identical_seeds():
    g = sweep(EFFECTS, noise=0.01)
    assert seed_sanity(g).empty
    bad = g.copy()
    # simpo at tiny-1m: seed 1's finals are seed 0's (a copied file), grpo: two runs of seed 0
    s0 = bad[(bad.variant == "simpo") & (bad.scale == "tiny-1m") & (bad.seed == "0")]["final"].iloc[0]
    bad.loc[(bad.variant == "simpo") & (bad.scale == "tiny-1m") & (bad.seed == "1"), "final"] = s0
    bad.loc[(bad.variant == "grpo") & (bad.scale == "tiny-0.3m") & (bad.seed == "2"), "seed"] = "0"
    flags = seed_sanity(bad)
    assert sorted(flags["problem"]) == ["bit-identical finals", "seed collision"]
    ident = flags[flags.problem == "bit-identical finals"].iloc[0]
    assert (ident["variant"], ident["scale"], ident["seeds"]) == ("simpo", "tiny-1m", "0, 1")


def test_paradigm_ranks_report_inversions_across_scale():
    eff = {"scale": 0.0, "paradigm": {"SFT": 0.0, "preference": -0.1, "online": 0.1}, "variant": {}}
    g = sweep(eff)
    g.loc[(g.scale == "tiny-1m") & (g.paradigm == "preference"), "gain"] += 0.3   # best at 1m
    ranks, taus, flips = paradigm_ranks(g, "in_dist")
    r = ranks.set_index("variant")
    assert r.loc["online", "tiny-0.3m"] == 1 and r.loc["preference", "tiny-0.3m"] == 3
    assert r.loc["preference", "tiny-1m"] == 1
    assert len(flips) == 2 and set(flips["first"]) | set(flips["second"]) == {"SFT", "preference", "online"}
    assert taus.iloc[0]["kendall_tau"] == pytest.approx(-1 / 3)


def test_headlines_read_the_three_oxrl_claims_off_the_tables():
    from analysis.leaderboard import spread_of_gains
    from analysis.paradigms import headlines
    g = sweep(EFFECTS, noise=0.005, seeds=range(4))
    lev = leverage_table(g, "in_dist", n_boot=200)
    gains = g.groupby(["variant", "scale", "eval_set"])["gain"].mean().reset_index()
    held = gains.assign(eval_set="held_out", gain=gains["gain"] / 10)      # 10x compression
    both = pd.concat([gains, held]).assign(fit_gain=np.nan)
    lines = headlines(lev, both, spread_of_gains(both, "in_dist"), "in_dist")
    assert "**reproduces**" in lines[0] and "paradigm +0.22" in lines[0]
    assert "does not reproduce" in lines[1] and "+1.00" in lines[1]       # same order at both scales
    assert "SimPO ranks 5 of 5 at tiny-0.3m and 5 of 5 at tiny-1m" in lines[1]
    assert "**reproduces**" in lines[2] and "10.0x" in lines[2]


def test_oxrl_tables_and_section_only_for_sweeps_with_offline_runs():
    from types import SimpleNamespace

    from analysis.leaderboard import spread_of_gains
    from analysis.paradigms import oxrl_tables, report_section
    from analysis.report import Report, _as_ranks
    g = sweep(EFFECTS, noise=0.01)
    loss = {"sft": "sft", "dpo": "dpo", "simpo": "simpo"}
    runs = g.drop_duplicates("run_id").assign(
        scale_value=lambda d: d["scale"], **{"run.seed": lambda d: d["seed"],
        "algo.paradigm": lambda d: ["offline" if v in loss else "online" for v in d["variant"]],
        "algo.offline_loss": lambda d: [loss.get(v, "none") for v in d["variant"]]})
    finals = g.assign(scale_value=g["scale"])[["run_id", "variant", "scale_value", "eval_set", "r0", "final"]]
    opt = SimpleNamespace(reference="grpo", n_boot=50, seed=0)
    axes = SimpleNamespace(seed="run.seed")
    t = oxrl_tables(finals, runs, axes, "in_dist", opt)
    assert set(t) == {"leverage", "variance", "welch", "seed_sanity", "paradigm_ranks",
                      "paradigm_kendall", "paradigm_flips"}
    assert set(t["welch"]["reference"]) == {"grpo"} and t["seed_sanity"].empty
    online = runs.assign(**{"algo.paradigm": "online"})
    assert oxrl_tables(finals, online, axes, "in_dist", opt) == {}       # an online-only sweep
    gains = g.groupby(["variant", "scale", "eval_set"])["gain"].mean().reset_index().assign(fit_gain=np.nan)
    t.update(gains=gains, spreads=spread_of_gains(gains, "in_dist"))
    r = Report()
    report_section(r, t, "in_dist", _as_ranks)
    md = r.to_markdown()
    assert "which of its three headlines reproduce here" in md and "Welch t-tests" in md
    assert "Seed sanity: every run's seed is its own" in md
