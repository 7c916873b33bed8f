"""The batched ScaleRL-curve solver: variable projection on a (B, ln C_mid) grid, then a projected
Levenberg-Marquardt refinement of (d, B, m) on all curves at once (the method is described in
`analysis.fit`, which validates inputs, fits single curves and judges identification on top of it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_B_BOUNDS = (0.05, 20.0)
DEFAULT_MID_SPAN = (np.log(100.0), np.log(10.0))


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
