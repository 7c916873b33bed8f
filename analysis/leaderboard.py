"""Leaderboards, in-distribution vs held-out gains, and rank stability across model scale.

* :func:`rank_groups` orders the variants of each scale with ScaleRL's comparison rule
  (arXiv 2510.13786: A first; within the +-margin, B at a shared A) and reports, for each
  neighbour pair, which axis decided and whether the final pass rates differ by more than the
  eval set can resolve.
* :func:`summarise_gains` / :func:`spread_of_gains` follow OXRL (Li, arXiv 2603.19335): gain =
  accuracy minus the base model, per eval set; the spread (max - min across algorithms) per eval
  set and the ratio of in-distribution to held-out spreads (OXRL: 19.33 pp on GSM8K vs 0.54 pp
  on MATH, 36x).
* :func:`rank_across_scales`: rank of each variant per scale, Kendall tau between scales
  (scipy.stats.kendalltau) and the pairs whose order flips (rank inversions).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.compare import DEFAULT_MARGIN, compare_fits, resolvable_difference
from analysis.groups import GroupFit, scale_sort_key

IN_DIST = "in_dist"


def rank_groups(fits: list[GroupFit], groups: pd.DataFrame, eval_set: str,
                margin: float = DEFAULT_MARGIN) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Leaderboard of group fits on ``eval_set``, ranked within each scale.

    groups: :func:`analysis.groups.summarise_groups` output (final pass rates, gains).
    Returns (leaderboard, comparisons): the leaderboard has one row per variant and scale with
    rank, A/B/C_mid and CIs, the final pass rate and its SE; comparisons has one row per pair of
    neighbours with the axis that decided and the eval-set resolution of their final pass rates.
    Only identified fits are ranked and compared (:attr:`analysis.fit.FitResult.identified`:
    a parameter at a bound, evals that stop before C_mid, a curve that saturated before the
    first eval, a lack of fit or an A interval reaching 1 make A an extrapolation, and ordering
    by it would rank noise). Every pair of ranked variants is compared with the ScaleRL rule and
    ranks come from :func:`consistent_ranks`: when the decisions form a cycle its members share
    a rank and their note says so (no strict order is printed among them). Unidentified fits
    follow unranked (by A, with the fit's reasons), then groups whose fit was refused.
    """
    board, comps = [], []
    chosen = [g for g in fits if g.level == "group" and g.eval_set == eval_set]
    for scale in sorted({g.scale for g in chosen}, key=scale_sort_key):
        members = [g for g in chosen if g.scale == scale]
        fitted = [g for g in members if g.fit is not None]
        ranked = sorted((g for g in fitted if g.fit.identified), key=lambda g: -g.fit.A)
        pairs = {}
        for a, b in combinations(ranked, 2):
            pairs[(a.variant, b.variant)] = compare_fits(a.variant, a.fit, a.windowed, b.variant,
                                                         b.fit, b.windowed, margin)
        ranks, cycles = consistent_ranks([g.variant for g in ranked],
                                         {k: c.winner for k, c in pairs.items()})
        ranked.sort(key=lambda g: (ranks[g.variant], -g.fit.A))
        ordered = ranked + sorted((g for g in fitted if not g.fit.identified),
                                  key=lambda g: -g.fit.A)
        ordered += sorted((g for g in members if g.fit is None), key=lambda g: g.variant)
        cycle_of = {v: cyc for cyc in cycles for v in cyc}
        for g in ordered:
            row = _board_row(ranks.get(g.variant), g, groups, eval_set)
            if g.variant in cycle_of:
                others = ", ".join(v for v in cycle_of[g.variant] if v != g.variant)
                row["note"] = "; ".join(filter(None, [
                    f"in a cycle of ScaleRL decisions with {others}: no order among them",
                    row["note"]]))
            board.append(row)
        for a, b in zip(ranked, ranked[1:]):
            c = pairs.get((a.variant, b.variant)) or pairs[(b.variant, a.variant)]
            fa, fb = (_final(groups, g, eval_set) for g in (a, b))
            mrd = float(resolvable_difference(fa[1], fb[1]))
            diff = fa[0] - fb[0]
            (a_lo, a_hi), (b_lo, b_hi) = (g.boot.ci("A") if g.boot is not None else (np.nan, np.nan)
                                          for g in (a, b))
            in_cycle = a.variant in cycle_of and cycle_of[a.variant] == cycle_of.get(b.variant)
            comps.append({"scale": scale, "first": c.first, "second": c.second,
                          "decided_by": c.decided_by, "winner": c.winner, "delta": c.delta,
                          "in_cycle": in_cycle,
                          # the rule compares point estimates; do the A intervals separate?
                          "A_cis_overlap": (bool(a_lo <= b_hi and b_lo <= a_hi)
                                            if np.isfinite([a_lo, a_hi, b_lo, b_hi]).all() else None),
                          "A_shared": c.A_shared, "B_first": c.B_first, "B_second": c.B_second,
                          "final_diff": diff, "final_resolvable": mrd,
                          "final_resolved": bool(abs(diff) >= mrd),
                          "detail": c.describe()})
    return pd.DataFrame(board), pd.DataFrame(comps)


def consistent_ranks(variants: list[str], winners: dict[tuple[str, str], str | None]
                     ) -> tuple[dict[str, int], list[tuple[str, ...]]]:
    """Ranks from pairwise decisions that never print an order the decisions do not support.

    ``winners`` maps a pair (a, b) to the variant that won (None: undecided). X is above Y when
    X beats Y directly or through a chain of wins *and* Y does not reach X back; variants that
    reach each other (a cycle: X > Y > Z > X, possible with ScaleRL's A-then-B rule) share one
    rank. rank = 1 + the number of variants above. Returns (rank per variant, the cycles as
    tuples of their members, in input order)."""
    idx = {v: i for i, v in enumerate(variants)}
    n = len(variants)
    reach = np.zeros((n, n), bool)
    for (a, b), w in winners.items():
        if w is None:
            continue
        loser = b if w == a else a
        reach[idx[w], idx[loser]] = True
    for k in range(n):  # transitive closure (Floyd-Warshall on booleans)
        reach |= reach[:, k:k + 1] & reach[k:k + 1, :]
    mutual = reach & reach.T
    above = reach & ~reach.T
    ranks = {v: 1 + int(above[:, i].sum()) for v, i in idx.items()}
    cycles, seen = [], set()
    for v, i in idx.items():
        if mutual[i, i] and v not in seen:
            members = tuple(u for u, j in idx.items() if mutual[i, j])
            seen.update(members)
            cycles.append(members)
    return ranks, cycles


def _final(groups: pd.DataFrame, g: GroupFit, eval_set: str) -> tuple[float, float]:
    row = groups[(groups["variant"] == g.variant) & (groups["scale"] == g.scale)
                 & (groups["eval_set"] == eval_set)]
    if row.empty:
        return float("nan"), float("nan")
    return float(row["final"].iloc[0]), float(row["final_se"].iloc[0])


def _board_row(rank, g: GroupFit, groups: pd.DataFrame, eval_set: str) -> dict:
    final, final_se = _final(groups, g, eval_set)
    rec = {"scale": g.scale, "rank": rank, "variant": g.variant, "eval_set": eval_set,
           "n_runs": len(g.run_ids), "final": final, "final_se": final_se}
    for name in ("A", "B", "C_mid"):
        rec[name] = getattr(g.fit, name) if g.fit else np.nan
        lo, hi = g.boot.ci(name) if g.boot is not None else (np.nan, np.nan)
        rec[f"{name}_lo"], rec[f"{name}_hi"] = lo, hi
    rec["R0"] = g.fit.R0 if g.fit else np.nan
    rec["rmse"] = g.fit.rmse if g.fit else np.nan
    rec["converged"] = bool(g.fit.converged) if g.fit else False
    rec["identified"] = bool(g.fit.identified) if g.fit else False
    rec["ci_method"] = g.boot.method if g.boot is not None else ""
    rec["note"] = "; ".join(filter(None, [g.fit.message if g.fit else "", g.notes]))
    return rec


def summarise_gains(groups: pd.DataFrame, fits: list[GroupFit]) -> pd.DataFrame:
    """Per variant, scale and eval set: base (R0), final, gain = final - base with its CI, and
    the fitted gain A - R0 with the bootstrap CI of A shifted by R0."""
    by_key = {(g.variant, g.scale, g.eval_set): g for g in fits if g.level == "group"}
    rows = []
    for rec in groups.to_dict("records"):
        g = by_key.get((rec["variant"], rec["scale"], rec["eval_set"]))
        fit_gain = lo = hi = np.nan
        if g is not None and g.fit is not None:
            fit_gain = g.fit.A - g.fit.R0
            if g.boot is not None:
                a_lo, a_hi = g.boot.ci("A")
                lo, hi = a_lo - g.fit.R0, a_hi - g.fit.R0
        rows.append({**rec, "fit_gain": fit_gain, "fit_gain_lo": lo, "fit_gain_hi": hi})
    return pd.DataFrame(rows)


def spread_of_gains(gains: pd.DataFrame, in_dist: str = IN_DIST) -> pd.DataFrame:
    """Spread (max - min across variants) of the final and fitted gains, per scale and eval
    set, and the ratio of the in-distribution spread to each other set's spread."""
    rows = []
    for (scale, eval_set), g in gains.groupby(["scale", "eval_set"]):
        rows.append({"scale": scale, "eval_set": eval_set, "n_variants": g["variant"].nunique(),
                     "spread_gain": g["gain"].max() - g["gain"].min(),
                     "spread_fit_gain": g["fit_gain"].max() - g["fit_gain"].min(),
                     "best": g.loc[g["gain"].idxmax(), "variant"] if g["gain"].notna().any() else ""})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    ref = out[out["eval_set"] == in_dist].set_index("scale")
    for col in ("spread_gain", "spread_fit_gain"):
        base = out["scale"].map(ref[col]) if not ref.empty else np.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"ratio_{col}"] = np.where(out["eval_set"] == in_dist, np.nan, base / out[col])
    return out


def rank_across_scales(board: pd.DataFrame, margin: float = DEFAULT_MARGIN
                       ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """From a leaderboard (ranked per scale): a rank table (variant x scale), Kendall tau for
    each pair of scales, and the inversions (pairs of variants ordered differently at two
    scales; ``within_margin`` when |dA| < margin at either scale, i.e. not a firm flip)."""
    ranked = board.dropna(subset=["rank"])
    if ranked.empty:
        return pd.DataFrame(), pd.DataFrame(), pd.DataFrame()
    ranks = ranked.pivot_table(index="variant", columns="scale", values="rank")
    ranks = ranks[sorted(ranks.columns, key=scale_sort_key)]
    A = ranked.pivot_table(index="variant", columns="scale", values="A")
    taus, flips = [], []
    for tau, both in _scale_pairs(ranks):
        taus.append(tau)
        s1, s2 = tau["scale_a"], tau["scale_b"]
        for v1, v2 in combinations(both.index, 2):
            d1 = both.loc[v1, s1] - both.loc[v2, s1]
            d2 = both.loc[v1, s2] - both.loc[v2, s2]
            if d1 * d2 < 0:
                dA1, dA2 = A.loc[v1, s1] - A.loc[v2, s1], A.loc[v1, s2] - A.loc[v2, s2]
                flips.append({"scale_a": s1, "scale_b": s2, "first": v1, "second": v2,
                              "rank_a": f"{int(both.loc[v1, s1])} vs {int(both.loc[v2, s1])}",
                              "rank_b": f"{int(both.loc[v1, s2])} vs {int(both.loc[v2, s2])}",
                              "dA_a": dA1, "dA_b": dA2,
                              "within_margin": bool(abs(dA1) < margin or abs(dA2) < margin)})
    return ranks.reset_index(), pd.DataFrame(taus), pd.DataFrame(flips)


def rank_gains_across_scales(gains: pd.DataFrame, eval_set: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rank of each variant by its mean gain at matched training (final - R0; 1 = largest) per
    scale, and Kendall tau between each pair of scales over the variants both have. The fallback
    when fitted A cannot rank (a scale whose curves do not saturate or do not rise): a gain exists
    either way, though a rank difference may be far below what the eval set resolves."""
    g = gains[(gains["eval_set"] == eval_set) & gains["gain"].notna()]
    if g.empty:
        return pd.DataFrame(), pd.DataFrame()
    g = g.assign(rank=g.groupby("scale")["gain"].rank(ascending=False, method="min"))
    ranks = g.pivot_table(index="variant", columns="scale", values="rank")
    ranks = ranks[sorted(ranks.columns, key=scale_sort_key)]
    return ranks.reset_index(), pd.DataFrame([tau for tau, _ in _scale_pairs(ranks)])


def _scale_pairs(ranks: pd.DataFrame):
    """For each pair of scales (columns of ``ranks``): the Kendall tau row over the variants
    ranked at both, and those variants' ranks."""
    for s1, s2 in combinations(list(ranks.columns), 2):
        both = ranks[[s1, s2]].dropna()
        tau, p = (stats.kendalltau(both[s1], both[s2]) if len(both) >= 2 else (np.nan, np.nan))
        yield {"scale_a": s1, "scale_b": s2, "n_variants": len(both), "kendall_tau": tau,
               "p_value": p}, both
