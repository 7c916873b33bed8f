"""The planner's noise, matched to the scatter of the pilot's own per-run fits.

The planner (analysis/plan.py) measures a pilot's noise in parts: the seed-to-seed sd of the
per-run fitted A and log B, the within-run wobble left in the per-run residuals beyond the eval's
binomial error, and the spread of item difficulty. It then simulates a design by drawing each run
as the curve shifted by a seed effect with *that* sd, plus binomial eval noise, plus wobble.

Taken as they are, those parts count the within-run noise twice: a per-run fitted A scatters
between seeds by the true seed effect *and* by its own fit error, which the eval noise and wobble
cause, and the simulation adds that fit error once more on top. Worse, on the runs of issue 16's
regime the simulated fit error alone exceeds the whole scatter the pilot showed: with the wobble
and eval noise measured on study-m4-6s's six GRPO runs, simulated per-run fits of A scatter by
~0.019 with no seed effect at all, while the six real per-run A scatter by 0.0099 (and their late
pass rates, evals 11-20, agree to 0.001 between seeds while single evals wobble by 0.017: the real
wobble mean-reverts within a run, which an AR(1) shift with independent steps cannot express).
That is why the planner predicted dA widths 1.5-2.3x wider than two studies achieved (LOG.md,
session 17).

So the noise is matched to what the dA interval is built from, the scatter of the fits (the
method of simulated moments / indirect inference: choose the simulator's parameters so that the
statistic computed on simulated data equals the one computed on the real data, Gourieroux,
Monfort and Renault 1993, J. Appl. Econometrics 8:S85): the pilot's own design (its steps, eval
interval, items x samples) is simulated with no seed effect, and

* where the simulated fit error of A is below the pilot's per-run scatter, the seed sd of A is
  the one at which simulated per-run fits scatter as the pilot's did (searched on a grid; about
  ``sqrt(observed^2 - fit_error^2)``: the double count removed);
* where it is above, the seed sd of A is 0 and the wobble is scaled down until simulated per-run
  fits of A scatter as the pilot's did (scale 0 when even the binomial eval noise alone scatters
  them more; the note says so);
* then the seed sd of log B is matched the same way, with A's noise as matched.

Scatter is the interquartile range / 1.349 over 400 simulated runs (a normal sample's sd, not
driven by the few wild fits of a poorly identified simulated run: a 3-6-run pilot seldom holds
one), all on common random numbers, so the search is smooth and deterministic.

A pilot's scatter from 2-3 runs is itself uncertain (a 3-run sd has a 95% interval of ~0.5x-6x),
so the matched noise is as good as the pilot's seed count; the plan's notes say what was matched.
"""
from __future__ import annotations

from dataclasses import astuple, replace

import numpy as np

from analysis.simulate import NoiseModel, Simulator
from analysis.fit import fit_curves_batch
from analysis.schedule import Group

WOBBLE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)  # scales of the measured wobble tried
SEED_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25)  # seed sds tried, as fractions of the observed


def robust_sd(x: np.ndarray) -> float:
    """The interquartile range / 1.349: the sd of a normal sample, not driven by the few wild fits
    of a poorly identified simulated run (a 3-6-run pilot seldom holds one)."""
    q1, q3 = np.quantile(x, [0.25, 0.75])
    return float((q3 - q1) / 1.3489795003921634)


def run_scatter(noise: NoiseModel, mid_steps: float, design: Group, n_runs: int = 400,
                seed: int = 0) -> tuple[float, float]:
    """The scatter (:func:`robust_sd`) of per-run fitted A and log B over ``n_runs`` simulated
    runs of ``design`` (one item set, each run its own seed effects from ``noise``); converged
    fits only, as the pilot's. The random draws depend only on ``seed`` and the design, so two
    noise models are compared on common random numbers."""
    rng = np.random.default_rng([seed, design.steps, design.every, design.n_items, design.k])
    sim = Simulator(noise, design.n_items, design.k, rng)
    r0_i, a_i = sim.items(noise.A, noise.R0)
    one = replace(design, seeds=1)
    ys, r0s, compute = [], [], None
    for _ in range(n_runs):
        run = sim.group("x", one, r0_i, a_i, sim.r0(r0_i), noise.B, mid_steps).runs[0]
        ys.append(run.y)
        r0s.append(run.r0)
        compute = run.compute
    res = fit_curves_batch(np.log(compute), np.asarray(ys), np.asarray(r0s, float), None)
    ok = res.converged & ~res.at_bound & np.isfinite(res.A) & (res.B > 0)
    if ok.sum() < 8:
        return float("nan"), float("nan")
    return robust_sd(res.A[ok]), robust_sd(np.log(res.B[ok]))


def _solve(target: float, xs, scatter) -> float:
    """The x at which the (non-decreasing) simulated scatter reaches ``target``, by linear
    interpolation on the grid ``xs`` (the grid's end where it never does)."""
    ys = np.maximum.accumulate([scatter(x) for x in xs])
    if target <= ys[0]:
        return float(xs[0])
    return float(np.interp(target, ys, xs)) if target < ys[-1] else float(xs[-1])


def match_run_scatter(noise: NoiseModel, mid_steps: float, design: Group, n_runs: int = 400,
                      seed: int = 0) -> tuple[NoiseModel, str]:
    """``noise`` with its seed sd of A and log B and its wobble chosen so that simulated per-run
    fits of ``design`` (the pilot's own schedule) scatter as the pilot's did (``noise.seed_sd_A``
    and ``noise.seed_sd_logB`` hold the pilot's observed per-run sds), with a note; the module
    docstring says how. Every call with the same inputs gives the same answer."""
    obs_a, obs_b = noise.seed_sd_A, noise.seed_sd_logB
    quiet = replace(noise, seed_sd_A=0.0, seed_sd_logB=0.0)

    seen: dict = {}

    def scat(nz):  # each noise model simulated once (the grids share their ends)
        key = astuple(nz)
        if key not in seen:
            seen[key] = run_scatter(nz, mid_steps, design, n_runs, seed)
        return seen[key]

    where = (f"simulated per-run fits at the pilot's design ({design.steps} steps, eval every "
             f"{design.every}, {design.n_items}x{design.k})")
    fe_a = scat(quiet)[0]
    if not (np.isfinite(fe_a) and np.isfinite(obs_a) and np.isfinite(obs_b)):
        return noise, f"scatter not matched: {where} did not converge"
    if fe_a <= obs_a:
        scale = 1.0
        sd_a = _solve(obs_a, [obs_a * f for f in SEED_GRID],
                      lambda x: scat(replace(quiet, seed_sd_A=x))[0])
        note = (f"scatter matched: {where} scatter A by {fe_a:.4f} (robust sd) from eval noise "
                f"and wobble alone; a seed sd of A of {sd_a:.4f} brings them to the pilot's "
                f"{obs_a:.4f}")
    else:
        scale = _solve(obs_a, WOBBLE_GRID,
                       lambda x: scat(replace(quiet, wobble_sd=noise.wobble_sd * x))[0])
        sd_a = 0.0
        floor = scat(replace(quiet, wobble_sd=0.0))[0]
        note = (f"scatter matched: {where} scatter A by {fe_a:.4f} (robust sd) from eval noise "
                f"and wobble alone, more than the pilot's per-run fits did ({obs_a:.4f}), so the "
                f"seed sd of A is 0 and the wobble is scaled x{scale:.2f} (to sd "
                f"{noise.wobble_sd * scale:.4f})"
                + (f"; even the binomial eval noise alone scatters A by {floor:.4f}"
                   if floor > obs_a else ""))
    base = replace(quiet, seed_sd_A=sd_a, wobble_sd=noise.wobble_sd * scale)
    sd_b = _solve(obs_b, [obs_b * f for f in SEED_GRID],
                  lambda x: scat(replace(base, seed_sd_logB=x))[1])
    note += f"; seed sd of log B {obs_b:.3f} observed, {sd_b:.3f} matched"
    return replace(base, seed_sd_logB=sd_b), note


def pilot_design(curve, k: int) -> Group | None:
    """The schedule a pilot group's runs had (steps, eval interval, items, samples per item),
    from its first run; None without eval points or without per-item results (the simulator
    draws its eval noise item by item, and a pass rate's standard error alone does not say over
    how many items: synthetic curves with a tiny error would ask for millions)."""
    run = curve.runs[0] if curve.runs else None
    if run is None or run.steps.size == 0 or run.r0_items is None:
        return None
    every = int(np.median(np.diff(np.r_[0, run.steps])))
    n_items = int(np.asarray(run.r0_items).size)
    return Group("pilot", "", int(run.steps.max()), max(every, 1), 1, max(n_items, 2), k)
