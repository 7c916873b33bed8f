"""Benchmark: 200 runs x 1,000 bootstrap replicates of the ScaleRL fit, batched vs naive.

    .venv/bin/python bench/bench_fit.py            # full benchmark (about a minute)
    .venv/bin/python bench/bench_fit.py --quick    # fewer runs/repeats

Ours: each run's point fit plus its 1,000 replicates go through
``analysis.bootstrap.bootstrap_fit`` (one batched grid + Levenberg-Marquardt solve per run).
Naive: SciPy ``curve_fit`` once per replicate (bounded TRF, and unbounded LM), timed on a subset
of the same replicates and scaled to the full job; the two answers are compared.
Target (issue 5): <= 10 s for the full job on the 2-core dev machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analysis.bootstrap import (CurveData, RunCurve, bootstrap_fit, draw_replicates,  # noqa: E402
                                fit_curve_data)
from analysis.fit import fit_curves_batch, predict_reward  # noqa: E402

TABLE1 = [(2542, 1.92, 0.610), (11272, 1.89, 0.645), (4242, 1.65, 0.710)]  # ScaleRL Table 1


def make_runs(n_runs: int, n_points: int = 25, n_items: int = 500, seed: int = 0):
    """Synthetic runs on ScaleRL Table 1 curves, R0 = 0.3, evals evenly spaced in compute up to
    8 x C_mid, per-item results (4 samples per item) for the item bootstrap."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(n_runs):
        c_mid, b, a = TABLE1[i % 3]
        steps = np.arange(1, n_points + 1)
        compute = steps * 8 * c_mid / n_points
        r0_i = np.clip(0.3 + rng.normal(0, 0.15, n_items), 0, 1)  # item-level start and ceiling
        a_i = np.clip(a + rng.normal(0, 0.15, n_items), r0_i, 1)
        frac = predict_reward(compute, 1.0, b, c_mid, 0.0)  # sigmoid part, 0 -> 1
        p = r0_i[None, :] + (a_i - r0_i)[None, :] * frac[:, None]  # (n, N)
        items = rng.binomial(4, p) / 4
        r0_items = rng.binomial(4, r0_i) / 4
        runs.append(RunCurve(f"run{i}", steps, compute, items.mean(1),
                             items.std(1, ddof=1) / np.sqrt(n_items), float(r0_items.mean()),
                             float(r0_items.std(ddof=1) / np.sqrt(n_items)), items, r0_items))
    return runs


def time_ours(runs, n_boot: int, method: str) -> float:
    t0 = time.perf_counter()
    for i, run in enumerate(runs):
        curve = CurveData(run.run_id, [run])
        point = fit_curve_data(curve)
        bootstrap_fit(curve, n_boot, method=method, seed=0, point=point)
    return time.perf_counter() - t0


def time_naive(runs, n_boot: int, n_fits: int, bounded: bool) -> tuple[float, int, float]:
    """Seconds per replicate with SciPy curve_fit, one call per replicate, on the same residual
    bootstrap replicates our batched solve gets; also the largest |A_scipy - A_ours|.

    bounded=True: trust-region-reflective with A in [R0, 1], B in [0.05, 20], C_mid within
    [C_min / 100, 10 C_max] (the constraints our fit enforces); False: unbounded
    Levenberg-Marquardt (the issue's ~2 ms/fit figure)."""
    done, worst, elapsed = 0, 0.0, 0.0
    for i, run in enumerate(runs):
        curve = CurveData(run.run_id, [run])
        point = fit_curve_data(curve)
        Y, _, R0 = draw_replicates(curve, "residuals", n_boot, np.random.default_rng(i), point)
        ours = fit_curves_batch(np.log(run.compute), Y, R0, init=(point.A, point.B, point.C_mid),
                                n_b=6, n_m=8)
        for j in range(min(n_boot, n_fits - done)):
            r0 = R0[j]

            def model(c, a, b, c_mid):
                return predict_reward(c, a, b, c_mid, r0)

            kw = dict(bounds=([r0, 0.05, run.compute.min() / 100],
                              [1.0, 20.0, run.compute.max() * 10])) if bounded else {}
            t0 = time.perf_counter()
            try:
                p, _ = curve_fit(model, run.compute, Y[j], p0=[0.6, 1.5, float(np.median(run.compute))],
                                 maxfev=5000, **kw)
                worst = max(worst, abs(p[0] - ours.A[j]))
            except RuntimeError:
                pass
            elapsed += time.perf_counter() - t0
            done += 1
        if done >= n_fits:
            break
    return elapsed / max(done, 1), done, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--naive-fits", type=int, default=300)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.repeats, args.naive_fits = 40, 1, 100
    runs = make_runs(args.runs)
    total = args.runs * args.boot
    print(f"{args.runs} runs x {args.boot} replicates = {total:,} fits; "
          f"{runs[0].y.size} points/run; {os.cpu_count()} CPUs")
    for method in ("residuals", "items"):
        times = [time_ours(runs, args.boot, method) for _ in range(args.repeats)]
        print(f"  ours ({method:9s} bootstrap, batched): median {np.median(times):6.2f} s "
              f"over {args.repeats} repeats  ({1e6 * np.median(times) / total:.1f} us/fit)")
    for bounded, name in ((True, "bounded TRF"), (False, "unbounded LM")):
        per_fit, n, worst = time_naive(runs, args.boot, args.naive_fits, bounded)
        print(f"  naive curve_fit per replicate ({name:12s}): {1e3 * per_fit:.2f} ms/fit on {n} "
              f"fits -> {per_fit * total:7.1f} s for the full job (extrapolated); "
              f"max |A_scipy - A_ours| {worst:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
