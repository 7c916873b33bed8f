"""ScaleRL sigmoid compute-performance curve: model, validation and a batched fitter.

The curve (ScaleRL, Khatri et al., arXiv 2510.13786, Eq. 1)::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

R0 is *not* fitted: it is the warm-start pass rate (the step-0 eval). A in (R0, 1] is the
asymptote, B > 0 the scaling exponent (efficiency), C_mid > 0 the compute at which half of the
gain A - R0 is reached. In log-compute x = ln C and with d = A - R0, m = ln C_mid::

    R(x) = R0 + d * sigmoid(B * (x - m))

which is linear in d. The fitter uses that (variable projection):

1. a grid over (B, m); for each grid point the best d is closed form,
   d = <w(y - R0), s> / <w, s^2> clipped to (0, 1 - R0], and the squared error follows
   without a loop. With the compute grid shared by all replicates of one run or group the whole
   grid stage is two matrix products: (R x n) @ (n x G). ScaleRL (App. A.5) grid-searches
   (A, C_mid) and fits B with ``curve_fit`` per pair; this is the same idea, batched.
2. a projected Levenberg-Marquardt refinement of (d, B, m) from the best grid point, run on all
   curves at once (3x3 normal equations per curve, solved in one batched call).

``fit_curve`` fits one curve and raises :class:`FitError` (with a readable message) on inputs
that cannot support a fit; ``fit_curves_batch`` fits many curves (e.g. bootstrap replicates)
sharing one compute grid, each with its own weights, targets and R0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

# the batched solver (re-exported: callers import the curve API from here)
#: DEFAULT_MID_SPAN: C_mid may lie this many natural-log units below the first / above the last
#: fitted compute.
from analysis.solver import (DEFAULT_B_BOUNDS, DEFAULT_MID_SPAN, BatchFit, fit_curves_batch,  # noqa: F401
                             matmul_rows, predict_reward)

MIN_POINTS = 4
#: identification rules (see :func:`assess_identification`)
REACH_FRACTION = 0.5  # the last eval must reach this fraction of the fitted gain (C >= C_mid)
SATURATED_FRACTION = 0.9  # ... and the first eval must not already be past this fraction,
MIN_RISE = 0.25  # ... and the evals must see at least this fraction of the rise
#: level of A's profile-likelihood interval that must lie inside (R0, 1). 99%, not 95%: with
#: evals stopping at C_mid/3 (B = 1) a 95% rule called 12% of fits identified, 6% with the truth
#: outside the interval; at 99%: 6% and 4% (2 x C_mid: 96% identified; LOG.md, issue 15)
PROFILE_LEVEL = 0.99
LOF_P = 1e-3  # lack of fit: chi-square p-value against the eval noise below this ...
LOF_RATIO = 2.0  # ... and residuals (of step means) larger than this many noise sds


class FitError(ValueError):
    """Raised when a curve cannot (or must not) be fitted; the message says why."""


@dataclass(frozen=True)
class FitWindow:
    """Which eval points enter a fit (R0 always comes from the step-0 eval, not the window).

    start_fraction: keep points with C >= start_fraction * C_max (ScaleRL starts after ~1.5k of
        their GPU-hours, about one epoch). start_step: keep points with step >= start_step.
    end_fraction: keep points with C <= end_fraction * C_max (used for extrapolation checks).
    C_max is the largest compute among the given points.
    """

    start_fraction: float | None = None
    start_step: int | None = None
    end_fraction: float | None = None

    def describe(self) -> str:
        parts = []
        if self.start_fraction:
            parts.append(f"C >= {self.start_fraction:g}*C_max")
        if self.start_step:
            parts.append(f"step >= {self.start_step}")
        if self.end_fraction is not None and self.end_fraction < 1:
            parts.append(f"C <= {self.end_fraction:g}*C_max")
        return ", ".join(parts) if parts else "all points with C > 0"

    def select(self, compute: np.ndarray, steps: np.ndarray | None = None) -> np.ndarray:
        """Return a boolean mask of the points inside the window (C > 0 always required)."""
        compute = np.asarray(compute, dtype=float)
        keep = compute > 0
        c_max = np.nanmax(compute) if compute.size else 0.0
        if self.start_fraction:
            keep &= compute >= self.start_fraction * c_max
        if self.start_step:
            if steps is None:
                raise FitError("fit window by step needs the step of every point")
            keep &= np.asarray(steps) >= self.start_step
        if self.end_fraction is not None:
            keep &= compute <= self.end_fraction * c_max * (1 + 1e-12)
        return keep


@dataclass(frozen=True)
class FitResult:
    """One fitted ScaleRL curve. ``rmse`` is the root-mean-square residual over the fitted points;
    ``converged`` is False when the optimiser hit an iteration cap or a parameter bound.

    ``identified`` is the stronger statement the leaderboard and comparisons need: converged
    *and* every check of :func:`assess_identification` passed (the evals reach the fitted
    midpoint, the curve did not saturate before the first eval, A's profile-likelihood interval
    lies inside (R0, 1), no lack of fit against the eval noise). ``reasons`` names each failed
    check; ``message`` joins them (and the bound that was hit). ``A_profile`` is the 95%
    profile-likelihood interval of A (PROFILE_LEVEL, 99%), ``noise`` the per-point noise sd it used, ``lof_ratio``
    the rms of the step-mean residuals in units of their noise sd."""

    A: float
    B: float
    C_mid: float
    R0: float
    rmse: float
    n_points: int
    window: str
    converged: bool
    message: str = ""
    fixed_A: bool = False
    compute_range: tuple[float, float] = field(default=(float("nan"), float("nan")))
    identified: bool = False
    reasons: tuple[str, ...] = ()
    A_profile: tuple[float, float] = field(default=(float("nan"), float("nan")))
    noise: float = float("nan")
    lof_ratio: float = float("nan")

    def predict(self, compute) -> np.ndarray:
        """Evaluate the fitted curve at ``compute`` (same units as the fit)."""
        return predict_reward(compute, self.A, self.B, self.C_mid, self.R0)


def estimate_noise(y: np.ndarray) -> float:
    """Point-to-point noise of a curve from first differences: sd(diff(y)) / sqrt(2).

    A smooth trend contributes little to successive differences, so this estimates the eval
    noise without a model (robust median-absolute-deviation form)."""
    dy = np.diff(np.asarray(y, float))
    if dy.size < 2:
        return 0.0
    return float(1.4826 * np.median(np.abs(dy - np.median(dy))) / np.sqrt(2))


def check_fittable(compute, reward, R0, *, stderr=None, min_points=MIN_POINTS) -> None:
    """Raise :class:`FitError` with a readable reason if the points cannot support a fit.

    Refuses: NaN/inf values, R0 missing or outside [0, 1], non-positive compute, fewer than
    ``min_points`` points, and flat curves: the mean of the last third of the points must exceed
    R0 by more than 2 noise units, noise = max(difference-based noise, median reported stderr,
    1e-3) * sqrt(1 + 1/n_late).
    """
    c = np.asarray(compute, dtype=float)
    y = np.asarray(reward, dtype=float)
    if c.shape != y.shape or c.ndim != 1:
        raise FitError(f"compute and reward must be 1-D of equal length, got {c.shape} and {y.shape}")
    if R0 is None or not np.isfinite(R0):
        raise FitError("R0 is missing or NaN: no step-0 (warm-start) eval to fix the curve's start")
    if not 0.0 <= R0 <= 1.0:
        raise FitError(f"R0={R0} is not a pass rate in [0, 1]")
    bad = ~np.isfinite(c) | ~np.isfinite(y)
    if bad.any():
        raise FitError(f"input contains NaN/inf at {int(bad.sum())} of {c.size} points "
                       f"(first at index {int(np.flatnonzero(bad)[0])})")
    if (c <= 0).any():
        raise FitError("compute must be > 0 for fitted points (step 0 is R0, not a fit point)")
    if c.size < min_points:
        raise FitError(f"too few points to fit A, B, C_mid: {c.size} < {min_points} "
                       "(after the fit window)")
    if np.unique(c).size < 3:
        raise FitError("fewer than 3 distinct compute values: the curve shape is not identified")
    order = np.argsort(c)
    y = y[order]
    n_late = max(2, y.size // 3)
    gain = y[-n_late:].mean() - R0
    noise = max(estimate_noise(y), 1e-3)
    if stderr is not None and np.isfinite(stderr).any():
        noise = max(noise, float(np.nanmedian(stderr)))
    thresh = 2.0 * noise * np.sqrt(1 + 1 / n_late)
    if gain <= thresh:
        raise FitError(f"flat curve: late mean - R0 = {gain:+.4f} is not above the noise "
                       f"threshold {thresh:.4f}; there is no gain to fit")


def fit_curve(compute, reward, R0, *, steps=None, window: FitWindow | None = None,
              fixed_A: float | None = None, stderr=None) -> FitResult:
    """Fit the ScaleRL curve to one run (or one pooled group) and return a :class:`FitResult`.

    compute/reward: eval points (step-0 point may be included; it is dropped as C = 0).
    R0: the warm-start pass rate. window: optional :class:`FitWindow`. fixed_A: hold A fixed.
    stderr: per-point eval standard errors (the noise the identification checks use).
    Raises :class:`FitError` for NaN input, too few points, a flat curve, or a bad fixed_A.
    """
    window = window or FitWindow()
    c = np.asarray(compute, dtype=float)
    y = np.asarray(reward, dtype=float)
    if c.shape != y.shape:
        raise FitError(f"compute and reward differ in length: {c.shape} vs {y.shape}")
    if np.isnan(c).any() or np.isnan(y).any():
        raise FitError(f"input contains NaN ({int(np.isnan(c).sum() + np.isnan(y).sum())} values)")
    keep = window.select(c, steps)
    se = None if stderr is None else np.asarray(stderr, float)[keep]
    c, y = c[keep], y[keep]
    check_fittable(c, y, R0, stderr=se)
    if fixed_A is not None and not (R0 < fixed_A <= 1.0):
        raise FitError(f"fixed A={fixed_A} must lie in (R0={R0:.4f}, 1]")
    return finish_fit(c, y, R0, se, None, window.describe(), fixed_A)


def finish_fit(c, y, R0, se, run_index, window: str, fixed_A: float | None) -> FitResult:
    """Fit checked points (pooled over a group's runs: ``run_index`` says which run each point
    is from) and assess identification; the common end of :func:`fit_curve` and
    :func:`analysis.bootstrap.fit_curve_data`."""
    res = fit_curves_batch(np.log(c), y[None, :], R0, fixed_A=fixed_A)
    rmse = float(np.sqrt(res.sse[0] / c.size))
    reasons = []
    if res.at_bound[0]:
        reasons.append(_describe_bound(res, 0))
    elif not res.converged[0]:
        reasons.append("optimiser stopped at the iteration cap")
    ident = assess_identification(c, y, R0, float(res.A[0]), float(res.B[0]),
                                  float(res.C_mid[0]), stderr=se, run_index=run_index,
                                  fixed_A=fixed_A, profile=not reasons)
    if res.at_bound[0]:  # the bound says why; a lack of fit or a saturation adds to it
        reasons += [r for r in ident["reasons"] if r.startswith(("lack of fit", "saturated"))
                    and not (r.startswith("saturated") and "lower bound" in reasons[0])]
    else:
        reasons += ident["reasons"]
    return FitResult(A=float(res.A[0]), B=float(res.B[0]), C_mid=float(res.C_mid[0]),
                     R0=float(R0), rmse=rmse, n_points=int(c.size), window=window,
                     converged=bool(res.converged[0]), message="; ".join(reasons),
                     fixed_A=fixed_A is not None,
                     compute_range=(float(c.min()), float(c.max())),
                     identified=not reasons, reasons=tuple(reasons),
                     A_profile=ident["A_profile"], noise=ident["noise"],
                     lof_ratio=ident["lof_ratio"])


def _positions(c: np.ndarray, run_index: np.ndarray) -> np.ndarray:
    """The rank of each point's compute within its run: runs of one group share the eval
    schedule, so the j-th eval of every seed is one "step" (their compute differs slightly)."""
    pos = np.empty(c.size, dtype=int)
    for r in np.unique(run_index):
        at = np.flatnonzero(run_index == r)
        pos[at[np.argsort(c[at], kind="stable")]] = np.arange(at.size)
    return pos


def assess_identification(c, y, R0, A, B, C_mid, *, stderr=None, run_index=None,
                          fixed_A=None, profile: bool = True) -> dict:
    """Does the data identify this fit? Returns reasons (empty = identified), the profile
    interval of A, the noise sd used and the lack-of-fit ratio.

    Checks, each a named reason when it fails:

    * reach: the fitted curve at the last eval has gained >= REACH_FRACTION of A - R0 (the
      evals pass C_mid); otherwise A is an extrapolation of the rising part.
    * saturation: at the first eval it has gained <= SATURATED_FRACTION, and the evals see at
      least MIN_RISE of the rise; otherwise the rise happened before the data and B, C_mid are
      not identified (A is only the plateau).
    * lack of fit: the step-mean residuals against the noise (per-point sd = max(median
      reported eval stderr, pure error across seeds at the same eval)); chi-square p < LOF_P
      and rms ratio > LOF_RATIO means the curve is not this shape (it rose and collapsed).
    * profile interval of A: the set of A whose best (B, C_mid) fit raises the squared error by
      at most chi2_1(PROFILE_LEVEL) * noise^2 (a likelihood-ratio interval with the noise known)
      must lie inside (R0, 1): if it reaches 1 the data cannot bound the ceiling from above.
      Computed only when ``profile`` and the other checks pass (it costs ~60 fixed-A fits).
    """
    c = np.asarray(c, float)
    y = np.asarray(y, float)
    run_index = np.zeros(c.size, int) if run_index is None else np.asarray(run_index)
    out = {"reasons": [], "A_profile": (float("nan"), float("nan")), "noise": float("nan"),
           "lof_ratio": float("nan")}
    gain = A - R0
    if gain <= 0:
        out["reasons"].append("A collapsed onto R0: no gain")
        return out
    frac = predict_reward(np.array([c.min(), c.max()]), 1.0, B, C_mid, 0.0)
    if frac[1] < REACH_FRACTION:
        out["reasons"].append(
            f"the evals stop at {frac[1]:.0%} of the fitted gain (last C {c.max():.3g} < C_mid "
            f"{C_mid:.3g}): the data do not reach the curve's midpoint, so A is an extrapolation")
    if frac[0] > SATURATED_FRACTION or (frac[1] >= REACH_FRACTION
                                         and frac[1] - frac[0] < MIN_RISE):
        out["reasons"].append(
            f"saturated before the first eval ({frac[0]:.0%} of the gain already reached at C "
            f"{c.min():.3g}, {frac[1] - frac[0]:.0%} of the rise inside the data): B and C_mid "
            "are not identified, A is only the plateau level")
    resid = y - predict_reward(c, A, B, C_mid, R0)
    pos = _positions(c, run_index)
    T = int(pos.max()) + 1
    counts = np.bincount(pos, minlength=T).astype(float)
    rbar = np.bincount(pos, resid, minlength=T) / np.maximum(counts, 1)
    dof_pe = c.size - int((counts > 0).sum())
    var_pe = float(((resid - rbar[pos]) ** 2).sum() / dof_pe) if dof_pe > 0 else 0.0
    eval_sd = (float(np.nanmedian(stderr)) if stderr is not None
               and np.isfinite(np.asarray(stderr, float)).any() else float("nan"))
    if np.isfinite(eval_sd):
        var = max(eval_sd ** 2, var_pe)
    elif dof_pe > 0:
        var = var_pe
    else:
        var = max(estimate_noise(y[np.argsort(c)]), 1e-3) ** 2
    var = max(var, 1e-10)
    out["noise"] = float(np.sqrt(var))
    chi = float((counts * rbar ** 2).sum() / var)
    n_par = 2 if fixed_A is not None else 3
    dof = int((counts > 0).sum()) - n_par
    out["lof_ratio"] = float(np.sqrt(chi / max((counts > 0).sum(), 1)))
    if dof > 0:
        p = float(stats.chi2.sf(chi, dof))
        if p < LOF_P and out["lof_ratio"] > LOF_RATIO:
            out["reasons"].append(
                f"lack of fit: the residuals are {out['lof_ratio']:.1f}x the eval noise sd "
                f"{np.sqrt(var):.4f} (chi-square p = {p:.1g}): the points do not follow this "
                "curve (e.g. they rise and then fall)")
    if fixed_A is None and profile and not out["reasons"]:
        lo, hi = profile_A(c, y, R0, A, var, PROFILE_LEVEL, sse_hat=float((resid ** 2).sum()),
                           init=(A, B, C_mid))
        out["A_profile"] = (lo, hi)
        d_hi = 1.0 - R0
        if hi >= 1.0 - 1e-9:
            out["reasons"].append(
                f"A's {PROFILE_LEVEL:.0%} profile-likelihood interval [{lo:.3f}, 1] reaches 1: "
                "the data do not bound the ceiling from above")
        if lo <= R0 + 0.011 * d_hi:
            out["reasons"].append(
                f"A's {PROFILE_LEVEL:.0%} profile-likelihood interval reaches R0 = {R0:.3f}")
    return out


def profile_A(c, y, R0, A_hat, var, level: float = 0.99, sse_hat: float | None = None,
              init: tuple[float, float, float] | None = None) -> tuple[float, float]:
    """Profile-likelihood interval of A with the noise variance ``var`` known: the A values
    (on a grid over (R0, 1], dense around A_hat) whose refit of (B, C_mid) at fixed A raises
    the squared error by <= chi2_1(level) * var. Returns (lowest, highest) such A (grid
    values; 1.0 when the top of the range is inside). ``init``: the point fit's (A, B, C_mid),
    one more start for every fixed-A refit (then a coarser start grid suffices, as for the
    bootstrap replicates)."""
    d_hi = 1.0 - R0
    u_hat = (A_hat - R0) / d_hi
    u = np.unique(np.clip(np.concatenate([
        np.linspace(0.0, 1.0, 17)[1:], [0.005, 0.01], u_hat + np.linspace(-0.15, 0.15, 13),
        u_hat + np.linspace(-0.04, 0.04, 17)]), 0.005, 1.0))
    grid = R0 + u * d_hi
    res = fit_curves_batch(np.log(c), np.broadcast_to(y, (grid.size, y.size)), R0, fixed_A=grid,
                           init=init, max_iter=25, tol=1e-6,
                           **({"n_b": 6, "n_m": 8} if init is not None else {}))
    best = float(res.sse.min()) if sse_hat is None else min(float(res.sse.min()), float(sse_hat))
    excess = res.sse - best - stats.chi2.ppf(level, 1) * var  # <= 0 inside the interval
    inside = np.flatnonzero(excess <= 0)
    i_lo, i_hi = inside.min(), inside.max()

    def cross(i_in, i_out):  # linear interpolation of the threshold crossing
        e_in, e_out = excess[i_in], excess[i_out]
        return float(grid[i_in] + (grid[i_out] - grid[i_in]) * (-e_in) / (e_out - e_in))

    lo = cross(i_lo, i_lo - 1) if i_lo > 0 else float(grid[0])
    hi = cross(i_hi, i_hi + 1) if i_hi < grid.size - 1 else float(grid[-1])
    return lo, hi


def _describe_bound(res: BatchFit, i: int) -> str:
    lo_b, hi_b = DEFAULT_B_BOUNDS
    if res.B[i] <= lo_b * 1.0001 or res.B[i] >= hi_b * 0.9999:
        return f"B hit its bound ({res.B[i]:.3g}); the curve shape is not identified"
    if res.A[i] - res.R0[i] <= 2e-6:
        return "A collapsed onto R0: no gain"
    if res.A[i] >= 1.0 - 1e-6:
        return "A hit its upper bound 1: the points show no saturation, so A is not identified"
    if res.mid_low[i]:
        return (f"C_mid hit its lower bound ({res.C_mid[i]:.3g}): the curve saturated before the "
                "first eval, so B and C_mid are not identified")
    return (f"C_mid hit its upper bound ({res.C_mid[i]:.3g}); the data do not reach the curve's "
            "midpoint, so A is an extrapolation")
