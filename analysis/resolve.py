"""What budget would resolve a verdict these runs leave *not resolved* (issue 16: "*not resolved*
remains when the data cannot tell, and the report says what budget would").

The answer is a number of seeds per arm, from the runs' own intervals, under two stated
assumptions: the point estimate holds (the effect is what these runs measured), and the interval
narrows as seeds are added the way a mean over independent seeds does.

* Design-choice effects (dA, a paired bootstrap over seeds): the percentile interval of a mean
  over n seeds, widened for few seeds by sqrt(n / (n - 1)) t / z (analysis.bootstrap), is a t
  interval, so each half-width of the dA interval scales as ``t_{0.975, n-1} / sqrt(n)`` from n
  to n' seeds per arm. Wobble within a run and eval-item noise that seeds do not average away
  are assumed small beside the seed-to-seed spread (the planner simulates all three).
* Claims 1 and 2 (Student t intervals over per-run values): the half-width
  ``t_{0.975, n'-1} s / sqrt(n')`` with the observed sd ``s``.
* Claim 4 (variance components of per-run gains, analysis/variance.py): each eval set's
  between-algorithm component and within-algorithm mean square held, the between mean square at
  its expectation with n' seeds per algorithm; claim 4's own rule applied to those.

A comparison whose fit is not identified (either arm's A an extrapolation past its last eval)
gets no seed count: seeds do not bound an extrapolated ceiling, more steps do (measured:
check-cispo-steps, LOG session 24: CISPO vs GRPO, not identified at 400 steps with a dA interval
0.174 wide that seed scaling put beyond 64 seeds; the same 4+4 runs at 800 steps read *no effect
on A*, width 0.033). Its ``resolve_at`` names the arm(s) and the step reached, and says more steps.

The verdict named is the nearest one consistent with the point estimate: with |dA| below the
margin, *no effect on A* (the whole interval inside +-margin); at or above it, *moved A* (the
interval excludes 0); for a claim, whichever of its verdicts needs the fewest seeds. Beyond
:data:`MAX_SEEDS` the answer is "more than" that: the estimate sits at the edge of every verdict
(at the margin, or at zero), where no affordable budget decides it. This is sample-size
re-estimation from an observed effect, not a power calculation (the planner's is that): the seed
count resolves the verdict about half the time if the truth is the estimate, more often if the
truth lies further from the edge.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from analysis import variance

MAX_SEEDS = 64

RULE = ("`resolve_at` (not resolved rows): the seeds per arm at which this dA interval would "
        "resolve, if the point estimate held and each half-width scaled as t_{0.975, n-1} / "
        f"sqrt(n) with the seeds n (analysis/resolve.py; up to {MAX_SEEDS} seeds): *no effect on "
        "A* where |dA| is below the margin, *moved A* where it is not. Where a fit is not "
        "identified it names the arm and says *more steps*: its A is extrapolated past the last "
        "eval, which more seeds do not bound (measured in LOG, session 24). Running those seeds "
        "once this report is read is a second look: `rlablate calibrate SPEC --look-at-seeds N` "
        "(N the seeds run so far) gives each verdict's false-positive rate with it (study-m4's "
        "filter, 4 then 6 seeds: *no effect on A* 0.035 -> 0.055; LOG, session 27).")


CLAIM_RULE = ("A budget is the seeds per arm at which the claim's own rule would decide it if "
              "the observed estimates held (analysis/resolve.py); running them after this report "
              "is a second look, whose false-positive rates `rlablate calibrate SPEC "
              "--look-at-seeds N` (N the seeds run so far) gives.")


def _t_scale(n: int) -> float:
    """Half-width of a 95% t interval over n values, per unit sd."""
    return float(stats.t.ppf(0.975, n - 1)) / math.sqrt(n)


def _seeds_for_factor(n: int, f: float, max_seeds: int) -> int | None:
    """Smallest n' >= n whose t half-width is less than f times that of n (None beyond
    ``max_seeds``)."""
    if f > 1:
        return n
    target = f * _t_scale(n)
    return next((m for m in range(n + 1, max_seeds + 1) if _t_scale(m) < target), None)


def effect_seeds(dA: float, lo: float, hi: float, n: int, margin: float,
                 max_seeds: int = MAX_SEEDS) -> tuple[str, int | None]:
    """(verdict, seeds per arm) that would resolve a dA interval ``[lo, hi]`` measured with ``n``
    seeds per arm; seeds None where more than ``max_seeds`` would be needed, ("", None) where the
    interval is missing (a fit not identified: more seeds do not bound an extrapolated A)."""
    if not (np.isfinite(dA) and np.isfinite(lo) and np.isfinite(hi)) or n < 2:
        return "", None
    below, above = max(dA - lo, 0.0), max(hi - dA, 0.0)
    if abs(dA) < margin:
        verdict = "no effect on A"
        f = min((margin + dA) / below if below > 0 else np.inf,
                (margin - dA) / above if above > 0 else np.inf)
    else:
        verdict = "moved A"
        f = (dA / below if below > 0 else np.inf) if dA > 0 else (
            -dA / above if above > 0 else np.inf)
    return verdict, _seeds_for_factor(n, f, max_seeds)


def t_seeds(values, kind: str, margin: float | None = None,
            max_seeds: int = MAX_SEEDS) -> int | None:
    """Smallest number of runs n' (>= the runs given, >= 2) at which a 95% t interval with the
    observed mean and sd of ``values`` lies above 0 (``kind`` "above"), below 0 ("below") or
    inside +-margin ("inside"); None beyond ``max_seeds`` or with fewer than 2 values."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return None
    m, s = float(v.mean()), float(v.std(ddof=1))
    for n in range(max(v.size, 2), max_seeds + 1):
        h = _t_scale(n) * s
        if ((kind == "above" and m - h > 0) or (kind == "below" and m + h < 0)
                or (kind == "inside" and margin is not None and -margin < m - h
                    and m + h < margin)):
            return n
    return None


def nearest(options: dict[str, int | None], rule: str = "t interval") -> str:
    """The claim verdict reachable with the fewest seeds, as a sentence naming the ``rule``."""
    reach = {k: v for k, v in options.items() if v is not None}
    if not reach:
        return (f"no verdict within {MAX_SEEDS} seeds per arm (the estimate sits at the edge of "
                "every verdict), if the observed mean and spread held")
    name = min(reach, key=reach.get)
    return (f"~{reach[name]} seeds per arm would resolve it as *{name}*, if the observed mean "
            f"and spread held ({rule}; analysis/resolve.py)")


def claim1_budget(grpo_growth, diffs, margin: float | None) -> str:
    """Claim 1: *reproduces* needs GRPO's growth and the paired GRPO - Dr. GRPO difference both
    above 0; *no effect* the paired difference inside +-margin; *does not reproduce* GRPO's
    growth below 0."""
    up, gap = t_seeds(grpo_growth, "above"), t_seeds(diffs, "above")
    return nearest({"reproduces": max(up, gap) if up and gap else None,
                    "no effect": t_seeds(diffs, "inside", margin),
                    "does not reproduce": t_seeds(grpo_growth, "below")})


def claim2_budget(diffs, margin: float | None) -> str:
    """Claim 2: the paired clip-higher - reference entropy above 0, below 0, or inside +-margin."""
    return nearest({"reproduces": t_seeds(diffs, "above"),
                    "does not reproduce": t_seeds(diffs, "below"),
                    "no effect": t_seeds(diffs, "inside", margin)})


def claim4_budget(fin: pd.DataFrame, eval_set: str, held_out: str, alpha: float = 0.05,
                  max_seeds: int = MAX_SEEDS) -> str:
    """Claim 4: the seeds per algorithm at which claim 4's own rule (analysis.variance.scale_call,
    the z test of the two variance components, the F-tests and the check without the furthest
    algorithm) would call *reproduces* (every scale "larger") or *does not reproduce* (one scale
    "smaller"), if each set's between-algorithm component and within-algorithm mean square held
    (variance.project_anova: MS_b at its expectation). Seeds shrink only the within-algorithm
    noise: a component estimated from few algorithms stays as uncertain as the algorithms are
    few, which the z test's variance carries."""
    at = variance.scale_anovas(fin, eval_set, held_out)
    n_scales = len(at)

    def first(call: str, arrays) -> int | None:
        a_in, a_ho, w_in, w_ho, _ = arrays
        start = max(2, math.ceil(a_in.get("n0", 2) - 1e-9))
        for n in range(start, max_seeds + 1):
            proj = [variance.project_anova(a, n) for a in (a_in, a_ho, w_in, w_ho)]
            if variance.scale_call(*proj, alpha=alpha, n_scales=n_scales)[0] == call:
                return n
        return None

    larger = [first("larger", arrays) for arrays in at.values()]
    smaller = [s for s in (first("smaller", arrays) for arrays in at.values()) if s]
    return nearest({"reproduces": max(larger) if larger and all(larger) else None,
                    "does not reproduce": min(smaller) if smaller else None},
                   rule="claim 4's z and F tests with each set's variance components held")


def _unidentified_arms(rec: dict, groups: dict) -> list[str]:
    """The arms of an effects row whose group fit exists and is not identified, with the last
    step their runs reached: ["cispo (to step 400)", ...]."""
    out = []
    for arm in (rec["variant"], rec["vs"]):
        g = groups.get((arm, rec["scale"]))
        if g is not None and g.fit is not None and not g.fit.identified:
            last = max((int(np.max(r.steps)) for r in g.curve.runs if len(r.steps)), default=None)
            out.append(f"{arm}" + (f" (to step {last})" if last is not None else ""))
    return out


#: how a ``resolve_at`` budget that is a number of steps, not of seeds, begins
MORE_STEPS = "more steps"


def needs_steps(budget: str) -> bool:
    """Whether a ``resolve_at`` text (:func:`attach_effect_budget`) asks for steps, not seeds."""
    return str(budget).startswith(MORE_STEPS)


def attach_effect_budget(effects: pd.DataFrame, fits, eval_set: str,
                         margin: float) -> pd.DataFrame:
    """``effects`` with ``resolve_at`` for every *not resolved* row: "<verdict> at N seeds" (N
    per arm), "> MAX_SEEDS seeds", "more steps: ..." where a fit is not identified (no seed
    count: seeds do not bound an extrapolated A), or empty where no interval exists."""
    if effects.empty:
        return effects
    groups = {(g.variant, g.scale): g for g in fits
              if g.level == "group" and g.eval_set == eval_set}
    out = []
    for rec in effects.to_dict("records"):
        text = ""
        if str(rec["verdict"]).startswith("not resolved"):
            arms = _unidentified_arms(rec, groups)
            if arms:
                out.append(f"{MORE_STEPS}: the fit of " + " and ".join(arms) + " is not identified "
                           "(A extrapolated past the last eval); more seeds do not bound it")
                continue
            n = min(groups[k].curve.n_runs if k in groups else 0
                    for k in ((rec["variant"], rec["scale"]), (rec["vs"], rec["scale"])))
            verdict, seeds = effect_seeds(rec["dA"], rec["dA_lo"], rec["dA_hi"], n, margin)
            text = (f"{verdict} at {seeds} seeds" if seeds else
                    f"{verdict}: > {MAX_SEEDS} seeds" if verdict else "")
        out.append(text)
    return effects.assign(resolve_at=out)
