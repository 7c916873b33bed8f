"""OXRL's study design (Li 2026, arXiv 2603.19335), as tables: the "hierarchy of leverage", a
variance decomposition of the final pass rate across the sweep's axes, Welch t-tests of every
variant against a reference with Bonferroni correction, a seed-sanity check, and the rank of the
training paradigms across scale.

Input: one row per run and eval set (:func:`run_gains`), with the run's gain = final - R0 at
matched training (:func:`analysis.groups.final_points`), its variant, scale, seed and paradigm
labels. The paradigm families follow OXRL's table: ``SFT`` (sft, sft_gold), ``preference``
(the offline preference losses: dpo, ipo, simpo, kto, ...) and ``online`` (the RL presets);
``mode`` is online vs offline. Runs without ``algo.paradigm`` in their config (older sweeps) are
online.

* :func:`leverage_table`: for each axis, the spread of the level means of the gain (max - min;
  for two levels their difference) with a bootstrap interval over runs resampled within each
  (scale, variant) cell, as OXRL's "differences of factor-level means" (scale ~50 pp, paradigm
  ~10, online vs offline ~9, loss tweak ~1). The loss axis is taken *within* each paradigm family
  and averaged over families and scales.
* :func:`variance_decomposition`: sequential (type-I) sums of squares of an additive least-squares
  model of the final pass rate, in the order scale, mode, paradigm, variant, seed; each share of
  the total and the residual. OXRL did not do this; with an unbalanced design the order matters,
  and the order is stated.
* :func:`welch_vs_reference`: ``scipy.stats.ttest_ind(equal_var=False)`` of each variant's per-seed
  gains against the reference's at the same scale and eval set; Bonferroni over every comparison
  of the table (OXRL: alpha = 0.05 / 19).
* :func:`seed_sanity`: runs of one variant and scale whose seeds collide, or whose per-seed finals
  are bit-identical on every eval set although the seeds differ (OXRL's own intermediate 7B stats
  list bit-identical per-seed values).
* :func:`paradigm_ranks`: the paradigm families ranked by mean gain per scale, Kendall tau between
  scales and the flipped pairs (reusing :func:`analysis.leaderboard.rank_gains_across_scales`).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from analysis.groups import scale_sort_key

SFT_LOSSES = ("sft", "sft_gold")
FAMILIES = ("SFT", "preference", "online")
LEVERAGE_AXES = ("scale", "mode", "paradigm", "loss", "seed")


def family_of(paradigm, offline_loss) -> str:
    """OXRL's paradigm family of a run from its config values."""
    if str(paradigm) != "offline":
        return "online"
    return "SFT" if str(offline_loss) in SFT_LOSSES else "preference"


def run_gains(finals: pd.DataFrame, runs: pd.DataFrame, seed_col: str | None) -> pd.DataFrame:
    """One row per run and eval set: variant, scale, seed, mode, paradigm, r0, final, gain."""
    cols = ["run_id", "variant", "scale_value"]
    extra = [c for c in ("algo.paradigm", "algo.offline_loss") if c in runs.columns]
    seed = [seed_col] if seed_col and seed_col in runs.columns else []
    g = finals.merge(runs[cols + extra + seed].drop(columns=["variant", "scale_value"]), on="run_id")
    par = g["algo.paradigm"] if "algo.paradigm" in g else pd.Series("online", index=g.index)
    loss = g["algo.offline_loss"] if "algo.offline_loss" in g else pd.Series("none", index=g.index)
    out = pd.DataFrame({"run_id": g["run_id"], "variant": g["variant"].astype(str),
                        "scale": g["scale_value"].astype(str), "eval_set": g["eval_set"],
                        "seed": g[seed_col].astype(str) if seed else "0",
                        "paradigm": [family_of(p, l) for p, l in zip(par, loss)],
                        "r0": g["r0"], "final": g["final"], "gain": g["final"] - g["r0"]})
    out["mode"] = np.where(out["paradigm"] == "online", "online", "offline")
    return out.dropna(subset=["gain"]).reset_index(drop=True)


def _level_spread(df: pd.DataFrame, axis: str, value: str) -> tuple[float, str]:
    """(max - min of the level means, 'best - worst' label); NaN with < 2 levels."""
    means = df.groupby(axis)[value].mean()
    if len(means) < 2:
        return np.nan, ""
    return float(means.max() - means.min()), f"{means.idxmax()} - {means.idxmin()}"


def _spread_of_means(y: np.ndarray, codes: np.ndarray, n: int) -> float:
    """max - min over the levels present of the mean of y per level code (NaN with < 2)."""
    cnt = np.bincount(codes, minlength=n)
    present = cnt > 0
    if present.sum() < 2:
        return np.nan
    means = np.bincount(codes, weights=y, minlength=n)[present] / cnt[present]
    return float(means.max() - means.min())


class _AxisCodes:
    """Integer codes of every axis over one eval set's runs, so that a bootstrap replicate's
    statistics are a few bincounts (no groupby per replicate)."""

    def __init__(self, df: pd.DataFrame):
        self.codes = {a: pd.factorize(df["variant" if a == "loss" else a].astype(str))[0]
                      for a in LEVERAGE_AXES}
        cell, self.cells = pd.factorize(df["paradigm"].astype(str) + "\x00" + df["scale"].astype(str))
        self.cell = cell
        self.n_var = int(self.codes["loss"].max()) + 1

    def stat(self, axis: str, y: np.ndarray, idx: np.ndarray) -> float:
        if axis != "loss":
            c = self.codes[axis][idx]
            return _spread_of_means(y[idx], c, int(self.codes[axis].max()) + 1)
        # the loss tweak: the spread of variant means within each (family, scale) cell with
        # >= 2 variants, averaged over those cells
        out = []
        for k in range(len(self.cells)):
            sel = idx[self.cell[idx] == k]
            v = _spread_of_means(y[sel], self.codes["loss"][sel], self.n_var)
            if np.isfinite(v):
                out.append(v)
        return float(np.mean(out)) if out else np.nan


def leverage_table(g: pd.DataFrame, eval_set: str, value: str = "gain", n_boot: int = 1000,
                   seed: int = 0) -> pd.DataFrame:
    """The hierarchy of leverage at one eval set (see the module docstring), largest first."""
    df = g[g["eval_set"] == eval_set].reset_index(drop=True)
    if df.empty:
        return pd.DataFrame(columns=["axis", "levels", "n_levels", "spread", "lo", "hi", "between"])
    rng = np.random.default_rng(seed)
    codes, y = _AxisCodes(df), df[value].to_numpy(float)
    cells = [d.index.to_numpy() for _, d in df.groupby(["scale", "variant"])]
    everything = np.arange(len(df))
    boots = {a: [] for a in LEVERAGE_AXES}
    for _ in range(n_boot):  # runs resampled within each (scale, variant) cell
        idx = np.concatenate([rng.choice(c, size=len(c), replace=True) for c in cells])
        for a in LEVERAGE_AXES:
            boots[a].append(codes.stat(a, y, idx))
    rows = []
    for a in LEVERAGE_AXES:
        col = "variant" if a == "loss" else a
        bs = np.array([x for x in boots[a] if np.isfinite(x)])
        lo, hi = (np.percentile(bs, [2.5, 97.5]) if len(bs) else (np.nan, np.nan))
        rows.append({"axis": a, "levels": ", ".join(sorted(df[col].astype(str).unique(),
                                                           key=scale_sort_key if a == "scale" else str)),
                     "n_levels": df[col].nunique(), "spread": codes.stat(a, y, everything),
                     "lo": lo, "hi": hi,
                     "between": "" if a == "loss" else _level_spread(df, a, value)[1]})
    out = pd.DataFrame(rows)
    return out.sort_values("spread", ascending=False, na_position="last").reset_index(drop=True)


def variance_decomposition(g: pd.DataFrame, eval_set: str, value: str = "final",
                           factors=("scale", "mode", "paradigm", "variant", "seed")) -> pd.DataFrame:
    """Sequential sums of squares of the additive model value ~ factors (one-hot, in order)."""
    df = g[g["eval_set"] == eval_set]
    y = df[value].to_numpy(float)
    if len(y) < 2:
        return pd.DataFrame(columns=["factor", "df", "ss", "share"])
    total = float(((y - y.mean()) ** 2).sum())
    X = np.ones((len(y), 1))
    prev = total
    rows = []
    for f in factors:
        dummies = pd.get_dummies(df[f].astype(str), drop_first=True, dtype=float).to_numpy()
        X2 = np.hstack([X, dummies]) if dummies.size else X
        beta, *_ = np.linalg.lstsq(X2, y, rcond=None)
        rss = float(((y - X2 @ beta) ** 2).sum())
        rank_gain = np.linalg.matrix_rank(X2) - np.linalg.matrix_rank(X)
        rows.append({"factor": f, "df": int(rank_gain), "ss": max(prev - rss, 0.0),
                     "share": max(prev - rss, 0.0) / total if total > 0 else np.nan})
        X, prev = X2, rss
    rows.append({"factor": "residual", "df": int(len(y) - np.linalg.matrix_rank(X)), "ss": prev,
                 "share": prev / total if total > 0 else np.nan})
    return pd.DataFrame(rows)


def welch_vs_reference(g: pd.DataFrame, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """Every variant against `reference` at the same scale and eval set, on per-seed gains."""
    from scipy import stats

    rows = []
    for (scale, es), d in g.groupby(["scale", "eval_set"]):
        ref = d.loc[d["variant"] == reference, "gain"].to_numpy(float)
        for v, dv in d[d["variant"] != reference].groupby("variant"):
            x = dv["gain"].to_numpy(float)
            if len(x) >= 2 and len(ref) >= 2:
                t, p = stats.ttest_ind(x, ref, equal_var=False)
            else:
                t, p = np.nan, np.nan
            rows.append({"scale": scale, "eval_set": es, "variant": v, "reference": reference,
                         "n": len(x), "n_ref": len(ref), "diff": x.mean() - ref.mean() if len(ref) else np.nan,
                         "t": float(t), "p": float(p)})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    m = int(out["p"].notna().sum())
    out["p_bonferroni"] = np.minimum(out["p"] * m, 1.0)
    out["alpha_bonferroni"] = alpha / max(m, 1)
    out["significant"] = out["p"] < out["alpha_bonferroni"]
    return out.sort_values(["eval_set", "scale", "p"], key=lambda s: s.map(scale_sort_key)
                           if s.name == "scale" else s).reset_index(drop=True)


def seed_sanity(g: pd.DataFrame) -> pd.DataFrame:
    """Rows of runs that look like one seed's copy: per (variant, scale), seeds that collide (two
    runs with one seed) and runs of different seeds whose finals are bit-identical on every eval
    set. Empty when every seed is its own."""
    rows = []
    for (v, s), d in g.groupby(["variant", "scale"]):
        per_run = d.sort_values("eval_set").groupby("run_id").agg(
            seed=("seed", "first"), finals=("final", lambda x: tuple(x.to_numpy(float).tolist())))
        for seed, dd in per_run.groupby("seed"):
            if len(dd) > 1:
                rows.append({"variant": v, "scale": s, "problem": "seed collision",
                             "seeds": str(seed), "runs": ", ".join(dd.index)})
        for finals, dd in per_run.groupby("finals"):
            if dd["seed"].nunique() > 1:
                rows.append({"variant": v, "scale": s, "problem": "bit-identical finals",
                             "seeds": ", ".join(sorted(dd["seed"].unique())),
                             "runs": ", ".join(dd.index)})
    return pd.DataFrame(rows, columns=["variant", "scale", "problem", "seeds", "runs"])


def paradigm_ranks(g: pd.DataFrame, eval_set: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Paradigm families ranked by mean gain per scale (1 = largest), Kendall tau between scales,
    and the pairs of families whose order flips between two scales."""
    from analysis.leaderboard import rank_gains_across_scales

    fam = (g[g["eval_set"] == eval_set].groupby(["scale", "paradigm"])["gain"].mean()
           .reset_index().rename(columns={"paradigm": "variant"}))
    fam["eval_set"] = eval_set
    ranks, taus = rank_gains_across_scales(fam, eval_set)
    flips = []
    if len(ranks):
        r = ranks.set_index("variant")
        for s1, s2 in combinations(list(r.columns), 2):
            both = r[[s1, s2]].dropna()
            for a, b in combinations(both.index, 2):
                if (both.loc[a, s1] - both.loc[b, s1]) * (both.loc[a, s2] - both.loc[b, s2]) < 0:
                    flips.append({"scale_a": s1, "scale_b": s2, "first": a, "second": b,
                                  "rank_a": f"{int(both.loc[a, s1])} vs {int(both.loc[b, s1])}",
                                  "rank_b": f"{int(both.loc[a, s2])} vs {int(both.loc[b, s2])}"})
    return ranks, taus, pd.DataFrame(flips)


def headlines(leverage: pd.DataFrame, gains: pd.DataFrame, spreads: pd.DataFrame,
              primary: str) -> list[str]:
    """OXRL's three headlines, each read off this sweep's tables in one sentence:
    (1) paradigm and online vs offline move the gain more than the loss tweak (leverage: both
    spreads above the loss spread, 'reproduces' when their 95% intervals lie above the loss
    interval, 'in the point estimates only' when not); (2) rankings invert with scale (Kendall tau
    of the variants' gain ranks between the two smallest and largest scales, SimPO's rank);
    (3) in-distribution spreads shrink on the held-out sets (compression > 1 per set and scale;
    OXRL: 36x and 41x)."""
    from analysis.leaderboard import rank_gains_across_scales

    out = []
    lev = leverage.set_index("axis") if len(leverage) else pd.DataFrame()
    if {"paradigm", "mode", "loss"} <= set(lev.index) and \
            np.isfinite(lev.loc[["paradigm", "mode", "loss"], "spread"].astype(float)).all():
        loss = lev.loc["loss"]
        parts, firm = [], []
        for a in ("paradigm", "mode"):
            x = lev.loc[a]
            parts.append(f"{a} {x['spread']:+.3f} [{x['lo']:.3f}, {x['hi']:.3f}]")
            firm.append((x["spread"] > loss["spread"], x["lo"] > loss["hi"]))
        verdict = ("reproduces" if all(b for _, b in firm) else
                   "in the point estimates only (intervals overlap the loss tweak's)"
                   if all(a for a, _ in firm) else "does not reproduce")
        out.append(f"1. Paradigm and online vs offline dwarf the loss tweak: **{verdict}** here: "
                   f"{', '.join(parts)} vs loss {loss['spread']:+.3f} [{loss['lo']:.3f}, "
                   f"{loss['hi']:.3f}] (OXRL: ~10 and ~9 pp vs ~1).")
    else:
        out.append("1. Paradigm vs loss tweak: not measurable (the sweep lacks a paradigm, mode or "
                   "loss axis with two levels).")
    ranks, taus = rank_gains_across_scales(gains, primary)
    if len(taus):
        t0 = taus.iloc[0]
        r = ranks.set_index("variant")
        simpo = ""
        if "simpo" in r.index and r.loc["simpo", [t0["scale_a"], t0["scale_b"]]].notna().all():
            n = r.notna().sum()
            simpo = (f"; SimPO ranks {int(r.loc['simpo', t0['scale_a']])} of "
                     f"{int(n[t0['scale_a']])} at {t0['scale_a']} and "
                     f"{int(r.loc['simpo', t0['scale_b']])} of {int(n[t0['scale_b']])} at "
                     f"{t0['scale_b']} (OXRL: worst small, best at 7B)")
        verdict = ("reproduces" if t0["kendall_tau"] < 0 else "partly (some pairs flip)"
                   if t0["kendall_tau"] < 1 - 1e-9 else "does not reproduce")
        out.append(f"2. Rankings invert with scale: **{verdict}**: Kendall tau of the variants' "
                   f"{primary} gain ranks between {t0['scale_a']} and {t0['scale_b']} = "
                   f"{t0['kendall_tau']:+.2f} (p = {t0['p_value']:.2g}, {int(t0['n_variants'])} "
                   f"variants){simpo}.")
    else:
        out.append("2. Rank inversion across scale: one scale only, not measurable.")
    held = spreads[spreads["eval_set"] != primary] if len(spreads) else spreads
    if len(held):
        ratios = [f"{r.eval_set} at {r.scale}: {r.ratio_spread_gain:.1f}x "
                  f"({spreads[(spreads.scale == r.scale) & (spreads.eval_set == primary)]['spread_gain'].iloc[0]:.3f}"
                  f" vs {r.spread_gain:.3f})" for r in held.itertuples()]
        shrink = (held["ratio_spread_gain"] > 1).mean()
        verdict = ("reproduces" if shrink == 1 else "partly" if shrink > 0 else "does not reproduce")
        out.append(f"3. In-distribution spreads shrink on held-out sets: **{verdict}** "
                   f"(in-dist spread / held-out spread of the gains: {'; '.join(ratios)}; "
                   f"OXRL: 36x on MATH, 41x on the general benchmarks).")
    else:
        out.append("3. Compression: no held-out set in this sweep.")
    return out


def oxrl_tables(finals: pd.DataFrame, runs: pd.DataFrame, axes, primary: str, opt) -> dict:
    """OXRL's tables (analysis/paradigms.py) when the sweep has runs of the offline paradigm;
    {} otherwise (an online-only report is as before)."""
    if "algo.paradigm" not in runs.columns or not (runs["algo.paradigm"] == "offline").any():
        return {}
    g = run_gains(finals, runs, axes.seed)
    variants = set(g["variant"])
    reference = opt.reference if opt.reference in variants else (
        "dpo" if "dpo" in variants else sorted(variants)[0])
    ranks, taus, flips = paradigm_ranks(g, primary)
    return {"leverage": leverage_table(g, primary, n_boot=opt.n_boot, seed=opt.seed),
            "variance": variance_decomposition(g, primary),
            "welch": welch_vs_reference(g, reference),
            "seed_sanity": seed_sanity(g),
            "paradigm_ranks": ranks, "paradigm_kendall": taus, "paradigm_flips": flips}


def report_section(r, t: dict, primary: str, as_ranks) -> None:
    """The report's OXRL section (an analysis.report.Report `r`), from :func:`oxrl_tables`;
    `as_ranks` formats a rank table (the report's own helper)."""
    r.h("Paradigms (OXRL): which of its three headlines reproduce here")
    for line in headlines(t["leverage"], t["gains"], t["spreads"], primary):
        r.p(line)
    r.h("Paradigms (OXRL): the hierarchy of leverage")
    r.p(f"Gain = final - R0 at matched training on {primary}, per run. For each axis, the spread "
        "of its level means (max - min; two levels: their difference), with a 95% bootstrap "
        "interval over runs resampled within each (scale, variant) cell; `loss` is the spread of "
        "the variants within each paradigm family (SFT, preference, online) and scale, averaged. "
        "OXRL (arXiv 2603.19335) reads scale ~50 pp > paradigm ~10 > online vs offline ~9 > "
        "loss tweak ~1 at 0.5B-7B.")
    r.table(t["leverage"])
    r.p("Variance decomposition of the final pass rate (not in OXRL): sequential (type-I) sums "
        "of squares of an additive least-squares model, in the order listed; share of the total.")
    r.table(t["variance"])
    w = t["welch"]
    if len(w):
        r.p(f"Welch t-tests (scipy ttest_ind, equal_var=False) of each variant's per-seed gains "
            f"against `{w['reference'].iloc[0]}` at the same scale and eval set, Bonferroni over "
            f"the {int(w['p'].notna().sum())} tests (alpha {w['alpha_bonferroni'].iloc[0]:.2g}): "
            f"{int(w['significant'].sum())} significant.")
        r.table(w)
    ss = t["seed_sanity"]
    r.p("Seed sanity: " + ("every run's seed is its own (no collision, no bit-identical per-seed "
                           "finals)." if ss.empty else f"{len(ss)} problem(s):"))
    if len(ss):
        r.table(ss)
    if len(t["paradigm_ranks"]) and t["paradigm_ranks"].shape[1] > 2:
        r.p("Paradigm families ranked by mean gain per scale (1 = largest), Kendall tau between "
            f"scales, and the pairs whose order flips ({len(t['paradigm_flips'])}).")
        r.table(as_ranks(t["paradigm_ranks"]))
        r.table(t["paradigm_kendall"])
        if len(t["paradigm_flips"]):
            r.table(t["paradigm_flips"])
