"""Per-run and per-group ScaleRL fits with bootstrap confidence intervals.

A group is any set of runs that differ only in seed (e.g. one algorithm at one model scale).
Its curve is the pooled set of all its runs' eval points; pooled least squares equals a fit to
the seed-mean curve when the seeds share eval steps, and it still works when their compute
differs slightly (token counts differ by seed). R0 is the mean of the runs' step-0 evals.

Bootstrap methods (all replicates of one group are solved together by
:func:`analysis.fit.fit_curves_batch`, so 1,000 replicates cost about as much as a few dozen
single fits):

* ``seeds``: resample runs with replacement; a replicate is the pooled fit with each run's
  points weighted by how often it was drawn (the seed-level bootstrap ScaleRL's +-0.02 margin
  on A comes from, arXiv 2510.13786 Sec. 4). Needs >= 2 runs.
* ``items``: resample eval items with replacement (same draw at every step, so the correlation
  of an item across steps is kept), using ``eval_items.jsonl`` (Miller 2024, arXiv 2411.00640:
  items are the sampling unit).
* ``seeds+items``: hierarchical, seeds first then items within each drawn run.
* ``residuals``: for one run without per-item results, resample residuals of the point fit
  (scaled by sqrt(n / (n - 3))) and jitter R0 by its reported standard error.

CIs are percentile intervals (2.5%, 97.5%) over replicates, widened for few resampled units in a
space that keeps them inside the parameter's domain (A in (R0, 1): logit of the gain fraction;
B and C_mid: log), see :meth:`BootstrapResult.ci`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from analysis.fit import (FitError, FitResult, FitWindow, check_fittable, finish_fit,
                          fit_curves_batch, matmul_rows)

METHODS = ("auto", "seeds", "items", "seeds+items", "residuals")


@dataclass
class RunCurve:
    """One run's eval points for one eval set (step 0 excluded; it is ``r0``)."""

    run_id: str
    steps: np.ndarray
    compute: np.ndarray
    y: np.ndarray
    stderr: np.ndarray
    r0: float
    r0_stderr: float
    items: np.ndarray | None = None  # (n, N) per-item fraction correct at each step
    r0_items: np.ndarray | None = None  # (N,)
    notes: list[str] = field(default_factory=list)  # e.g. eval points dropped for NaN


@dataclass
class CurveData:
    """The pooled points of a group (or of one run) inside a fit window."""

    label: str
    runs: list[RunCurve]
    window: FitWindow = field(default_factory=FitWindow)

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def R0(self) -> float:
        return float(np.mean([r.r0 for r in self.runs]))

    def pooled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(compute, y, stderr, run index) of all runs concatenated."""
        c = np.concatenate([r.compute for r in self.runs])
        y = np.concatenate([r.y for r in self.runs])
        se = np.concatenate([r.stderr for r in self.runs])
        idx = np.concatenate([np.full(r.compute.size, i) for i, r in enumerate(self.runs)])
        return c, y, se, idx

    def has_items(self) -> bool:
        return all(r.items is not None and r.r0_items is not None for r in self.runs)

    def mean_curve(self) -> pd.DataFrame:
        """Seed-mean curve by step: step, compute, pass_rate, sd over seeds, n_runs."""
        frames = [pd.DataFrame({"step": r.steps, "compute": r.compute, "y": r.y}) for r in self.runs]
        df = pd.concat(frames).groupby("step").agg(compute=("compute", "mean"),
                                                  pass_rate=("y", "mean"), sd=("y", "std"),
                                                  n_runs=("y", "size"))
        return df.reset_index()


@dataclass
class BootstrapResult:
    """Replicate estimates of one group's curve and their percentile CIs."""

    method: str
    A: np.ndarray
    B: np.ndarray
    C_mid: np.ndarray
    n_requested: int
    n_at_bound: int
    n_units: int = 0  # resampled units (runs for seeds, points for residuals, items for items)
    n_params: int = 3
    R0: float = float("nan")  # the point fit's R0: A's interval lives in (R0, 1)

    def inflation(self, level: float = 0.95) -> float:
        """Small-sample widening of the percentile interval around the replicate median.

        Resampling n units underestimates the variance by (n - 1) / n, and with few units the
        normal quantile is too small: the interval is widened by sqrt(n / (n - 1)) * t / z with
        t the Student quantile on n - 1 degrees of freedom (seeds, items) or n - 3 (residuals).
        For 3 seeds that is x2.7, for 8 seeds x1.3, for 200 items ~x1.0."""
        n = self.n_units
        dof = n - (self.n_params if self.method == "residuals" else 1)
        if n < 2 or dof < 1:
            return 1.0
        q = 1 - (1 - level) / 2
        factor = stats.t.ppf(q, dof) / stats.norm.ppf(q)
        return float(factor * (np.sqrt(n / (n - 1)) if self.method != "residuals" else 1.0))

    def ci(self, name: str, level: float = 0.95) -> tuple[float, float]:
        """Percentile CI of parameter ``name`` widened by :meth:`inflation` around the replicate
        median, in a space where the widening cannot leave the parameter's domain: B and C_mid
        (positive, skewed) in log space, A in logit((A - R0) / (1 - R0)) so that the interval
        stays inside (R0, 1) (R0 = the point fit's, :attr:`R0`; without it A is only capped at
        1). :attr:`ci_method` says which."""
        values = getattr(self, name)
        values = values[np.isfinite(values) & ((values > 0) if name != "A" else True)]
        if values.size == 0:
            return (float("nan"), float("nan"))
        logit = name == "A" and np.isfinite(self.R0) and self.R0 < 1
        if name in ("B", "C_mid"):
            values = np.log(values)
        elif logit:
            u = np.clip((values - self.R0) / (1 - self.R0), 1e-6, 1 - 1e-6)
            values = np.log(u / (1 - u))
        q = (1 - level) / 2
        lo, mid, hi = np.quantile(values, [q, 0.5, 1 - q])
        f = self.inflation(level)
        lo, hi = mid + f * (lo - mid), mid + f * (hi - mid)
        if name in ("B", "C_mid"):
            lo, hi = np.exp(lo), np.exp(hi)
        elif logit:
            lo, hi = (self.R0 + (1 - self.R0) / (1 + np.exp(-v)) for v in (lo, hi))
        elif name == "A":
            hi = min(hi, 1.0)
        return float(lo), float(hi)

    @property
    def ci_method(self) -> str:
        """How :meth:`ci` builds its intervals, for the tables."""
        f = self.inflation()
        return (f"{self.method} bootstrap ({self.n_units} units), 95% percentile x{f:.2g} "
                "widening; A in logit((A-R0)/(1-R0)), B and C_mid in log")


def build_run_curve(run_evals: pd.DataFrame, items: dict | None = None,
                    eval_set: str | None = None) -> RunCurve:
    """Make a :class:`RunCurve` from one run's tidy eval rows of one eval set.

    ``items`` is the run's :func:`analysis.load.load_eval_items` dict; per-item arrays are kept
    only if every step (and step 0) has them with one common item count."""
    df = run_evals.sort_values("step")
    run_id = str(df["run_id"].iloc[0])
    start = df[df["step"] == 0]
    if start.empty or not np.isfinite(start["pass_rate"].iloc[0]):
        raise FitError(f"run {run_id}: no step-0 eval, so R0 (the warm start) is unknown")
    rest = df[df["step"] > 0]
    bad = ~np.isfinite(rest["pass_rate"].to_numpy(float)) | ~np.isfinite(
        rest["compute"].to_numpy(float))
    notes = []
    if bad.any():
        notes.append(f"run {run_id}: dropped {int(bad.sum())} eval point(s) with a missing/NaN "
                     f"pass rate or compute (steps {rest['step'][bad].tolist()})")
        rest = rest[~bad]
    curve = RunCurve(run_id=run_id, steps=rest["step"].to_numpy(int),
                     compute=rest["compute"].to_numpy(float), y=rest["pass_rate"].to_numpy(float),
                     stderr=rest["stderr"].to_numpy(float),
                     r0=float(start["pass_rate"].iloc[0]),
                     r0_stderr=float(start["stderr"].iloc[0]), notes=notes)
    if items and eval_set is not None:
        keys = [(int(s), eval_set) for s in [0, *curve.steps]]
        arrays = [items.get(k) for k in keys]
        if all(a is not None for a in arrays) and len({a.size for a in arrays}) == 1:
            curve.r0_items, curve.items = arrays[0], np.vstack(arrays[1:]) if arrays[1:] else None
    return curve


def window_curve(curve: CurveData, window: FitWindow) -> CurveData:
    """Apply a fit window to every run of a group; compute fractions refer to the group's
    largest compute so that all seeds share one cut."""
    c_max = max((float(r.compute.max()) for r in curve.runs if r.compute.size), default=0.0)
    runs = []
    for r in curve.runs:
        keep = window.select(np.append(r.compute, c_max), np.append(r.steps, 10**12))[:-1]
        runs.append(RunCurve(r.run_id, r.steps[keep], r.compute[keep], r.y[keep], r.stderr[keep],
                             r.r0, r.r0_stderr, None if r.items is None else r.items[keep],
                             r.r0_items, list(r.notes)))
    return CurveData(curve.label, runs, window)


def fit_curve_data(curve: CurveData, fixed_A: float | None = None) -> FitResult:
    """Fit the pooled points of a (windowed) group; raises FitError with the group's label."""
    c, y, se, _ = curve.pooled()
    R0 = curve.R0
    try:
        if np.isnan(y).any() or np.isnan(c).any():
            raise FitError("input contains NaN pass rates or compute")
        check_fittable(c, y, R0, stderr=se)
        if fixed_A is not None and not R0 < fixed_A <= 1:
            raise FitError(f"fixed A={fixed_A:.4f} must lie in (R0={R0:.4f}, 1]")
    except FitError as exc:
        raise FitError(f"{curve.label}: {exc}") from None
    _, _, _, idx = curve.pooled()
    return finish_fit(c, y, R0, se, idx, curve.window.describe(), fixed_A)


def choose_method(curve: CurveData, method: str = "auto") -> str:
    """Resolve ``auto`` and check that the requested method is possible for this group."""
    if method not in METHODS:
        raise FitError(f"unknown bootstrap method {method!r}; choose one of {METHODS}")
    if method == "auto":
        return "seeds" if curve.n_runs >= 2 else ("items" if curve.has_items() else "residuals")
    if "seeds" in method and curve.n_runs < 2:
        raise FitError(f"{curve.label}: a seed bootstrap needs >= 2 runs (seeds), got "
                       f"{curve.n_runs}; use 'items' (with eval_items.jsonl) or 'residuals'")
    if "items" in method and not curve.has_items():
        raise FitError(f"{curve.label}: an item bootstrap needs eval_items.jsonl for every "
                       "eval step of every run (with the same items at each step)")
    return method


def resample_counts(rng: np.random.Generator, n_units: int, n_boot: int) -> np.ndarray:
    """(n_boot, n_units) multiplicities of units drawn n_units times with replacement."""
    draws = rng.integers(0, n_units, (n_boot, n_units)) + n_units * np.arange(n_boot)[:, None]
    return np.bincount(draws.ravel(), minlength=n_boot * n_units).reshape(n_boot, n_units)


@lru_cache(maxsize=8)
def item_weights(seed: int, n_items: int, n_boot: int) -> np.ndarray:
    """Item-resampling weights (counts / N), shared by every run evaluated on N items.

    Runs scored on the same eval set see the same items, so drawing the same items for all of
    them makes the item bootstrap *paired* across runs (Miller 2024, arXiv 2411.00640), and the
    draw is made once per (seed, N) instead of once per run."""
    rng = np.random.default_rng([seed, n_items, n_boot, 7])
    weights = resample_counts(rng, n_items, n_boot) / n_items
    weights.setflags(write=False)
    return weights


def draw_replicates(curve: CurveData, method: str, n_boot: int, rng: np.random.Generator,
                    point: FitResult | None = None, item_seed: int = 0):
    """Targets Y (R, n), weights W (R, n) or None, and R0 (R,) of ``n_boot`` replicates.

    Item draws come from :func:`item_weights`: every run scored on N items gets the same draw
    (the harness evaluates all runs on one fixed item set), so item noise is paired across runs
    and groups, as it is in the data."""
    c, y, se, idx = curve.pooled()
    S = curve.n_runs
    r0 = np.array([r.r0 for r in curve.runs])
    if method == "residuals":
        if point is None:
            raise FitError("the residual bootstrap needs the point fit")
        fitted = point.predict(c)
        resid = (y - fitted) * np.sqrt(c.size / max(c.size - 3, 1))
        Y = fitted + resid[rng.integers(0, c.size, (n_boot, c.size))]
        r0_se = np.nan_to_num(np.mean([r.r0_stderr for r in curve.runs]))
        return Y, None, r0.mean() + rng.normal(0, r0_se / np.sqrt(S), n_boot)
    W = None
    if "seeds" in method:
        counts = resample_counts(rng, S, n_boot).astype(float)  # (R, S)
        W = counts[:, idx]
        R0 = counts @ r0 / S
    else:
        counts = np.ones((n_boot, S))
        R0 = np.full(n_boot, r0.mean())
    if "items" not in method:
        return np.broadcast_to(y, (n_boot, y.size)), W, R0
    Ys, R0s = [], np.zeros((n_boot, S))
    for s, run in enumerate(curve.runs):
        q = item_weights(item_seed, run.r0_items.size, n_boot)  # (R, N), same items for all
        Ys.append(matmul_rows(q, run.items.T) if run.items is not None else np.zeros((n_boot, 0)))
        R0s[:, s] = matmul_rows(q, run.r0_items[:, None])[:, 0]
    return np.hstack(Ys), W, (counts * R0s).sum(axis=1) / counts.sum(axis=1)


def bootstrap_fit(curve: CurveData, n_boot: int = 1000, *, method: str = "auto", seed: int = 0,
                  fixed_A: float | None = None, point: FitResult | None = None) -> BootstrapResult:
    """Bootstrap the fit of a (windowed) group; all replicates are fitted in one batch."""
    method = choose_method(curve, method)
    if n_boot < 2:
        raise FitError(f"need at least 2 bootstrap replicates, got {n_boot}")
    if method == "residuals" and point is None:
        point = fit_curve_data(curve, fixed_A)
    rng = np.random.default_rng(seed)
    Y, W, R0 = draw_replicates(curve, method, n_boot, rng, point, item_seed=seed)
    c = curve.pooled()[0]
    init = None if point is None else (point.A, point.B, point.C_mid)
    inverse = None
    if W is not None and method == "seeds":
        # a seed bootstrap of S runs has at most C(2S-1, S) distinct replicates (3 for 2 seeds,
        # 10 for 3): fit each distinct one once (the same fit, so the same answer)
        W, first, inverse = np.unique(W, axis=0, return_index=True, return_inverse=True)
        Y, R0 = Y[first], R0[first]
        inverse = inverse.reshape(-1)
    res = fit_curves_batch(np.log(c), Y, R0, W, fixed_A=fixed_A, init=init,
                           **({"n_b": 6, "n_m": 8} if point is not None else {}))
    if inverse is not None:
        res.A, res.B, res.C_mid, res.at_bound = (res.A[inverse], res.B[inverse],
                                                 res.C_mid[inverse], res.at_bound[inverse])
    bad = ~np.isfinite(res.A)
    for arr in (res.A, res.B, res.C_mid):
        arr[bad] = np.nan
    units = {"seeds": curve.n_runs, "seeds+items": curve.n_runs, "residuals": Y.shape[1],
             "items": min((r.r0_items.size for r in curve.runs if r.r0_items is not None),
                          default=0)}[method]
    return BootstrapResult(method=method, A=res.A, B=res.B, C_mid=res.C_mid,
                           n_requested=n_boot, n_at_bound=int(res.at_bound.sum()),
                           n_units=units, n_params=2 if fixed_A is not None else 3,
                           R0=point.R0 if point is not None else curve.R0)


def summarise_fit(label: str, fit: FitResult | None, boot: BootstrapResult | None,
                  error: str | None = None) -> dict:
    """One flat record of a fit and its CIs for ``fits.csv``."""
    rec = {"group": label, "A": np.nan, "B": np.nan, "C_mid": np.nan, "R0": np.nan,
           "rmse": np.nan, "n_points": 0, "window": "", "converged": False, "identified": False,
           "A_prof_lo": np.nan, "A_prof_hi": np.nan, "noise": np.nan, "lof_ratio": np.nan,
           "message": error or ""}
    if fit is not None:
        rec.update(A=fit.A, B=fit.B, C_mid=fit.C_mid, R0=fit.R0, rmse=fit.rmse,
                   n_points=fit.n_points, window=fit.window, converged=fit.converged,
                   identified=fit.identified, A_prof_lo=fit.A_profile[0],
                   A_prof_hi=fit.A_profile[1], noise=fit.noise, lof_ratio=fit.lof_ratio,
                   message=fit.message)
    for name in ("A", "B", "C_mid"):
        lo, hi = boot.ci(name) if boot is not None else (np.nan, np.nan)
        rec[f"{name}_lo"], rec[f"{name}_hi"] = lo, hi
    rec["boot_method"] = boot.method if boot is not None else ""
    rec["ci_method"] = boot.ci_method if boot is not None else ""
    rec["boot_n"] = boot.n_requested if boot is not None else 0
    rec["boot_at_bound"] = boot.n_at_bound if boot is not None else 0
    return rec
