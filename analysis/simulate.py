"""The simulated truth of a sweep and its draws: :class:`NoiseModel` (every number a flag of
``rlablate calibrate`` / ``rlablate plan``) and :class:`Simulator` (a fixed item set per simulated
sweep, R0 shared by the runs of a scale, per-run seed effects, binomial eval noise, an optional
AR(1) wobble). Used by the calibration (:mod:`analysis.calibrate`, :mod:`analysis.calibrate_claims`),
the planner (:mod:`analysis.plan`) and the scatter matching (:mod:`analysis.scatter`); the noise
model itself is described in :mod:`analysis.calibrate`'s docstring.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.bootstrap import CurveData, RunCurve
from analysis.fit import predict_reward
from analysis.schedule import Group


@dataclass
class NoiseModel:
    """The simulated truth and noise (defaults: the demo's scale, see LOG.md issue 15)."""

    R0: float = 0.24  # warm-start pass rate in-distribution (demo: 0.238)
    A: float = 0.55  # reference ceiling (demo GRPO pooled fit: 0.55)
    B: float = 0.9  # reference exponent (demo GRPO: 0.90)
    mid_frac: float = 0.3  # C_mid as a fraction of the reference group's steps
    seed_sd_A: float = 0.01  # seed-to-seed sd of the ceiling (ScaleRL: +-0.015 over 3 runs)
    seed_sd_logB: float = 0.1  # seed-to-seed sd of log B
    item_spread: float = 0.15  # sd of item starts / ceilings around R0 / A
    # training noise correlated within a run (a run that rises, dips and recovers): an AR(1)
    # shift of the whole run's pass rate, sd ``wobble_sd``, correlation ``wobble_rho_step`` per
    # train step; 0 = the curve plus eval noise only (analysis.plan.wobble_from_runs measures it)
    wobble_sd: float = 0.0
    wobble_rho_step: float = 0.0
    # length run-aways (analysis.runaway): with probability ``runaway_p`` a run runs away, and its
    # ceiling (the mean over items, as the fitted A) moves by ``runaway_dA``; a bimodal seed
    # effect on top of the Gaussian one. 0 = none (and the random draws are those without it)
    runaway_p: float = 0.0
    runaway_dA: float = 0.0
    effect_A: float = 0.05  # alternative truth "moved A": dA (2.5 x the 0.02 margin)
    effect_B: float = 1.5  # alternative truth "only B": B ratio
    # claims 1 and 2 (per-step training series; analysis.calibrate_claims.measured_claim_noise
    # reads them from a study's own runs)
    len_level: float = 20.0  # GRPO's mean incorrect-response length (tokens; sets the margin)
    len_growth: float = 2.0  # GRPO's growth of incorrect-response length over the run (tokens)
    len_seed_sd: float = 1.0  # per-run sd of that growth, each arm's own
    len_shared_sd: float = 0.0  # per-seed sd of that growth shared by both arms (paired runs)
    len_step_sd: float = 1.0  # per-step noise of the mean length
    entropy_level: float = 0.7  # the reference's mean token entropy (nats; sets the margin)
    entropy_effect: float = 0.05  # clip-higher's entropy gain (nats) under the alternative
    entropy_seed_sd: float = 0.03  # per-run sd of the entropy level, each arm's own
    entropy_shared_sd: float = 0.0  # per-seed sd of the level shared by both arms
    entropy_step_sd: float = 0.02
    # claim 4 (per-run gains at matched training)
    spread: float = 0.05  # sd of the algorithms' true gains (both sets under the null)
    spread_alt_held_out: float = 0.01  # held-out spread under the alternative
    gain_seed_sd: float = 0.01
    # > 0: a run's gain's whole within-algorithm sd on that set (measured), in place of
    # gain_seed_sd plus the binomial eval noise
    gain_sd_in_dist: float = 0.0
    gain_sd_held_out: float = 0.0


def _sigmoid_frac(steps, B, c_mid):
    return predict_reward(np.asarray(steps, float), 1.0, B, c_mid, 0.0)


class Simulator:
    """Draws sweeps: a fixed item set per simulated sweep (shared by every run), R0 shared by
    the runs of a scale, per-run seed effects, binomial eval noise."""

    def __init__(self, noise: NoiseModel, n_items: int, k: int, rng: np.random.Generator):
        self.noise, self.n_items, self.k, self.rng = noise, n_items, k, rng

    def items(self, A: float, R0: float):
        """Item starts and ceilings centred on (R0, A) (analysis.synth.draw_items)."""
        from analysis.synth import CurveSpec, draw_items
        r0_i, a_i = draw_items(CurveSpec(A, 1.0, 1.0, R0), self.n_items, self.rng,
                               self.noise.item_spread)
        r0_i = np.clip(r0_i, 0.0, 1.0)
        return r0_i, np.clip(a_i, r0_i, 1.0)

    def group(self, label: str, g: Group, r0_i, a_i, r0_obs, B: float, c_mid: float,
              dA: float = 0.0, noise: NoiseModel | None = None) -> CurveData:
        """One group's runs; ``noise`` (default the simulator's) sets its seed and wobble noise."""
        nz, rng = noise or self.noise, self.rng
        steps = np.arange(g.every, g.steps + 1, g.every)
        runs = []
        move = ceiling_shift(a_i, r0_i, dA) if dA else 0.0
        away = (ceiling_shift(a_i, r0_i, dA + nz.runaway_dA) - move
                if nz.runaway_p > 0 and nz.runaway_dA else 0.0)
        for s in range(g.seeds):
            shift = move + rng.normal(0, nz.seed_sd_A)
            if nz.runaway_p > 0 and rng.random() < nz.runaway_p:
                shift += away
            a_s = np.clip(a_i + shift, r0_i, 1.0)
            b_s = B * np.exp(rng.normal(0, nz.seed_sd_logB))
            frac = _sigmoid_frac(steps, b_s, c_mid)
            p = r0_i[None, :] + (a_s - r0_i)[None, :] * frac[:, None]
            if nz.wobble_sd > 0:
                p = p + self.wobble(steps.size, g.every, nz)[:, None]
            p = np.clip(p, 0, 1)
            correct = rng.binomial(self.k, p) / self.k
            runs.append(RunCurve(f"{label}-s{s}", steps, steps.astype(float),
                                 correct.mean(1), correct.std(1, ddof=1) / np.sqrt(self.n_items),
                                 r0_obs[0], r0_obs[1]))
        return CurveData(label, runs)

    def wobble(self, n: int, every: int, noise: NoiseModel | None = None) -> np.ndarray:
        """A stationary AR(1) series at ``n`` evals ``every`` steps apart: sd ``wobble_sd``,
        correlation ``wobble_rho_step ** every`` between neighbouring evals."""
        nz = noise or self.noise
        rho = float(np.clip(nz.wobble_rho_step, 0.0, 0.999)) ** every
        w = np.empty(n)
        w[0] = self.rng.normal(0, nz.wobble_sd)
        for t in range(1, n):
            w[t] = rho * w[t - 1] + np.sqrt(1 - rho ** 2) * self.rng.normal(0, nz.wobble_sd)
        return w

    def r0(self, r0_i):
        correct = self.rng.binomial(self.k, r0_i) / self.k
        return float(correct.mean()), float(correct.std(ddof=1) / np.sqrt(correct.size))


def ceiling_shift(a_i: np.ndarray, r0_i: np.ndarray, dA: float) -> float:
    """The shift of every item's ceiling (clipped to [start, 1]) that moves the *mean* ceiling,
    which the fitted A estimates, by ``dA``. Near the top, items whose ceiling is already at 1
    cannot move, so a plain shift of dA moves A by less: at the mean ceiling 0.79 and item spread
    0.27 of session 14's study, a shift of 0.05 moves A by ~0.03, and a truth "dA = 0.05" would
    really be one inside the margin. Found as a root (the mean ceiling is monotone in the
    shift; scipy's brentq); the largest reachable move where |dA| exceeds it."""
    from scipy.optimize import brentq
    base = float(np.mean(a_i))

    def moved(x):
        return float(np.mean(np.clip(a_i + x, r0_i, 1.0))) - base - dA

    end = 1.0 if dA > 0 else -1.0
    if moved(end) * np.sign(dA) <= 0:  # even the largest shift moves A by less than dA
        return end
    return float(brentq(moved, 0.0, end, xtol=1e-12))
