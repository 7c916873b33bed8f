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

MIN_POINTS = 4
DEFAULT_B_BOUNDS = (0.05, 20.0)
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
#: C_mid may lie this many natural-log units below the first / above the last fitted compute.
DEFAULT_MID_SPAN = (np.log(100.0), np.log(10.0))


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


@dataclass
class BatchFit:
    """Arrays of length R (one entry per curve) from :func:`fit_curves_batch`."""

    A: np.ndarray
    B: np.ndarray
    C_mid: np.ndarray
    R0: np.ndarray
    sse: np.ndarray
    converged: np.ndarray
    at_bound: np.ndarray
    mid_low: np.ndarray | None = None  # C_mid at its lower bound (saturated before the data)


def predict_reward(compute, A, B, C_mid, R0) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B); R(0) = R0. Broadcasts over all arguments."""
    c = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z = B * (np.log(np.where(c > 0, c, np.nan)) - np.log(C_mid))
        frac = 0.5 * (1.0 + np.tanh(0.5 * z))  # numerically safe logistic
    frac = np.where(c > 0, frac, 0.0)
    return R0 + (A - R0) * frac


def _logistic(z: np.ndarray) -> np.ndarray:
    # clipping z keeps values >= ~1e-16 (subnormal floats make BLAS and ufuncs ~50x slower)
    return 0.5 * (1.0 + np.tanh(0.5 * np.clip(z, -36.0, 36.0)))


#: OpenBLAS runs a GEMM single-threaded when m*n*k <= 65536*4; above that it starts threads,
#: which on a small shared machine costs ~8 ms per call (a scheduler quantum) instead of ~1 ms.
_GEMM_SINGLE_THREAD_MNK = 262_144


def matmul_rows(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """a @ bt, computed in row chunks small enough that BLAS stays single-threaded."""
    m, k = a.shape
    n = bt.shape[1]
    rows = max(1, _GEMM_SINGLE_THREAD_MNK // max(1, k * n))
    if rows >= m:
        return a @ bt
    out = np.empty((m, n))
    for i in range(0, m, rows):
        np.matmul(a[i:i + rows], bt, out=out[i:i + rows])
    return out


def _grid_init(x, Yc, W, d_hi, fixed_d, b_grid, m_grid, unit_w=False):
    """Best (d, B, m) per curve over the (B, m) grid, with d closed form (or fixed)."""
    bb, mm = np.meshgrid(b_grid, m_grid, indexing="ij")
    bb, mm = bb.ravel(), mm.ravel()
    S = _logistic(bb[:, None] * (x[None, :] - mm[:, None]))  # (G, n)
    WY = W * Yc
    num = matmul_rows(WY, np.ascontiguousarray(S.T))  # (R, G)
    if unit_w:
        den = np.broadcast_to((S * S).sum(axis=1), num.shape)
    else:
        den = matmul_rows(W, np.ascontiguousarray((S * S).T))
    yy = np.einsum("rn,rn->r", WY, Yc)[:, None]
    if fixed_d is None:
        d = np.clip(num / np.maximum(den, 1e-300), 1e-6, d_hi[:, None])
    else:
        d = np.broadcast_to(fixed_d[:, None], num.shape)
    sse = yy - 2 * d * num + d * d * den
    g = np.argmin(sse, axis=1)
    rows = np.arange(len(g))
    return d[rows, g].copy(), bb[g], mm[g]


def _weighted_sse(x, Yc, W, theta):
    r, _ = _residuals(x, Yc, theta[:, 0], theta[:, 1], theta[:, 2])
    return np.einsum("rn,rn->r", W * r, r)


def _residuals(x, Yc, d, B, m):
    s = _logistic(B[:, None] * (x[None, :] - m[:, None]))
    return Yc - d[:, None] * s, s


def _solve_3x3(H, g):
    """Solve H @ x = g for a batch of symmetric 3x3 systems by Cramer's rule (H: (R,3,3))."""
    a, b, c = H[:, 0, 0], H[:, 0, 1], H[:, 0, 2]
    e, f, i = H[:, 1, 1], H[:, 1, 2], H[:, 2, 2]
    c00, c01, c02 = e * i - f * f, c * f - b * i, b * f - c * e
    c11, c12, c22 = a * i - c * c, b * c - a * f, a * e - b * b
    det = a * c00 + b * c01 + c * c02
    det = np.where(np.abs(det) > 1e-300, det, 1e-300)
    g0, g1, g2 = g[:, 0], g[:, 1], g[:, 2]
    return np.stack([c00 * g0 + c01 * g1 + c02 * g2,
                     c01 * g0 + c11 * g1 + c12 * g2,
                     c02 * g0 + c12 * g1 + c22 * g2], axis=1) / det[:, None]


def _refine_lm(x, Yc, W, theta, lo, hi, free, max_iter=60, tol=1e-10):
    """Projected Levenberg-Marquardt on theta = (d, B, m), all curves at once.

    Each iteration forms the 3x3 normal equations (J^T W J + lam*diag) delta = J^T W r per curve
    from elementwise products (no per-curve loop), takes the step, projects it onto the bounds
    and keeps it only where the weighted squared error drops (lam shrinks there, grows
    elsewhere). lo/hi: (R, 3) bounds; free: length-3 bool (d is fixed when A is fixed).
    Returns theta, sse, and a per-curve flag that the relative decrease fell below ``tol``.
    """
    R = theta.shape[0]
    lam = np.full(R, 1e-3)
    r, s = _residuals(x, Yc, theta[:, 0], theta[:, 1], theta[:, 2])
    sse = np.einsum("rn,rn->r", W * r, r)
    done = np.zeros(R, dtype=bool)
    conv = np.zeros(R, dtype=bool)
    pairs = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
    for _ in range(max_iter):
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        th, w, yc, ra, sa = theta[act], W[act], Yc[act], r[act], s[act]
        d, B, m = th[:, 0:1], th[:, 1:2], th[:, 2:3]
        dds = d * sa * (1 - sa)
        J = [sa * free[0], dds * (x[None, :] - m) * free[1], -dds * B * free[2]]
        wJ = [w * j for j in J]
        H = np.empty((act.size, 3, 3))
        for p, q in pairs:
            H[:, p, q] = H[:, q, p] = np.einsum("rn,rn->r", wJ[p], J[q])
        g = np.stack([np.einsum("rn,rn->r", wj, ra) for wj in wJ], axis=1)
        diag = np.maximum(np.einsum("rii->ri", H), 1e-12)
        for k in range(3):
            H[:, k, k] = diag[:, k] * (1 + lam[act]) if free[k] else 1.0
        step = _solve_3x3(H, g) * free
        new = np.clip(th + step, lo[act], hi[act])
        rn, sn = _residuals(x, yc, new[:, 0], new[:, 1], new[:, 2])
        sse_new = np.einsum("rn,rn->r", w * rn, rn)
        better = sse_new < sse[act]
        idx = act[better]
        gain = sse[idx] - sse_new[better]
        theta[idx], r[idx], s[idx], sse[idx] = new[better], rn[better], sn[better], sse_new[better]
        lam[idx] = np.maximum(lam[idx] / 3, 1e-9)
        lam[act[~better]] *= 4
        small = np.abs(new - th).max(axis=1) < 1e-9
        stop_b = gain <= tol * np.maximum(sse[idx], 1e-12)
        stop_w = ~better & (small | (lam[act] > 1e8))
        done[idx[stop_b]] = conv[idx[stop_b]] = True
        done[act[stop_w]] = conv[act[stop_w]] = True
    return theta, sse, conv


def fit_curves_batch(log_c, Y, R0, W=None, fixed_A=None, *, init=None,
                     b_bounds=DEFAULT_B_BOUNDS, mid_span=DEFAULT_MID_SPAN, n_b=14, n_m=24,
                     max_iter: int = 60, tol: float = 1e-10) -> BatchFit:
    """Fit R curves that share one compute grid (no validation; see :func:`fit_curve`).

    log_c: (n,) natural log of compute. Y: (R, n) or (n,) pass rates. R0: scalar or (R,).
    W: (R, n) non-negative point weights (bootstrap multiplicities), default 1.
    fixed_A: None, scalar or (R,) -> fit only (B, C_mid) with A held fixed (ScaleRL's
    comparison rule). init: optional (A, B, C_mid), scalars or (R,) arrays, tried as one more
    starting point for every curve (bootstrap replicates start from the point fit, so a coarser
    grid suffices).
    max_iter/tol: Levenberg-Marquardt caps (the profile of A uses looser ones: it needs the
    squared error to ~1e-6 of itself, not the parameters to 1e-10).
    Returns a :class:`BatchFit`; ``sse`` is the weighted squared error.
    """
    log_c = np.asarray(log_c, dtype=float)
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    R, n = Y.shape
    R0 = np.broadcast_to(np.asarray(R0, dtype=float), (R,)).copy()
    unit_w = W is None
    W = np.ones((R, n)) if W is None else np.broadcast_to(np.asarray(W, float), (R, n))
    xc = log_c.mean()
    x = log_c - xc  # centre for conditioning; C_mid is shifted back at the end
    Yc = Y - R0[:, None]
    d_hi = np.maximum(1.0 - R0, 2e-6)
    m_lo, m_hi = x.min() - mid_span[0], x.max() + mid_span[1]
    b_grid = np.geomspace(max(b_bounds[0], 0.25), min(b_bounds[1], 8.0), n_b)
    m_grid = np.linspace(m_lo, m_hi, n_m)
    fixed_d = None
    if fixed_A is not None:
        fixed_d = np.clip(np.broadcast_to(np.asarray(fixed_A, float), (R,)) - R0, 1e-6, d_hi)
    d0, b0, m0 = _grid_init(x, Yc, W, d_hi, fixed_d, b_grid, m_grid, unit_w)
    theta = np.stack([d0, b0, m0], axis=1)
    if init is not None:
        a_i, b_i, c_i = (np.broadcast_to(np.asarray(v, float), (R,)) for v in init)
        d_i = np.clip(a_i - R0, 1e-6, d_hi) if fixed_d is None else fixed_d
        cand = np.column_stack([d_i, b_i, np.log(c_i) - xc])
        cand[:, 2] = np.clip(cand[:, 2], m_lo, m_hi)
        sse_grid = _weighted_sse(x, Yc, W, theta)
        better = _weighted_sse(x, Yc, W, cand) < sse_grid
        theta[better] = cand[better]
    lo = np.column_stack([np.full(R, 1e-6), np.full(R, b_bounds[0]), np.full(R, m_lo)])
    hi = np.column_stack([d_hi, np.full(R, b_bounds[1]), np.full(R, m_hi)])
    free = np.array([fixed_d is None, True, True])
    theta, sse, conv = _refine_lm(x, Yc, W, theta, lo, hi, free, max_iter, tol)
    eps = 1e-6
    at_b = (theta[:, 1] <= lo[:, 1] + eps) | (theta[:, 1] >= hi[:, 1] - eps)
    at_m = (theta[:, 2] <= m_lo + eps) | (theta[:, 2] >= m_hi - eps)
    at_d = ((theta[:, 0] <= 1e-6 + eps) | (theta[:, 0] >= d_hi - eps) if fixed_d is None
            else np.zeros(R, bool))
    at_bound = at_b | at_m | at_d
    return BatchFit(A=R0 + theta[:, 0], B=theta[:, 1], C_mid=np.exp(theta[:, 2] + xc), R0=R0,
                    sse=sse, converged=conv & ~at_bound, at_bound=at_bound,
                    mid_low=theta[:, 2] <= m_lo + eps)


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
