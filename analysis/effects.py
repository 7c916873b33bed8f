"""Design-choice effects: every variant against a reference algorithm, decided with uncertainty.

:func:`choice_effects` -- every variant against a reference algorithm (GRPO by default) at each
scale: which ``algo.*`` choices differ, the change in asymptote ``dA`` and in efficiency ``dB``
with bootstrap CIs (replicates of two resampled groups, subtracted; paired when both groups were
bootstrapped alike), and the verdict of :func:`effect_verdict`: *moved A* (the dA interval
excludes 0 and |dA| >= the margin), *only B* (A shown not to move, the B interval excludes 1),
*no effect* / *no effect on A* (equivalence within the margins), or *not resolved*. The report,
``calibrate``, ``combine`` and successive halving share these functions.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

REFERENCE = "grpo"
#: config keys that describe the algorithm (the design space); compared between variants
CHOICE_PREFIX = "algo."
IGNORED_CHOICES = {"algo.preset", "algo.deviates_from_preset"}


# ------------------------------------------------------------------------------------------------
# Design-choice effects: dA and dB against a reference
# ------------------------------------------------------------------------------------------------
def _differences(runs: pd.DataFrame, variant: str, reference: str) -> str:
    cols = [c for c in runs.columns if c.startswith(CHOICE_PREFIX) and c not in IGNORED_CHOICES]
    a = runs[runs["variant"] == variant]
    b = runs[runs["variant"] == reference]
    if a.empty or b.empty:
        return ""
    ra, rb = a.iloc[0], b.iloc[0]
    out = []
    for c in cols:
        va, vb = ra.get(c), rb.get(c)
        if (pd.isna(va) and pd.isna(vb)) or str(va) == str(vb):
            continue
        out.append(f"{c[len(CHOICE_PREFIX):]}={va}")
    return ", ".join(out)


def _diff_ci(x: np.ndarray, y: np.ndarray, inflation: float, log: bool) -> tuple[float, float, float]:
    """Point estimate and widened percentile CI of x - y (or log x - log y) over replicates."""
    n = min(x.size, y.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    x, y = x[:n], y[:n]
    ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) & (y > 0) if log else True)
    if ok.sum() < 10:
        return float("nan"), float("nan"), float("nan")
    d = (np.log(x[ok]) - np.log(y[ok])) if log else (x[ok] - y[ok])
    lo, mid, hi = np.quantile(d, [0.025, 0.5, 0.975])
    return float(mid), float(mid + inflation * (lo - mid)), float(mid + inflation * (hi - mid))


#: equivalence margin on B for "no effect": B ratio CI inside (1/B_MARGIN, B_MARGIN)
B_MARGIN = 1.25
#: the verdict of a comparison with an unidentified fit
UNIDENTIFIED = "not resolved (fit not identified)"
#: verdicts of :func:`effect_verdict` that answer a comparison; the rest leave it open
RESOLVED = ("moved A", "moved A and B", "only B", "no effect", "no effect on A")


def effect_verdict(dA: float, dA_ci: tuple[float, float], B_ratio_ci: tuple[float, float],
                   identified: bool, margin: float = 0.02, b_margin: float = B_MARGIN) -> str:
    """The verdict of one design-choice comparison (shared by the report and ``calibrate``).

    * "not resolved (fit not identified)": either fit is not identified (A is an extrapolation;
      its replicates pile up on a bound and an interval from them means nothing).
    * "moved A" (+ " and B"): the dA interval excludes 0 and |dA| >= margin.
    * "only B": the B-ratio interval excludes 1 *and* the dA interval lies inside
      (-margin, +margin) (A shown not to move, an equivalence test).
    * "moved B, A not resolved": B moved, A neither moved nor shown equal.
    * "no effect": dA inside (-margin, margin) and B ratio inside (1/b_margin, b_margin).
    * "no effect on A": dA inside (-margin, margin) (an equivalence test on A, TOST at 2.5% per
      side: the whole 95% interval inside the margin), B neither moved nor shown equal.
    * "not resolved": otherwise (the runs cannot tell)."""
    if not identified:
        return UNIDENTIFIED
    lo, hi = dA_ci
    b_lo, b_hi = B_ratio_ci
    a_moved = bool(np.isfinite(lo) and (lo > 0 or hi < 0) and abs(dA) >= margin)
    a_equal = bool(np.isfinite(lo) and -margin < lo and hi < margin)
    b_moved = bool(np.isfinite(b_lo) and (b_lo > 1 or b_hi < 1))
    b_equal = bool(np.isfinite(b_lo) and 1 / b_margin < b_lo and b_hi < b_margin)
    if a_moved:
        return "moved A and B" if b_moved else "moved A"
    if b_moved:
        return "only B" if a_equal else "moved B, A not resolved"
    if a_equal:
        return "no effect" if b_equal else "no effect on A"
    return "not resolved"


def effect_intervals(g_boot, ref_boot) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% intervals of dA and of the B ratio from two groups' bootstrap replicates, subtracted
    replicate by replicate and widened by the larger small-sample factor.

    The replicates are *paired* when both groups were bootstrapped with the same seed and the
    same number of runs (:func:`analysis.bootstrap.bootstrap_fit` sorts runs by seed and draws
    the same seed multiset and the same eval items in replicate r of every group): replicate r
    of both groups then resamples the same seeds and items, so what the variants share (a seed's
    prompt stream, an item's difficulty) cancels in the difference. Otherwise the draws are
    unrelated and the difference is that of independent groups."""
    if g_boot is None or ref_boot is None:
        return (np.nan, np.nan), (np.nan, np.nan)
    f = max(g_boot.inflation(), ref_boot.inflation())
    _, a_lo, a_hi = _diff_ci(g_boot.A, ref_boot.A, f, log=False)
    _, lo, hi = _diff_ci(g_boot.B, ref_boot.B, f, log=True)
    return (a_lo, a_hi), (float(np.exp(lo)), float(np.exp(hi)))


def choice_effects(fits, runs: pd.DataFrame, eval_set: str, reference: str = REFERENCE,
                   margin: float = 0.02) -> pd.DataFrame:
    """Each variant vs ``reference`` per scale: differing choices, dA and B ratio with CIs, verdict.

    dA = A(variant) - A(reference); B is compared as a ratio (B is an exponent: log-space CI).
    Verdicts: :func:`effect_verdict`."""
    groups = {(g.variant, g.scale): g for g in fits
              if g.level == "group" and g.eval_set == eval_set and g.fit is not None}
    rows = []
    for (variant, scale), g in sorted(groups.items()):
        ref = groups.get((reference, scale))
        if variant == reference or ref is None:
            continue
        (a_lo, a_hi), (b_lo, b_hi) = effect_intervals(g.boot, ref.boot)
        rec = {"scale": scale, "variant": variant, "vs": reference,
               "choices": _differences(runs, variant, reference),
               "dA": g.fit.A - ref.fit.A, "dA_lo": a_lo, "dA_hi": a_hi,
               "B_ratio": g.fit.B / ref.fit.B if ref.fit.B else np.nan,
               "B_ratio_lo": b_lo, "B_ratio_hi": b_hi}
        rec["verdict"] = effect_verdict(rec["dA"], (a_lo, a_hi), (b_lo, b_hi),
                                        g.fit.identified and ref.fit.identified, margin)
        rows.append(rec)
    return pd.DataFrame(rows, columns=["scale", "variant", "vs", "choices", "dA", "dA_lo", "dA_hi",
                                       "B_ratio", "B_ratio_lo", "B_ratio_hi", "verdict"])
