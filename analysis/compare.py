"""Comparing fitted curves: ScaleRL's A-then-B rule, extrapolation error, eval-set resolution.

* :func:`compare_fits` -- ScaleRL (arXiv 2510.13786, Sec. 4 / App. A.5): if two groups' asymptotes
  differ by less than a margin (default 0.02, the seed-to-seed spread of A they measured over
  three runs), refit both with A fixed to their mean and compare the exponent B (higher B is
  "at least as good"); otherwise the higher A wins. The result says which axis decided.
* :func:`check_extrapolation` -- fit on the first part of compute, predict the rest, and report
  the prediction error as numbers (ScaleRL only showed this visually).
* :func:`resolvable_difference` / :func:`mark_resolution` -- with standard errors se1, se2 of two
  pass rates, the smallest difference the eval set resolves at 95% is
  ``1.96 * sqrt(se1^2 + se2^2)`` (items are the sampling unit, SE = sd(per-item) / sqrt(N);
  Miller 2024, arXiv 2411.00640); smaller differences are marked "not resolved".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.bootstrap import CurveData, fit_curve_data, window_curve
from analysis.fit import FitError, FitResult, FitWindow

DEFAULT_MARGIN = 0.02
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Comparison:
    """Outcome of the ScaleRL comparison of two groups (``first`` vs ``second``)."""

    first: str
    second: str
    decided_by: str  # "A", "B", or "none" (the B refit was impossible)
    winner: str | None
    A_first: float
    A_second: float
    margin: float
    A_shared: float | None = None
    B_first: float | None = None  # under the shared A when decided_by == "B"
    B_second: float | None = None
    message: str = ""

    @property
    def delta(self) -> float:
        """The deciding difference, first minus second (A or B)."""
        if self.decided_by == "B":
            return float(self.B_first - self.B_second)
        return float(self.A_first - self.A_second)

    def describe(self) -> str:
        if self.decided_by == "A":
            return (f"{self.winner} wins on A: |dA| = {abs(self.A_first - self.A_second):.3f} "
                    f">= margin {self.margin:.3f}")
        if self.decided_by == "B":
            return (f"A within margin ({abs(self.A_first - self.A_second):.3f} < "
                    f"{self.margin:.3f}); refit at shared A = {self.A_shared:.3f}: "
                    f"B {self.B_first:.2f} vs {self.B_second:.2f}, {self.winner} wins on B")
        return self.message


def compare_fits(first: str, fit_first: FitResult, curve_first: CurveData | None,
                 second: str, fit_second: FitResult, curve_second: CurveData | None,
                 margin: float = DEFAULT_MARGIN) -> Comparison:
    """Apply ScaleRL's rule to two fitted groups (curves are the *windowed* group points, needed
    only for the shared-A refit)."""
    a1, a2 = fit_first.A, fit_second.A
    base = dict(first=first, second=second, A_first=a1, A_second=a2, margin=margin)
    if abs(a1 - a2) >= margin:
        return Comparison(decided_by="A", winner=first if a1 > a2 else second, **base)
    shared = 0.5 * (a1 + a2)
    if curve_first is None or curve_second is None:
        return Comparison(decided_by="none", winner=None, A_shared=shared, **base,
                          message="A within margin but the points for a shared-A refit are missing")
    try:
        r1 = fit_curve_data(curve_first, fixed_A=shared)
        r2 = fit_curve_data(curve_second, fixed_A=shared)
    except FitError as exc:
        return Comparison(decided_by="none", winner=None, A_shared=shared, **base,
                          message=f"A within margin; shared-A refit failed: {exc}")
    winner = first if r1.B >= r2.B else second
    return Comparison(decided_by="B", winner=winner, A_shared=shared, B_first=r1.B,
                      B_second=r2.B, **base)


def check_extrapolation(curve: CurveData, fit_fraction: float = 0.5,
                        window: FitWindow | None = None) -> dict:
    """Fit on compute <= fit_fraction * C_max (inside ``window``), predict the later points.

    The error is measured against the seed-mean pass rate at each later eval step, so eval noise
    shrinks with the number of seeds. Returns a record: n_fit, n_heldout, rmse, max_abs_error,
    A_partial (fit on the first part) and, when a full fit succeeds, A_full and dA."""
    window = window or FitWindow()
    rec = {"group": curve.label, "fit_fraction": fit_fraction, "n_fit": 0, "n_heldout": 0,
           "rmse": np.nan, "max_abs_error": np.nan, "A_partial": np.nan, "A_full": np.nan,
           "dA": np.nan, "message": ""}
    part_window = FitWindow(window.start_fraction, window.start_step, fit_fraction)
    part = window_curve(curve, part_window)
    full = window_curve(curve, window)
    c_max = max((float(r.compute.max()) for r in curve.runs if r.compute.size), default=0.0)
    if c_max <= 0:
        rec["message"] = "no eval points after step 0"
        return rec
    mean = full.mean_curve()
    later = mean[mean["compute"] > fit_fraction * c_max]
    rec["n_heldout"] = int(len(later))
    try:
        fit = fit_curve_data(part)
    except FitError as exc:
        rec["message"] = f"fit on the first {fit_fraction:.0%} of compute refused: {exc}"
        return rec
    rec.update(n_fit=fit.n_points, A_partial=fit.A)
    if later.empty:
        rec["message"] = "no eval points after the fit cut-off"
        return rec
    err = fit.predict(later["compute"].to_numpy()) - later["pass_rate"].to_numpy()
    rec.update(rmse=float(np.sqrt(np.mean(err ** 2))), max_abs_error=float(np.abs(err).max()))
    try:
        rec["A_full"] = fit_curve_data(full).A
        rec["dA"] = rec["A_partial"] - rec["A_full"]
    except FitError as exc:
        rec["message"] = f"full fit refused: {exc}"
    return rec


def resolvable_difference(se1, se2, z: float = Z95):
    """Smallest difference between two independent pass rates resolvable at level z:
    z * sqrt(se1^2 + se2^2)."""
    return z * np.sqrt(np.square(se1) + np.square(se2))


def mark_resolution(table: pd.DataFrame, value: str, se: str, label: str,
                    z: float = Z95) -> pd.DataFrame:
    """Every pair of rows of ``table``: difference of ``value``, the resolvable difference from
    ``se`` and whether the difference is resolved (|diff| >= resolvable)."""
    rows = []
    records = table[[label, value, se]].to_dict("records")
    for i, a in enumerate(records):
        for b in records[i + 1:]:
            diff = a[value] - b[value]
            mrd = float(resolvable_difference(a[se], b[se], z))
            rows.append({"first": a[label], "second": b[label], "diff": diff,
                         "resolvable": mrd,
                         "resolved": bool(np.isfinite(mrd) and abs(diff) >= mrd),
                         "verdict": "resolved" if abs(diff) >= mrd else "not resolved"})
    return pd.DataFrame(rows, columns=["first", "second", "diff", "resolvable", "resolved",
                                       "verdict"])


def seed_pairing(fits, runs: pd.DataFrame, eval_set: str, reference: str,
                 seed_col: str | None) -> pd.DataFrame:
    """What pairing by seed buys each comparison with ``reference``: ``seed_rho_A``, the correlation
    across seeds of the per-run fitted A of the variant and of the reference (runs of one scale
    matched by ``seed_col``; ``seed_pairs`` of them; NaN below 3 pairs or without spread).

    The paired bootstrap (:func:`analysis.effects.effect_intervals`) resamples the same seeds and
    eval items for both groups. The items' share (a hard item is hard for both, one R0) cancels by
    construction; whether a seed's prompt stream carries over to the other variant's ceiling is an
    empirical question, answered here: var(dA) = var(A_v) + var(A_ref) - 2 rho sd sd, so rho near 0
    means pairing by seed gains nothing (the interval is that of independent seeds), and the
    calibration's simulated sweeps (independent seed effects per group) assume exactly that."""
    cols = ["scale", "variant", "seed_pairs", "seed_rho_A"]
    if not seed_col or seed_col not in runs or "run_id" not in runs:
        return pd.DataFrame(columns=cols)
    seed_of = runs.set_index("run_id")[seed_col].to_dict()
    per_run: dict[tuple[str, str], dict] = {}
    for g in fits:
        if (g.level == "run" and g.eval_set == eval_set and g.fit is not None and g.run_ids
                and np.isfinite(g.fit.A) and g.run_ids[0] in seed_of):
            per_run.setdefault((g.variant, g.scale), {})[seed_of[g.run_ids[0]]] = g.fit.A
    rows = []
    for (variant, scale), a_var in sorted(per_run.items()):
        a_ref = per_run.get((reference, scale))
        if variant == reference or a_ref is None:
            continue
        common = sorted(set(a_var) & set(a_ref), key=str)
        x = np.array([a_var[s] for s in common])
        y = np.array([a_ref[s] for s in common])
        ok = len(common) >= 3 and x.std() > 0 and y.std() > 0
        rows.append({"scale": scale, "variant": variant, "seed_pairs": len(common),
                     "seed_rho_A": float(np.corrcoef(x, y)[0, 1]) if ok else np.nan})
    return pd.DataFrame(rows, columns=cols)


def attach_seed_pairing(effects: pd.DataFrame, pairing: pd.DataFrame) -> pd.DataFrame:
    """``effects`` (:func:`analysis.effects.choice_effects`) with ``seed_pairs`` and ``seed_rho_A``."""
    if effects.empty:
        return effects
    return effects.merge(pairing, on=["scale", "variant"], how="left")


def seed_pairing_summary(effects: pd.DataFrame) -> str:
    """"; here <mean> on average over <n> comparison(s), from <min> to <max>" of ``seed_rho_A``
    (the report's sentence on pairing), or "" where no comparison has one."""
    rho = effects["seed_rho_A"].dropna() if "seed_rho_A" in effects else pd.Series(dtype=float)
    return (f"; here {rho.mean():+.2f} on average over {len(rho)} comparison(s), from "
            f"{rho.min():+.2f} to {rho.max():+.2f}" if len(rho) else "")
