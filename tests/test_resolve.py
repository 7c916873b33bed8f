"""What budget would resolve a *not resolved* verdict (analysis/resolve.py), against numbers
computed by hand from the stated rule: a 95% interval's half-width over n seeds scales as
t_{0.975, n-1} / sqrt(n) (t quantiles from a table), with the observed mean (and, for claims, sd).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.claims import decide_claims
from analysis.resolve import (MAX_SEEDS, attach_effect_budget, claim1_budget, claim2_budget,
                              claim4_budget, claim4_share, effect_seeds, t_seeds)
from analysis.variance import claim4_verdict


def test_effect_seeds_by_hand():
    # study-m4's GSPO row: dA +0.018 [-0.027, +0.079], 4 seeds, margin 0.05. The upper half-width
    # 0.061 must shrink below 0.05 - 0.018 = 0.032, by f = 0.52459: t/sqrt(n) below
    # 0.52459 x 3.1824 / 2 = 0.8347; n 8: 2.3646 / 2.8284 = 0.8360 (not yet), n 9: 2.3060 / 3 = 0.7687
    assert effect_seeds(0.018, -0.027, 0.079, 4, 0.05) == ("no effect on A", 9)
    # |dA| 0.08 >= margin: the lower half-width 0.10 must shrink below 0.08, f 0.8: t/sqrt(n)
    # below 1.2730; n 5: 2.7764 / 2.2361 = 1.2417
    assert effect_seeds(0.08, -0.02, 0.18, 4, 0.05) == ("moved A", 5)
    assert effect_seeds(-0.08, -0.18, 0.02, 4, 0.05) == ("moved A", 5)  # mirrored
    # an estimate at the margin's edge: no affordable budget
    assert effect_seeds(0.0499, -0.03, 0.13, 4, 0.05) == ("no effect on A", None)
    # an interval already inside the margin needs no more seeds than it has
    assert effect_seeds(0.0, -0.02, 0.02, 4, 0.05) == ("no effect on A", 4)
    # no interval (fit not identified): nothing to scale
    assert effect_seeds(0.01, np.nan, np.nan, 4, 0.05) == ("", None)


def test_t_seeds_by_hand():
    # mean 0.75, sd 1.3229 (var 5.25 / 3): t/sqrt(n) < 0.5669 first at n = 15
    # (n 14: 2.160 / 3.742 = 0.577; n 15: 2.145 / 3.873 = 0.554)
    v = [-1.0, 2.0, 0.5, 1.5]
    assert t_seeds(v, "above") == 15
    assert t_seeds([-x for x in v], "below") == 15
    assert t_seeds(v, "below") is None  # the mean is above 0: never below
    # mean 0, sd 1.1547: inside +-0.5 needs t/sqrt(n) < 0.4330, first at n = 23
    # (n 22: 2.080 / 4.690 = 0.4435; n 23: 2.074 / 4.796 = 0.4324)
    assert t_seeds([-1.0, 1.0, -1.0, 1.0], "inside", margin=0.5) == 23
    assert t_seeds([1.0, 2.0, 3.0, 4.0], "above") == 4  # already resolved with the runs given
    assert t_seeds([0.001, -0.001, 0.002, -0.002], "above") is None  # beyond MAX_SEEDS
    assert t_seeds([1.0], "above") is None


def test_claim_budgets_name_the_nearest_verdict():
    diffs = [-1.0, 2.0, 0.5, 1.5]
    assert claim2_budget(diffs, margin=0.1).startswith("~15 seeds per arm would resolve it as "
                                                       "*reproduces*")
    # claim 1 reproduces only when both GRPO's growth and the paired gap are above 0: the later
    # of the two (growth at 15 seeds, gap already at 4)
    assert claim1_budget(diffs, [1.0, 2.0, 3.0, 4.0], margin=0.1).startswith("~15 seeds")
    flat = [0.001, -0.001, 0.002, -0.002]
    assert claim2_budget(flat, margin=1e-6).startswith(f"no verdict within {MAX_SEEDS} seeds")


def _claim4_finals(seeds_in: dict, held_out: list) -> pd.DataFrame:
    rows = [(v, "s", "in_dist", g, 0.0) for v, gains in seeds_in.items() for g in gains]
    rows += [(v, "s", "held_out", g, 0.0) for v in seeds_in for g in held_out]
    return pd.DataFrame(rows, columns=["variant", "scale_value", "eval_set", "final", "r0"])


def test_claim4_budget_simulates_the_estimates_as_truth():
    # 3 algorithms x 2 seeds, in-distribution means 0.1, 0.4, 0.7 (within sd 0.1414), held out
    # all alike: z = 1.82 < 1.96 as run, so claim 4 is not resolved and gets a budget
    fin = _claim4_finals({"a": [0.0, 0.2], "b": [0.3, 0.5], "c": [0.6, 0.8]}, [0.0, 0.2])
    assert claim4_verdict(fin, "in_dist", "held_out")[0] == "not resolved"
    text = claim4_budget(fin, "in_dist", "held_out", max_seeds=32, sims=100)
    n = int(text.split("~")[1].split(" ")[0])
    assert text.endswith("by claim 4's own rule; analysis/resolve.py)") and "*reproduces*" in text
    # the count named is where the simulated share first reaches one half (bisection on the
    # same common random numbers as a direct call)
    assert claim4_share(fin, "in_dist", "held_out", n, sims=100)["reproduces"] >= 0.5
    assert claim4_share(fin, "in_dist", "held_out", n - 1, sims=100)["reproduces"] < 0.5
    assert claim4_budget(fin, "in_dist", "held_out", max_seeds=32, sims=100) == text
    # no difference between the algorithms in-distribution either: no budget decides it
    flat = _claim4_finals({"a": [0.0, 0.2], "b": [0.0, 0.2], "c": [0.0, 0.2]}, [0.0, 0.2])
    assert claim4_budget(flat, "in_dist", "held_out", max_seeds=16, sims=50).startswith(
        "no verdict within")
    # the report's claim table carries it where claim 4 is not resolved
    inputs = {"eval_set": "in_dist", "held_out": "held_out",
              "4": {"presets": ["a", "b", "c"], "finals": fin.values.tolist()}}
    row = decide_claims(inputs, pd.DataFrame()).set_index("claim").loc[4]
    assert row["verdict"] == "not resolved" and row["would_resolve"].startswith("~")


def test_claim4_budget_on_study_m4_800_6s():
    """The reference study's claim 4 (z 1.69 at 6 seeds): plugging the expected mean squares into
    the rule said 11 seeds; simulating the estimates as the truth, 11 seeds decide it in a
    quarter of the studies and ~15 in half (LOG, session 28)."""
    import json
    from pathlib import Path
    inputs = json.loads(Path("results/reference/study-m4-800-6s/claim_inputs.json").read_text())
    fin = pd.DataFrame(inputs["4"]["finals"],
                       columns=["variant", "scale_value", "eval_set", "final", "r0"])
    assert claim4_share(fin, "in_dist", "held_out", 11)["reproduces"] == pytest.approx(0.25)
    assert claim4_budget(fin, "in_dist", "held_out").startswith("~15 seeds per arm would "
                                                                "resolve it as *reproduces*")


def test_attach_effect_budget_only_on_not_resolved_rows():
    fits = [_arm(v, True) for v in ("grpo", "gspo", "dapo")]
    effects = pd.DataFrame([
        {"scale": "s", "variant": "gspo", "vs": "grpo", "dA": 0.018, "dA_lo": -0.027,
         "dA_hi": 0.079, "verdict": "not resolved"},
        {"scale": "s", "variant": "dapo", "vs": "grpo", "dA": 0.015, "dA_lo": -0.007,
         "dA_hi": 0.030, "verdict": "no effect on A"}])
    out = attach_effect_budget(effects, fits, "in_dist", 0.05)
    assert list(out["resolve_at"]) == ["no effect on A at 9 seeds", ""]


def test_a_reports_effects_carry_the_budget(tmp_path):
    """End to end on synthetic runs: an arm that scatters between seeds (sd of A 0.06 over 3
    seeds) is not resolved against a quiet reference; effects.csv names the seeds that would
    resolve it and the report states the rule."""
    from analysis.report import AnalysisOptions, run_analysis
    from analysis.synth import CurveSpec, RunSpec, make_config, write_run
    rng = np.random.default_rng(3)
    for algo, sd in (("grpo", 0.01), ("gspo", 0.06)):
        for seed in range(3):
            write_run(tmp_path / "sweep" / f"{algo}-s{seed}", RunSpec(
                config=make_config(algo, "tiny-1m", seed),
                curves={"in_dist": CurveSpec(0.6 + rng.normal(0, sd), 1.5, 30e12, 0.25)},
                steps=200, eval_every=10, n_items=256, k=4, seed=50 + seed))
    done = run_analysis(AnalysisOptions(str(tmp_path / "sweep"), n_boot=200, per_run=False,
                                        margin=0.05))
    row = done["tables"]["effects"].iloc[0]
    assert row["variant"] == "gspo" and row["verdict"] == "not resolved", row.to_dict()
    verdict, seeds = effect_seeds(row["dA"], row["dA_lo"], row["dA_hi"], 3, 0.05)
    assert seeds is not None and seeds > 3
    assert row["resolve_at"] == f"{verdict} at {seeds} seeds"
    assert "`resolve_at` (not resolved rows)" in (done["out"] / "report.md").read_text()


def _arm(variant, identified, steps=(20, 400), n_runs=4):
    runs = [SimpleNamespace(steps=np.array(steps)) for _ in range(n_runs)]
    return SimpleNamespace(level="group", variant=variant, scale="s", eval_set="in_dist",
                           curve=SimpleNamespace(n_runs=n_runs, runs=runs),
                           fit=SimpleNamespace(identified=identified))


def test_unidentified_fit_asks_for_steps_not_seeds():
    # check-cispo-steps cut at 400 (LOG session 24): CISPO's group fit not identified, dA +0.046
    # [-0.011, +0.163]. Seed scaling would say "> 64 seeds"; the same runs at 800 steps resolved.
    effects = pd.DataFrame([{"scale": "s", "variant": "cispo", "vs": "grpo", "dA": 0.0457,
                             "dA_lo": -0.0109, "dA_hi": 0.1628,
                             "verdict": "not resolved (fit not identified)"}])
    assert effect_seeds(0.0457, -0.0109, 0.1628, 4, 0.05) == ("no effect on A", None)
    out = attach_effect_budget(effects, [_arm("grpo", True), _arm("cispo", False)], "in_dist",
                               0.05)
    assert out["resolve_at"].iloc[0] == (
        "more steps: the fit of cispo (to step 400) is not identified (A extrapolated past the "
        "last eval); more seeds do not bound it")
    both = attach_effect_budget(effects, [_arm("grpo", False, (10, 300)), _arm("cispo", False)],
                                "in_dist", 0.05)
    assert "cispo (to step 400) and grpo (to step 300)" in both["resolve_at"].iloc[0]
    # both identified: the seed count as before (the GSPO row above: 9 seeds)
    gspo = effects.assign(variant="gspo", dA=0.018, dA_lo=-0.027, dA_hi=0.079,
                          verdict="not resolved")
    seeds = attach_effect_budget(gspo, [_arm("grpo", True), _arm("gspo", True)], "in_dist", 0.05)
    assert seeds["resolve_at"].iloc[0] == "no effect on A at 9 seeds"
