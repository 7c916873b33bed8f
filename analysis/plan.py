"""The power planner: what a sweep design can resolve, predicted before it runs.

``rlablate plan SPEC --pilot DIR`` (and a section of every report) answers the question a study
must answer *before* it spends its budget: for each design-choice comparison of the spec (every
variant against the reference at its scale), how wide will the 95% intervals of dA and of the B
ratio be, how small a change of the ceiling A can the design resolve, and which budget (seeds,
steps, eval items x samples) would reach a target width?

Method: the noise is measured on a pilot (:func:`noise_from_fits`: the reference's pooled curve
gives R0, A, B and C_mid in steps; its per-run fits the seed-to-seed sd of A and log B; the
per-item eval results the spread of item difficulty; the seed sds and the within-run wobble then
matched so that simulated per-run fits at the pilot's own schedule scatter as the pilot's did,
:mod:`analysis.scatter`, which otherwise counts the within-run noise twice and predicted widths
1.5-2.3x too wide in session 16's study) and the spec's schedule is simulated with
:class:`analysis.simulate.Simulator` under the null (the variant equals the reference), each
simulated sweep analysed by the report's own fits, bootstrap and interval functions
(:func:`analysis.effects.effect_intervals`). The predicted width is the median over simulated
sweeps of ``dA_hi - dA_lo``; the smallest resolvable dA (80% power at 5%, two-sided) is
``(z_0.975 + z_0.8) / (2 z_0.975) x width`` (normal approximation of the interval), and never
less than the margin (a "moved A" verdict needs |dA| >= margin); the tightest equivalence margin
is the 80th percentile of ``max(|dA_lo|, |dA_hi|)`` under the null (a "no effect on A within +-m"
verdict needs the whole interval inside +-m).

Assumptions (stated in the report): the variant's noise equals the reference's (unless the pilot
ran the variant too and ``--per-variant-noise`` is given); seed effects are
independent between variants (measured by :func:`analysis.compare.seed_pairing`: over the
committed studies the seed correlation of two arms' per-run A averages -0.02, LOG.md session 22);
the eval items are shared by every run (as the harness evaluates them); compute is
proportional to the step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analysis.calibrate import _fit
from analysis.simulate import NoiseModel, Simulator
from analysis.effects import effect_intervals
from analysis.compare import DEFAULT_MARGIN
from analysis.scatter import match_run_scatter, pilot_design
from analysis.schedule import REFERENCE, Group

Z95, Z80 = 1.959963984540054, 0.8416212335729143
MDE_FACTOR = (Z95 + Z80) / (2 * Z95)  # smallest resolvable |dA| per unit of interval width
# the parts of a NoiseModel that are noise (not the simulated truth): what a study's own reference
# runs measure and its calibration simulates; an arm's own runs measure all but the item spread
MEASURED_NOISE = ("seed_sd_A", "seed_sd_logB", "item_spread", "wobble_sd", "wobble_rho_step")
VARIANT_NOISE = ("seed_sd_A", "seed_sd_logB", "wobble_sd", "wobble_rho_step")


@dataclass(frozen=True)
class PilotNoise:
    """The noise measured on a pilot, with where each number came from."""

    noise: NoiseModel
    notes: tuple[str, ...]
    mid_steps: float  # the reference curve's C_mid in steps
    by_scale: tuple = ()  # ((scale, PilotNoise), ...): the noise measured at each pilot scale
    identified: bool = False  # the reference's pooled fit is identified (its A, B, C_mid mean something)
    by_variant: tuple = ()  # (((variant, scale), NoiseModel), ...): arms with their own noise

    def for_variant(self, variant: str, scale: str) -> NoiseModel | None:
        """The noise measured on ``variant``'s own pilot runs at ``scale`` (None: not measured)."""
        return dict(self.by_variant).get((variant, scale))

    def for_scale(self, scale: str) -> "PilotNoise":
        """The noise measured at ``scale`` when the pilot ran the reference there, else the
        main one (the scale with the most reference runs)."""
        return dict(self.by_scale).get(scale, self)


def noise_from_fits(fits, reference: str = REFERENCE, eval_set: str = "in_dist",
                    base: NoiseModel | None = None, k: int = 4, match: bool = True) -> PilotNoise:
    """A :class:`NoiseModel` from a pilot's fits (``analysis.groups.fit_all`` output).

    Uses the reference variant's group fit at the scale with the most reference runs (R0, A, B,
    C_mid converted to steps by the runs' compute per step), the sd over its per-run fits (A and
    log B, only fits that converged; the defaults otherwise, with a note) and the item spread of
    its step-0 per-item results (sd of per-item success minus the binomial part). Every other
    scale at which the pilot fitted the reference gets its own noise (:meth:`PilotNoise.for_scale`),
    so a plan of several scales simulates each with what was measured there. ``match``: the seed
    sds and the wobble are matched to the scatter of the per-run fits (analysis/scatter.py);
    False keeps them as measured (the planner before session 17)."""
    groups = [g for g in fits if g.level == "group" and g.variant == reference
              and g.eval_set == eval_set and g.fit is not None]
    if not groups:
        raise ValueError(f"the pilot has no fitted group of {reference!r} on {eval_set!r}")
    main = max(groups, key=lambda x: (x.curve.n_runs, x.fit.identified))
    per = tuple((g.scale, _noise_of_group(g, fits, reference, eval_set, base or NoiseModel(), k,
                                          match))
                for g in sorted(groups, key=lambda x: str(x.scale)))
    out = dict(per)[main.scale]
    if len(per) < 2:
        return out
    notes = out.notes + tuple(f"at {s}: " + "; ".join(p.notes) for s, p in per if s != main.scale)
    return replace(out, notes=notes, by_scale=per)


def _noise_of_group(g, fits, reference: str, eval_set: str, base: NoiseModel, k: int,
                    match: bool = True) -> PilotNoise:
    """:func:`noise_from_fits` for one fitted reference group ``g`` (one scale)."""
    f = g.fit
    notes = [f"pilot: {g.label}, {g.curve.n_runs} run(s), A {f.A:.3f}, B {f.B:.2f}, "
             f"R0 {f.R0:.3f}" + ("" if f.identified else f" (fit not identified: {f.message})")]
    steps = np.concatenate([r.steps for r in g.curve.runs]).astype(float)
    comp = np.concatenate([r.compute for r in g.curve.runs])
    per_step = float(np.median(comp / np.maximum(steps, 1)))
    mid_steps = float(f.C_mid / per_step) if per_step > 0 else float("nan")
    kw = dict(R0=float(f.R0), A=float(f.A), B=float(f.B))
    run_kw, run_notes = _run_noise(g, fits, reference, eval_set)
    kw.update(run_kw)
    if "seed_sd_A" not in run_kw:
        notes.append(f"fewer than 2 converged per-run fits: seed sd of A {base.seed_sd_A} and of "
                     f"log B {base.seed_sd_logB} assumed (NoiseModel defaults)")
    notes += run_notes
    items = [r.r0_items for r in g.curve.runs if r.r0_items is not None]
    if items and k > 1:
        x = np.asarray(items[0], float)
        var_p = max(float(np.var(x, ddof=1)) - float(np.mean(x * (1 - x))) / max(k - 1, 1), 0.0)
        kw["item_spread"] = float(np.sqrt(var_p))
        notes.append(f"item spread {kw['item_spread']:.3f} from {x.size} step-0 items")
    elif k == 1:
        spread = item_spread_across_evals(g.curve.runs)
        if np.isfinite(spread):
            kw["item_spread"] = spread
            notes.append(f"item spread {spread:.3f} from the covariance of each item's outcome "
                         "between evals (k = 1: one sample per item and eval)")
    noise = replace(base, **kw)
    if match and "seed_sd_A" in run_kw:
        noise, note = _matched(noise, mid_steps, g, k)
        notes.append(note)
    return PilotNoise(noise, tuple(notes), mid_steps, identified=bool(f.identified))


def _matched(noise: NoiseModel, mid_steps: float, g, k: int) -> tuple[NoiseModel, str]:
    """:func:`analysis.scatter.match_run_scatter` at the schedule of ``g``'s runs."""
    design = pilot_design(g.curve, k)
    if design is None or not np.isfinite(mid_steps) or mid_steps <= 0:
        return noise, ("scatter not matched: the pilot has no per-item eval results "
                       "(eval_items.jsonl) or no C_mid")
    return match_run_scatter(noise, mid_steps, design)


def _run_noise(g, fits, variant: str, eval_set: str) -> tuple[dict, list[str]]:
    """What the per-run fits of ``variant`` at ``g``'s scale measure: the seed sd of A and log B
    (from 2+ converged fits) and the within-run wobble (:func:`wobble_from_runs`), as NoiseModel
    fields, with notes."""
    runs = [x for x in fits if x.level == "run" and x.variant == variant and x.scale == g.scale
            and x.eval_set == eval_set and x.fit is not None and x.fit.converged]
    kw, notes = {}, []
    if len(runs) >= 2:
        kw["seed_sd_A"] = float(np.std([x.fit.A for x in runs], ddof=1))
        kw["seed_sd_logB"] = float(np.std([np.log(x.fit.B) for x in runs], ddof=1))
        notes.append(f"seed sd from {len(runs)} converged per-run fits: A {kw['seed_sd_A']:.4f}, "
                     f"log B {kw['seed_sd_logB']:.3f}")
    every = int(np.median(np.diff(np.r_[0, g.curve.runs[0].steps]))) if g.curve.runs else 1
    sd, rho, n = wobble_from_runs([(x.curve.runs[0], x.fit) for x in runs], every)
    if n:
        kw["wobble_sd"], kw["wobble_rho_step"] = sd, rho
        notes.append(f"within-run wobble sd {sd:.4f} beyond the eval noise, lag-1 correlation "
                     f"{rho ** every:.2f} per eval ({every} steps), from the residuals of {n} "
                     "per-run fits")
    return kw, notes


def with_variant_noise(pilot: PilotNoise, fits, reference: str = REFERENCE,
                       eval_set: str = "in_dist", k: int = 4, match: bool = True) -> PilotNoise:
    """``pilot`` plus each other variant's own noise, where the pilot ran it: the seed sd of A
    and log B and the within-run wobble its per-run fits measure (:func:`_run_noise`, 2+
    converged fits), on top of the reference's noise at that scale (the truth, the item spread
    and whatever the variant's runs cannot measure stay the reference's). A variant that is
    noisier between seeds than the reference gets wider predicted intervals (session 14: the
    plan from GRPO alone predicted CISPO, GSPO and the zero-variance filter 1.8-1.9x too narrow).
    A seed sd from 2-3 runs is itself uncertain (its 95% interval spans ~0.5x-6x for 3 runs).
    ``match``: each arm's noise is matched to its own per-run scatter, as the reference's is
    (analysis/scatter.py), at the reference's curve."""
    own, notes = [], list(pilot.notes)
    for g in sorted((x for x in fits if x.level == "group" and x.eval_set == eval_set
                     and x.variant != reference), key=lambda x: (str(x.scale), x.variant)):
        kw, run_notes = _run_noise(g, fits, g.variant, eval_set)
        if "seed_sd_A" not in kw:
            notes.append(f"{g.variant} @ {g.scale}: fewer than 2 converged per-run fits, the "
                         f"reference's noise assumed")
            continue
        pn = pilot.for_scale(g.scale)
        nv = replace(pn.noise, **kw)
        if match:
            nv, note = _matched(nv, pn.mid_steps, g, k)
            run_notes = run_notes + [note]
        own.append(((g.variant, g.scale), nv))
        notes.append(f"{g.variant} @ {g.scale}: its own noise, " + "; ".join(run_notes))
    return replace(pilot, by_variant=tuple(own), notes=tuple(notes))


def wobble_from_runs(pairs, every: int) -> tuple[float, float, int]:
    """Training noise correlated within a run, from ``(RunCurve, FitResult)`` pairs of per-run
    fits: (sd, correlation per train step, runs used).

    A run's residuals from its own fitted curve hold the eval noise (its ``stderr`` per point,
    independent between evals) plus whatever the run itself does around the curve: off-policy
    runs rise, dip and recover over tens of steps, which the curve cannot follow and which a
    simulation of the curve plus eval noise leaves out (session 13: two of five pilot runs failed
    the lack-of-fit test, and the planner's predicted widths were 6-17x too narrow). The excess
    variance ``mean(resid^2) - mean(stderr^2)`` (pooled over runs, floored at 0) gives the sd; the
    pooled lag-1 autocorrelation of the residuals, taken as the wobble's share of it, gives the
    correlation between neighbouring evals, converted to one train step (``every`` steps apart).
    Runs whose fit refused, or with fewer than 4 points, are skipped."""
    excess, lag, total, used, points = [], 0.0, 0.0, 0, 0
    for curve, fit in pairs:
        if fit is None or curve.y.size < 4:
            continue
        resid = np.asarray(curve.y, float) - fit.predict(np.asarray(curve.compute, float))
        if not np.all(np.isfinite(resid)):
            continue
        excess.append(float(np.mean(resid ** 2) - np.mean(np.asarray(curve.stderr, float) ** 2)))
        lag += float(np.sum(resid[1:] * resid[:-1]))
        total += float(np.sum(resid ** 2))
        used, points = used + 1, points + resid.size
    if not used:
        return 0.0, 0.0, 0
    var_w = max(float(np.mean(excess)), 0.0)
    if var_w == 0.0 or total <= 0:
        return 0.0, 0.0, used
    share = var_w / (total / points)  # the wobble's part of the residual variance
    rho_eval = float(np.clip(lag / total / min(share, 1.0), 0.0, 0.99))
    return float(np.sqrt(var_w)), rho_eval ** (1.0 / max(every, 1)), used


def item_spread_across_evals(runs) -> float:
    """The sd of item difficulty when each eval draws one sample per item (k = 1).

    With one sample the within-item binomial part cannot be taken out of one eval's variance;
    but the same items are scored at every eval, with independent samples, so the covariance
    over items of an item's outcomes at two evals estimates the variance of its success
    probability (the binomial noise is independent between evals). Measured between the step-0
    eval and the first later one of every run: the spread at the start, as the k > 1 estimate
    measures it (items spread further as training moves them). NaN without two evals."""
    covs = [float(np.cov(np.asarray(r.r0_items, float), np.asarray(r.items[0], float))[0, 1])
            for r in runs if r.items is not None and r.r0_items is not None and len(r.items)]
    return float(np.sqrt(max(np.mean(covs), 0.0))) if covs else float("nan")


def simulate_widths(ref: Group, var: Group, noise: NoiseModel, mid_steps: float,
                    n_sweeps: int = 100, seed: int = 0, n_boot: int = 400,
                    var_noise: NoiseModel | None = None) -> dict:
    """Interval widths of dA and log B-ratio over ``n_sweeps`` null sweeps of (ref, var);
    ``var_noise``: the variant's own seed and wobble noise (default: the reference's)."""
    rng = np.random.default_rng([seed, ref.steps, var.steps, ref.seeds, var.seeds, ref.n_items])
    sim = Simulator(noise, ref.n_items, ref.k, rng)
    widths, logb, reach, identified = [], [], [], 0
    for i in range(n_sweeps):
        r0_i, a_i = sim.items(noise.A, noise.R0)
        r0_obs = sim.r0(r0_i)
        f_r = _fit(sim.group("ref", ref, r0_i, a_i, r0_obs, noise.B, mid_steps), n_boot, i)
        f_v = _fit(sim.group("var", var, r0_i, a_i, r0_obs, noise.B, mid_steps,
                             noise=var_noise), n_boot, i)
        if not all(x is not None and x.identified for x in (f_r[0], f_v[0])):
            continue
        identified += 1
        (lo, hi), (b_lo, b_hi) = effect_intervals(f_v[1], f_r[1])
        if np.isfinite(lo) and np.isfinite(hi):
            widths.append(hi - lo)
            reach.append(max(abs(lo), abs(hi)))
        if np.isfinite(b_lo) and np.isfinite(b_hi) and b_lo > 0:
            logb.append(np.log(b_hi) - np.log(b_lo))
    def q(v, p):
        return float(np.quantile(v, p)) if v else float("nan")
    med = q(widths, 0.5)
    return {"identified_rate": identified / n_sweeps if n_sweeps else float("nan"),
            "dA_width": med, "dA_width_p10": q(widths, 0.1), "dA_width_p90": q(widths, 0.9),
            "p_within_1.5x": float(np.mean([med / 1.5 <= x <= 1.5 * med for x in widths]))
            if widths else float("nan"),
            "B_log_width": q(logb, 0.5), "equiv_margin80": q(reach, 0.8)}


def predict(groups: list[Group], pilot: PilotNoise, n_sweeps: int = 100, seed: int = 0,
            margin: float = DEFAULT_MARGIN, reference: str = REFERENCE,
            n_boot: int = 400) -> pd.DataFrame:
    """One row per comparison (variant vs reference at a scale) of the schedule ``groups``:
    predicted median widths, identified rate, smallest resolvable dA, tightest equivalence."""
    by_scale: dict[str, dict[str, Group]] = {}
    for g in groups:
        by_scale.setdefault(g.scale, {})[g.variant] = g
    cache: dict[tuple, dict] = {}
    rows = []
    for scale, members in sorted(by_scale.items()):
        ref = members.get(reference)
        if ref is None:
            continue
        for name, var in sorted(members.items()):
            if name == reference:
                continue
            key = (ref.steps, ref.every, ref.seeds, var.steps, var.every, var.seeds, ref.n_items,
                   ref.k)
            pn = pilot.for_scale(scale)
            own = pilot.for_variant(name, scale)
            key = (scale if pn is not pilot else None, name if own else None) + key  # its noise
            if key not in cache:
                cache[key] = simulate_widths(ref, var, pn.noise, pn.mid_steps, n_sweeps,
                                             seed, n_boot, var_noise=own)
            w = cache[key]
            extra = ({"noise": "own" if own else "reference"} if pilot.by_variant else {})
            rows.append({**extra, "scale": scale, "variant": name, "vs": reference,
                         "seeds": f"{ref.seeds}+{var.seeds}", "steps": f"{ref.steps}/{var.steps}",
                         "eval": f"{ref.n_items}x{ref.k}", **w,
                         "B_ratio_factor": float(np.exp(w["B_log_width"] / 2)),
                         "mde_A": max(MDE_FACTOR * w["dA_width"], margin)
                         if np.isfinite(w["dA_width"]) else float("nan")})
    cols = ["scale", "variant", "vs", "seeds", "steps", "eval", "identified_rate", "dA_width",
            "dA_width_p10", "dA_width_p90", "p_within_1.5x", "B_log_width", "B_ratio_factor",
            "mde_A", "equiv_margin80"]
    return pd.DataFrame(rows, columns=cols + (["noise"] if pilot.by_variant else []))


def budget_options(ref: Group, seeds=(2, 3, 4, 6, 8), step_factors=(1.0, 1.5, 2.0),
                   item_factors=(1, 2)) -> list[tuple[Group, float]]:
    """Candidate budgets around ``ref`` with their cost in units of ``ref``'s cost (train steps x
    seeds, plus the evals' generated sequences, items x samples).

    The eval share is measured (LOG.md, session 6, `sweeps/pilot-grpo-seeds.yaml` at idle):
    evaluating 1024 sequences per set (both sets) every 10 steps cost 0.9x the train steps'
    time (55 s of evals vs 60 s of 150 steps at tiny-1m)."""
    def cost(g: Group) -> float:  # train steps, plus evals: 0.9 x per 1024 sequences / 10 steps
        return g.seeds * g.steps * (1 + 0.9 * g.n_items * g.k / 1024 * 10 / g.every)

    out = []
    for s in seeds:
        for fs in step_factors:
            for fi in item_factors:
                steps = int(round(ref.steps * fs / ref.every)) * ref.every
                g = replace(ref, seeds=s, steps=steps, n_items=int(ref.n_items * fi))
                out.append((g, cost(g) / cost(ref)))
    return out


def budget_table(ref: Group, pilot: PilotNoise, target_width: float, n_sweeps: int = 60,
                 seed: int = 0, n_boot: int = 300, options=None) -> pd.DataFrame:
    """Predicted dA width of a single-choice comparison at each candidate budget (both arms
    at that budget), cheapest first, with ``reaches`` = width <= target."""
    rows = []
    pn = pilot.for_scale(ref.scale)
    for g, cost in options or budget_options(ref):
        w = simulate_widths(g, g, pn.noise, pn.mid_steps, n_sweeps, seed, n_boot)
        rows.append({"seeds": g.seeds, "steps": g.steps, "every": g.every,
                     "eval": f"{g.n_items}x{g.k}", "cost": cost, **w,
                     "reaches": bool(np.isfinite(w["dA_width"]) and w["dA_width"] <= target_width
                                     and w["identified_rate"] >= 0.8)})
    return pd.DataFrame(rows).sort_values(["cost", "dA_width"]).reset_index(drop=True)


def planned_vs_achieved(plan: dict, effects: pd.DataFrame) -> pd.DataFrame:
    """The spec's pre-registered widths (``plan: {comparisons: {"variant @ scale": {dA_width:
    ...}}}``) beside the widths the study achieved, with their ratio (achieved / predicted)."""
    comps = (plan or {}).get("comparisons") or {}
    rows = []
    for rec in effects.to_dict("records"):
        label = f"{rec['variant']} @ {rec['scale']}"
        pred = comps.get(label) or {}
        achieved = rec["dA_hi"] - rec["dA_lo"]
        p = float(pred.get("dA_width", np.nan))
        lo, hi = (float(pred.get(k) if pred.get(k) is not None else np.nan)
                  for k in ("dA_width_p10", "dA_width_p90"))
        rows.append({"comparison": label, "predicted_dA_width": p, "achieved_dA_width": achieved,
                     "ratio": achieved / p if np.isfinite(p) and p > 0 else np.nan,
                     "predicted_80pct": f"{lo:.3f}-{hi:.3f}" if np.isfinite(lo) else "",
                     "in_80pct": (bool(lo <= achieved <= hi) if np.isfinite(lo) and np.isfinite(hi)
                                  else None), "verdict": rec["verdict"]})
    return pd.DataFrame(rows, columns=["comparison", "predicted_dA_width", "achieved_dA_width",
                                       "ratio", "predicted_80pct", "in_80pct", "verdict"])


def pilot_from_dir(pilot_dir: str | None, reference: str, eval_set: str,
                   groups: list[Group], per_variant: bool = False,
                   match: bool = True, up_to_step: int | None = None) -> PilotNoise:
    """The pilot's noise (:func:`noise_from_fits` on a results tree), or, without a pilot, the
    calibration's defaults with C_mid at ``mid_frac`` of the reference's steps (and a note).
    ``per_variant``: every other arm the pilot ran also gets its own noise
    (:func:`with_variant_noise`). ``match``: the noise matched to the per-run scatter
    (analysis/scatter.py). ``up_to_step``: the pilot's runs as they stood at that step
    (``load_results(up_to_step=)``): a sequential design's first look, planning the rest of its
    runs from what that look saw. ValueError when the cut leaves every run as it is."""
    if pilot_dir is None:
        ref = next((g for g in groups if g.variant == reference), None)
        steps = ref.steps if ref else 150
        nz = NoiseModel()
        return PilotNoise(nz, ("no pilot: NoiseModel defaults (the old demo's scale); run a "
                               "pilot and pass --pilot for a real plan",), nz.mid_frac * steps)
    from analysis.load import load_results
    results = load_results(pilot_dir, up_to_step=up_to_step)
    if results.runs.empty:
        raise FileNotFoundError(f"no run directories under {pilot_dir}")
    if up_to_step is None:
        return pilot_from_results(results, reference, eval_set, per_variant, match)
    last = int(load_results(pilot_dir, train_keys=()).evals["step"].max())
    if up_to_step >= last:
        raise ValueError(f"--pilot-up-to-step {up_to_step} cuts nothing: the pilot's runs "
                         f"end at step {last} (give a step below it, or leave it out)")
    out = pilot_from_results(results, reference, eval_set, per_variant, match)
    return replace(out, notes=(f"pilot cut at step {up_to_step} (its runs as they stood then; "
                               f"they ran to {last})",) + tuple(out.notes))


def pilot_from_results(results, reference: str, eval_set: str, per_variant: bool = False,
                       match: bool = True) -> PilotNoise:
    """:func:`pilot_from_dir` on loaded results (``analysis.load.Results``, e.g. a sequential
    look's runs cut at its step): per-run fits of every arm, the reference's noise, and with
    ``per_variant`` each other arm's own."""
    from analysis.fit import FitWindow
    from analysis.groups import fit_all, pilot_axes
    fits = fit_all(results, pilot_axes(results), window=FitWindow(), n_boot=0, per_run=True)
    ev = results.evals[results.evals["eval_set"] == eval_set]
    k = int(np.nanmedian(ev["k"])) if len(ev) and ev["k"].notna().any() else 4
    out = noise_from_fits(fits, reference, eval_set, k=k, match=match)
    return (with_variant_noise(out, fits, reference, eval_set, k=k, match=match) if per_variant
            else out)


def write_plan(spec_path, table: pd.DataFrame, pilot: PilotNoise, args,
               wall_s: float | None = None, claims: pd.DataFrame | None = None) -> None:
    """Pre-register: replace the spec's top-level ``plan:`` block (or insert one after the header
    comments) with the predictions (and ``est_wall_min``, analysis/wall.py, when the pilot was
    timed; ``claims``, analysis/plan_claims.py: each claim verdict's simulated rate by kind and
    truth). Comments and every other key are kept as written."""
    import datetime

    import yaml
    from pathlib import Path

    comps = {f"{r['variant']} @ {r['scale']}": {
        k: (round(float(r[k]), 4) if np.isfinite(r[k]) else None)
        for k in ("dA_width", "dA_width_p10", "dA_width_p90", "B_ratio_factor", "mde_A",
                  "equiv_margin80", "identified_rate") if k in r}
        for r in table.to_dict("records")}
    nz = pilot.noise
    block = {"plan": {
        "written": datetime.date.today().isoformat(),
        "by": f"rlablate plan --pilot {args.pilot} --sweeps {args.sweeps} --seed {args.seed}"
              + (f" --pilot-up-to-step {args.pilot_up_to_step}"
                 if getattr(args, "pilot_up_to_step", None) is not None else "")
              + (" --per-variant-noise" if pilot.by_variant else "")
              + ("" if getattr(args, "match", True) else " --raw-noise"),
        "noise": {"R0": round(nz.R0, 4), "A": round(nz.A, 4), "B": round(nz.B, 4),
                  "C_mid_steps": round(pilot.mid_steps, 1), "seed_sd_A": round(nz.seed_sd_A, 4),
                  "seed_sd_logB": round(nz.seed_sd_logB, 4),
                  "item_spread": round(nz.item_spread, 4),
                  "wobble_sd": round(nz.wobble_sd, 4),
                  "wobble_rho_step": round(nz.wobble_rho_step, 4)},
        "comparisons": comps}}
    if wall_s is not None:
        block["plan"]["est_wall_min"] = round(wall_s / 60, 1)
    if pilot.by_variant:  # the arms planned with their own measured noise
        block["plan"]["noise_by_variant"] = {
            f"{v} @ {sc}": {f: round(float(getattr(nv, f)), 4) for f in VARIANT_NOISE}
            for (v, sc), nv in pilot.by_variant}
    if claims is not None and len(claims):
        block["plan"]["claims"] = {f"{r['verdict']} ({r['kind']}, {r['truth']})": round(
            float(r["rate"]), 3) for r in claims.to_dict("records")}
    text = yaml.safe_dump(block, sort_keys=False, width=100)
    path = Path(spec_path)
    lines = path.read_text().splitlines(keepends=True)
    out, skipping = [], False
    for line in lines:  # drop an old top-level plan block
        if line.startswith("plan:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        out.append(line)
    head = 0
    while head < len(out) and (out[head].startswith("#") or not out[head].strip()):
        head += 1
    path.write_text("".join(out[:head]) + text + "".join(out[head:]))

