"""The planner's part of a report (analysis/plan.py is the planner): the noise a finished study's
own reference runs measured, the calibration's truth built from it, the planner's predictions for
the design that ran beside the widths it achieved, and the report section that prints them."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from analysis.simulate import NoiseModel
from analysis.plan import (MEASURED_NOISE, PilotNoise, noise_from_fits, planned_vs_achieved,
                           predict)


def study_noise(fits, reference: str, primary: str, schedule) -> PilotNoise | None:
    """The noise a study's own reference runs measure (:func:`noise_from_fits` with the
    schedule's samples per item), or None where the study has no fitted reference."""
    groups = list(schedule or ())
    if not groups:
        return None
    ref = [g for g in groups if g.variant == reference]
    try:
        return noise_from_fits(fits, reference, primary, k=(ref or groups)[0].k)
    except ValueError:
        return None


def with_measured_noise(base: NoiseModel, pilot: PilotNoise | None,
                        ref_steps: int | None = None, claim_data: dict | None = None
                        ) -> NoiseModel:
    """``base`` (the simulated truth) with the noise ``pilot`` measured: seed sd of A and log B,
    item spread, within-run wobble (:data:`MEASURED_NOISE`). With ``ref_steps`` (the reference
    group's steps) and an identified reference fit, the null truth becomes the measured curve
    too: A, B and C_mid (as a fraction of ``ref_steps``). ``claim_data`` (a study's
    :func:`analysis.claims.claim_inputs`): the seed claims' noise as its runs measured it
    (:func:`analysis.calibrate_claims.measured_claim_noise`). ``base`` itself without either."""
    if claim_data:
        from analysis.calibrate_claims import measured_claim_noise
        base = replace(base, **measured_claim_noise(claim_data))
    if pilot is None:
        return base
    out = replace(base, **{f: getattr(pilot.noise, f) for f in MEASURED_NOISE})
    if ref_steps and pilot.identified and np.isfinite(pilot.mid_steps) and pilot.mid_steps > 0:
        out = replace(out, A=pilot.noise.A, B=pilot.noise.B, mid_frac=pilot.mid_steps / ref_steps)
    return out


def plan_tables(opt, fits, effects, primary, specs, schedule, pilot: PilotNoise | None = None,
                achieved_wall_s: float | None = None,
                achieved_runs: tuple[int, int] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The planner's predictions for this study's own schedule and noise, and the spec's
    pre-registered widths beside the achieved ones (analysis.plan). ``schedule``: the study's
    groups as it ran them (:func:`analysis.schedule.schedule_from_results`: steps, eval interval,
    seeds, eval items and samples per item), so the prediction simulates the design that ran;
    ``pilot``: the noise its reference runs measured (:func:`study_noise`; measured here when
    not given). ``achieved_wall_s``: what the sweep took (analysis.wall.achieved_wall), printed
    beside the plan's ``est_wall_min``; ``achieved_runs``: (runs the sweep submitted, runs in
    the study), so that a sweep that skipped finished runs is not timed against the plan for all
    of them."""
    planned = pd.DataFrame()
    for spec in specs:
        if spec.get("plan") and len(effects):
            planned = planned_vs_achieved(spec["plan"], effects)
            planned.attrs["wall"] = (spec["plan"].get("est_wall_min"), achieved_wall_s)
            planned.attrs["wall_runs"] = achieved_runs or (None, None)
    if opt.plan <= 0 or not schedule:
        return pd.DataFrame(), planned
    groups = list(schedule)
    pilot = pilot or study_noise(fits, opt.reference, primary, schedule)
    if pilot is None:
        return pd.DataFrame(), planned
    table = predict(groups, pilot, opt.plan, opt.seed, opt.margin, opt.reference)
    if len(effects) and len(table):
        ach = effects.assign(achieved_dA_width=effects["dA_hi"] - effects["dA_lo"])
        table = table.merge(ach[["scale", "variant", "achieved_dA_width", "verdict"]],
                            on=["scale", "variant"], how="left")
        table["ratio"] = table["achieved_dA_width"] / table["dA_width"]
        table["in_80pct"] = table["achieved_dA_width"].between(table["dA_width_p10"],
                                                               table["dA_width_p90"])
    table.attrs["notes"] = pilot.notes  # after the merge, which drops attrs
    return table, planned


def planner_section(r, table: pd.DataFrame, planned: pd.DataFrame, opt) -> None:
    """The report's planner section (``r``: an analysis.report.Report)."""
    r.h("What this design can resolve (power planner)")
    if len(planned):
        ok = planned["ratio"].between(1 / 1.5, 1.5)
        r.p(f"Pre-registered in the sweep spec (`plan:`, written by `rlablate plan` before the "
            f"runs) vs achieved: {int(ok.sum())} of {int(planned['ratio'].notna().sum())} "
            "achieved dA widths within a factor 1.5 of the prediction"
            + (f"; {int(planned['in_80pct'].eq(True).sum())} of "
               f"{int(planned['in_80pct'].notna().sum())} inside the predicted 80% range (10th-"
               "90th percentile of the simulated widths)" if planned["in_80pct"].notna().any()
               else "") + ".")
        r.table(planned)
        est, took = planned.attrs.get("wall", (None, None))
        done, total = planned.attrs.get("wall_runs", (None, None))
        if est is not None and took is not None and done is not None and done < total:
            r.p(f"Pre-registered wall (`est_wall_min`, analysis/wall.py): {est:.1f} min for all "
                f"{total} runs; this sweep submitted {done} of them (the others had finished "
                f"before and were skipped) and took {took / 60:.1f} min, so the two are not "
                f"compared.")
        elif est is not None and took is not None:
            r.p(f"Pre-registered wall (`est_wall_min`, analysis/wall.py): {est:.1f} min; the "
                f"runs took {took / 60:.1f} min (first job record to the last run's summary; "
                f"ratio {took / 60 / est:.2f}).")
    if table is None or table.empty:
        r.p("No planner predictions in this run (`--plan 0`, or no fitted reference); "
            "`rlablate plan SPEC --pilot DIR` predicts them for a sweep spec.")
        return
    r.p(f"{opt.plan} simulated sweeps per comparison with this study's own schedule and the "
        f"noise measured on its reference `{opt.reference}` ("
        + "; ".join(table.attrs.get("notes", ())) + "), analysed with this report's fits and "
        "bootstrap. dA_width: median 95% width of dA under no effect (dA_width_p10 / _p90: "
        "the simulated widths' 10th and 90th percentiles; p_within_1.5x: the share of simulated "
        "sweeps whose width lies within a factor 1.5 of the median, i.e. how often even a right "
        "plan meets that test); mde_A: the smallest |dA| "
        "a *moved A* verdict resolves with 80% power (never below the margin); equiv_margin80: "
        "the tightest margin a *no effect on A* verdict reaches in 80% of sweeps; ratio = "
        "achieved / predicted width. The noise is matched to the scatter of the reference's "
        "per-run fits (analysis/scatter.py; the note above says how). Assumptions: the "
        "variant's noise equals the reference's, "
        "seed effects independent between variants (as measured: the design-choice table's "
        "`seed_rho_A`; over the committed studies it averages -0.02, so pairing by seed neither "
        "narrows nor widens on average), eval items shared by every run, compute proportional "
        "to the step.")
    r.table(table)
