"""Run the whole analysis of a results tree and write the report files.

    python -m analysis results/my_sweep --out results/my_sweep/analysis

``run_analysis(options)`` loads the runs, fits every group and run (ScaleRL curve, arXiv
2510.13786) with bootstrap CIs, ranks variants with ScaleRL's A-then-B rule, checks
extrapolation, computes OXRL-style gains and spreads (arXiv 2603.19335), ranks across scale and
the eval-set resolution, then writes into ``out``: report.md, report.html (self-contained, PNGs
embedded as base64), leaderboard.csv, fits.csv, comparisons.csv, gains.csv, extrapolation.csv
and the PNG figures.
"""
from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import plots
from analysis.claims import claim_inputs, decide_claims
from analysis.effects import REFERENCE, choice_effects
from analysis.resolve import CLAIM_RULE, RULE as RESOLVE_RULE, attach_effect_budget
from analysis.compare import (DEFAULT_MARGIN, attach_seed_pairing, check_extrapolation,
                              resolvable_difference, seed_pairing, seed_pairing_summary)
from analysis.fit import FitWindow
from analysis.groups import (assign_groups, detect_axes, final_points, fit_all, fits_table,
                             scale_sort_key, summarise_groups)
from analysis.leaderboard import (IN_DIST, rank_across_scales, rank_gains_across_scales,
                                  rank_groups, spread_of_gains, summarise_gains)
from analysis.frames import write_frame
from analysis.load import load_results, numerics_line
from analysis.options import check_against_results
from analysis.trust import (attach_claim_false_positive, attach_false_positive,
                            calibration_section, claim_trust)


@dataclass
class AnalysisOptions:
    """Everything ``rlablate analyze`` can be told (see analysis/cli.py for the flags)."""

    results_dir: str
    out: str | None = None
    by: list[str] | None = None
    fit_start: float | None = None
    fit_start_step: int | None = None
    n_boot: int = 1000
    boot_method: str = "auto"
    seed: int = 0
    eval_set: str | None = None
    margin: float = DEFAULT_MARGIN
    extrapolate: float = 0.5
    seed_col: str | None = None
    scale_col: str | None = None
    per_run: bool = True
    reference: str = REFERENCE
    reference_explicit: bool = False  # given by the user: then it must name a variant
    calibrate: int = 0  # simulated sweeps per calibration cell (the CLI default is 200)
    plan: int = 0  # simulated sweeps per comparison of the planner section (CLI default 40)
    halving_replay: list[int] | None = None  # rungs: replay successive halving on the runs
    halving_rule: str = "bound"  # the replayed rule: "bound" or "resolved" (analysis/halving.py)
    up_to_step: int | None = None  # every run as it stood at this step (an interim look)
    progress: object = None  # callable(str): one line per stage (the CLI prints them to stderr)


@dataclass
class Report:
    """Ordered blocks (heading, paragraph, table, image) rendered to Markdown and HTML."""

    blocks: list[tuple] = field(default_factory=list)

    def h(self, text: str, level: int = 2):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def table(self, df: pd.DataFrame):
        self.blocks.append(("table", df))

    def image(self, path: Path, alt: str):
        self.blocks.append(("img", Path(path), alt))

    def to_markdown(self) -> str:
        out = []
        for block in self.blocks:
            if block[0] == "h":
                out.append("#" * block[1] + " " + block[2])
            elif block[0] == "p":
                out.append(block[1])
            elif block[0] == "table":
                out.append(format_markdown_table(block[1]))
            else:
                out.append(f"![{block[2]}]({block[1].name})")
        return "\n\n".join(out) + "\n"

    def to_html(self) -> str:
        body = []
        for block in self.blocks:
            if block[0] == "h":
                body.append(f"<h{block[1]}>{_inline_md(block[2])}</h{block[1]}>")
            elif block[0] == "p":  # Markdown (bold, code, links, lists) rendered, HTML escaped
                body.append(_md(block[1]))
            elif block[0] == "table":
                body.append(_format_frame(block[1]).to_html(index=False, border=0,
                                                           na_rep="", escape=True))
            else:
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                body.append(f'<figure><img alt="{html.escape(block[2])}" '
                            f'src="data:image/png;base64,{data}"/>'
                            f"<figcaption>{html.escape(block[2])}</figcaption></figure>")
        style = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
                 "table{border-collapse:collapse;font-size:13px;margin:0.5em 0}"
                 "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
                 "img{max-width:100%}")
        return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>rlablate analysis"
                f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _md(text: str) -> str:
    """A report paragraph (Markdown) as HTML, with any raw HTML in it escaped first."""
    import markdown  # a dependency of tensorboard; Python-Markdown
    return markdown.markdown(html.escape(text, quote=False), extensions=["sane_lists"])


def _inline_md(text: str) -> str:
    out = _md(text)
    return out[3:-4] if out.startswith("<p>") and out.endswith("</p>") else out


# columns that count things: an integer-valued float (NaN elsewhere in the column) prints as 7
INT_COLUMNS = ("rank", "n_runs", "n_items", "n_points", "k", "step", "final_step", "claim")


def _fmt(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            return ""
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.3f}"
    return "" if value is None else str(value)


def _as_ranks(df: pd.DataFrame) -> pd.DataFrame:
    """A rank table (variant x scale): ranks print as 1, 2, ... (not 1.000)."""
    return df.apply(lambda col: col if col.name == "variant" else col.map(
        lambda v: str(int(v)) if isinstance(v, (int, float, np.integer, np.floating))
        and np.isfinite(v) and float(v).is_integer() else _fmt(v)))


def _format_frame(df: pd.DataFrame) -> pd.DataFrame:
    if not len(df):
        return df
    def fmt_col(col):
        if str(col.name) in INT_COLUMNS or str(col.name).startswith(("rank_", "n_")):
            return col.map(lambda v: str(int(v)) if isinstance(v, (float, np.floating))
                           and np.isfinite(v) and float(v).is_integer() else _fmt(v))
        return col.map(_fmt)
    return df.apply(fmt_col)


def format_markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (floats to 3 decimals or 3 significant digits)."""
    if df is None or df.empty:
        return "_(none)_"
    cells = _format_frame(df).astype(str).map(lambda s: s.replace("|", "\\|").replace("\n", " "))
    lines = ["| " + " | ".join(map(str, df.columns)) + " |",
             "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells.itertuples(index=False)]
    return "\n".join(lines)


def run_analysis(opt: AnalysisOptions) -> dict:
    """Do the analysis and write every output file; returns a dict of the tables and paths."""
    root = Path(opt.results_dir)
    out = Path(opt.out) if opt.out else root / "analysis"
    results = load_results(root, up_to_step=opt.up_to_step)
    if results.runs.empty:
        raise FileNotFoundError(f"no run directories under {root}")
    axes = detect_axes(results, opt.by, opt.seed_col, opt.scale_col)
    check_against_results(opt.eval_set, results.evals["eval_set"].dropna().unique(),
                          opt.reference if opt.reference_explicit else None,
                          assign_groups(results, axes)["variant"])
    out.mkdir(parents=True, exist_ok=True)  # only now: a bad option leaves nothing behind
    say = opt.progress or (lambda msg: None)
    say(f"loaded {len(results.runs)} runs, {len(results.evals)} eval rows; fitting "
        f"({opt.n_boot} bootstrap replicates per fit)")
    window = FitWindow(start_fraction=opt.fit_start, start_step=opt.fit_start_step)
    fits = fit_all(results, axes, window=window, n_boot=opt.n_boot, seed=opt.seed,
                   method=opt.boot_method, per_run=opt.per_run)
    runs = assign_groups(results, axes)
    finals = final_points(results, runs)
    groups = summarise_groups(finals)
    sets = sorted(results.evals["eval_set"].dropna().unique())
    primary = opt.eval_set or (IN_DIST if IN_DIST in sets else (sets[0] if sets else IN_DIST))
    board, comps = rank_groups(fits, groups, primary, opt.margin)
    gains = summarise_gains(groups, fits)
    spreads = spread_of_gains(gains, primary)
    ranks, taus, flips = rank_across_scales(board, opt.margin) if len(board) else (
        pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    extrap = pd.DataFrame([dict(check_extrapolation(g.curve, opt.extrapolate, window),
                                scale=g.scale, variant=g.variant)
                           for g in fits if g.level == "group" and g.eval_set == primary
                           and g.curve.runs])
    fits_df = fits_table(fits)
    effects = attach_effect_budget(choice_effects(fits, runs, primary, opt.reference, opt.margin),
                                   fits, primary, opt.margin)
    claim_data = claim_inputs(runs, results.train, finals, primary, seed_col=axes.seed)
    claims = decide_claims(claim_data, effects)
    from analysis.schedule import schedule_from_results
    schedule = schedule_from_results(runs, results.evals, primary)  # the design as it ran
    from analysis.plan_report import plan_tables, study_noise, with_measured_noise
    measured = study_noise(fits, opt.reference, primary, schedule)  # this study's own noise
    calibration = pd.DataFrame()
    if opt.calibrate > 0:
        say(f"calibrating the verdicts ({opt.calibrate} simulated sweeps per cell)")
        from analysis.calibrate import NoiseModel, calibrate
        r0 = float(finals.loc[finals["eval_set"] == primary, "r0"].mean()) if len(finals) else np.nan
        ref_steps = max((g.steps for g in schedule if g.variant == opt.reference), default=None)
        noise = with_measured_noise(NoiseModel(R0=r0) if np.isfinite(r0) and 0 < r0 < 0.9
                                    else NoiseModel(), measured, ref_steps, claim_data)
        calibration = calibrate(schedule, noise, opt.calibrate, opt.seed, opt.margin,
                                opt.reference)
        calibration.attrs["noise"] = noise
        calibration.attrs["measured"] = (measured is not None, bool(measured and measured.identified))
        effects = attach_false_positive(effects, calibration)
        claims = attach_claim_false_positive(claims, calibration)
    effects = attach_seed_pairing(effects, seed_pairing(fits, runs, primary, opt.reference, axes.seed))
    from analysis.wall import achieved_wall, submitted_runs
    plan_table, planned = plan_tables(opt, fits, effects, primary, _sweep_specs(root), schedule,
                                      measured, None if opt.up_to_step else achieved_wall(root),
                                      (submitted_runs(root), runs["run_id"].nunique()))
    from analysis.paradigms import oxrl_tables
    oxrl = oxrl_tables(finals, runs, axes, primary, opt)
    from analysis.halving import halving_table
    halving = halving_table(root, opt, primary, say)  # replayed (--halving-replay) or as run
    from analysis.runaway import runaway_tables
    runaways = runaway_tables(runs, results.train, axes.seed, fits_df, primary)
    tables = {"finals": finals, "leaderboard": board, "fits": fits_df, "comparisons": comps, "gains": gains,
              "spreads": spreads, "extrapolation": extrap, "ranks": ranks, "kendall": taus,
              "inversions": flips, "effects": effects, "claims": claims,
              "calibration": calibration, "plan": plan_table, "planned": planned, "halving": halving,
              "runaways": runaways, **oxrl}
    for name in ("leaderboard", "fits", "comparisons", "gains", "extrapolation", "effects",
                 "claims", "runaways") + tuple(oxrl) + (("calibration",) if len(calibration) else ()) + (
                     ("plan",) if len(plan_table) else ()) + (("planned",) if len(planned) else ()) + (
                     ("halving",) if len(halving) else ()):
        write_frame(tables[name], out / f"{name}.csv")  # an empty table keeps a header line
    # the claims' per-run inputs, so that `rlablate combine` can decide them over replications
    (out / "claim_inputs.json").write_text(json.dumps(claim_data, indent=1) + "\n")
    say(f"writing tables, figures and the report into {out}")
    figures = {f"curves_{s}": plots.plot_curves(fits, s, out / f"curves_{s}.png") for s in sets}
    figures["extrapolation"] = plots.plot_extrapolation(fits, primary, opt.extrapolate, window,
                                                        out / "extrapolation.png")
    figures["leaderboard"] = plots.plot_leaderboard(board, out / "leaderboard.png", opt.margin)
    figures["gains"] = plots.plot_gains(gains, out / "gains.png")
    if len(ranks) and ranks.shape[1] > 2:
        figures["ranks"] = plots.plot_ranks(ranks, taus, out / "ranks.png")
    from analysis.interactive import write_page
    try:
        interactive = write_page(out / "interactive.html", fits, tables,
                                 [primary] + [s for s in sets if s != primary])
    except ImportError as exc:  # plotly is a dependency; an old venv may lack it: say so, go on
        interactive = None
        say(f"interactive.html not written: {exc} (pip install plotly, or make setup)")
    report = build_report(opt, results, axes, runs, window, primary, sets, tables, figures)
    (out / "report.md").write_text(report.to_markdown())
    (out / "report.html").write_text(report.to_html())
    return {"out": out, "tables": tables, "figures": figures, "results": results, "axes": axes,
            "interactive": interactive}


def _sweep_specs(root: Path) -> list[dict]:
    """The sweep specs saved with the runs (`<sweep dir>/spec.yaml`), for their name and
    description (what the sweep chose to run, and why)."""
    import yaml
    out = []
    for path in [root / "spec.yaml", *sorted(root.glob("*/spec.yaml"))]:
        try:
            spec = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(spec, dict):
            out.append(spec)
    return out


def _finals_note(results, finals: pd.DataFrame) -> str:
    """Which step the "final" pass rates are read at, per scale (see `final_points`)."""
    if finals.empty:
        return "No final pass rates (no eval rows)."
    longest = results.evals.groupby(["sweep", "run_id"])["step"].max()
    parts = []
    for scale, f in finals.groupby(finals["scale_value"].astype(str)):
        step = int(f["final_step"].max())
        longer = {r for r in zip(f["sweep"], f["run_id"]) if longest.get(r, step) > step}
        parts.append(f"{scale}: step {step}" + (
            f" ({len(longer)} longer runs contribute their later evals to the curve fits only)"
            if longer else ""))
    return ("Final pass rates (leaderboard `final`, gains, claim 4) are compared at matched "
            "training: the last eval at or before the step every run of the scale reached. "
            + "; ".join(parts) + ".")


def build_report(opt, results, axes, runs, window, primary, sets, t, figures) -> Report:
    """Assemble the report's sections from the computed tables."""
    r = Report()
    r.h("rlablate analysis", 1)
    status = runs["status"].value_counts().to_dict()
    r.p(f"Results: `{opt.results_dir}`: {len(runs)} runs ({', '.join(f'{k}: {v}' for k, v in status.items())}), "
        f"{len(results.evals)} eval rows, eval sets: {', '.join(sets)}. "
        f"Variant axes: {', '.join(axes.variant) or '(none)'}; scale axis: {axes.scale or '(none)'}; "
        f"seed axis: {axes.seed or '(none)'}." + (f" **Every run as it stood at step {opt.up_to_step}"
                                                  "** (`--up-to-step`: its later rows are left out)."
                                                  if opt.up_to_step else ""))
    r.p(numerics_line(runs))
    if results.shared_settings:
        r.p("Every run sets " + ", ".join(f"`{d}`" for d in results.shared_settings)
            + " (the study's setting, left out of the variant labels).")
    for spec in _sweep_specs(Path(opt.results_dir)):
        r.p(f"Sweep `{spec.get('name', '?')}`: {spec.get('description') or '(no description)'}")
    r.p(f"Curve: R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (ScaleRL, arXiv 2510.13786), R0 fixed "
        f"to the step-0 eval; compute C in training FLOPs. Fit window: {window.describe()}. "
        f"Bootstrap: {opt.n_boot} replicates, method {opt.boot_method}, seed {opt.seed}; 95% "
        f"percentile CIs widened for few resampled units. Comparison margin on A: {opt.margin}.")
    r.p(_finals_note(results, t["finals"]))
    r.h(f"Leaderboard ({primary})")
    cols = ["scale", "rank", "variant", "n_runs", "A", "A_lo", "A_hi", "B", "B_lo", "B_hi",
            "C_mid", "R0", "final", "final_se", "identified", "ci_method", "note"]
    r.table(t["leaderboard"].reindex(columns=cols))
    r.image(figures["leaderboard"], "Asymptote A and exponent B with 95% CIs, per scale")
    r.h("Comparisons (ScaleRL rule)")
    comps = t["comparisons"]
    if len(comps):
        n_a, n_b = int((comps["decided_by"] == "A").sum()), int((comps["decided_by"] == "B").sum())
        r.p(f"Neighbours in the leaderboard, compared by the ScaleRL rule: {n_a} decided by A "
            f"(|dA| >= {opt.margin}), {n_b} decided by B (A within the margin, refit at the shared "
            f"A). The rule compares point estimates, as ScaleRL does; A_cis_overlap says whether "
            f"the two 95% bootstrap intervals of A overlap (if they do, the order by A is not "
            f"resolved by these runs). final_resolved says whether their final pass rates differ "
            f"by more than 1.96*sqrt(se1^2 + se2^2).")
        for rec in comps.itertuples():
            r.p(f"- {rec.scale}: {rec.first} vs {rec.second}: decided by {rec.decided_by}; "
                f"{rec.detail}")
        r.table(comps.drop(columns=["detail"]))
    else:
        r.p("No pair of fitted groups to compare.")
    for name in [f"curves_{s}" for s in sets]:
        r.image(figures[name], f"Pass rate vs compute with fits ({name[7:]})")
    _effects_section(r, t["effects"], opt, primary)
    r.h("Extrapolation check")
    r.p(f"Each group is fitted on compute <= {opt.extrapolate:.0%} of its largest compute and "
        "predicts the later seed-mean points; rmse and max_abs_error are the prediction errors "
        "(pass-rate units), dA = A(first part) - A(all points).")
    r.table(t["extrapolation"].reindex(columns=["scale", "variant", "n_fit", "n_heldout", "rmse",
                                                "max_abs_error", "A_partial", "A_full", "dA",
                                                "message"]))
    r.image(figures["extrapolation"], "Fits on the first part of compute, extended")
    r.h("In-distribution vs held-out gains (OXRL)")
    r.p("gain = final pass rate - base (R0, the step-0 eval), mean over seeds with a 95% t "
        "interval; fit_gain = A - R0 with the bootstrap CI of A. Spread = max - min of the gain "
        "across variants per eval set; ratio = in-distribution spread / this set's spread "
        "(OXRL, arXiv 2603.19335: 19.33 pp on GSM8K vs 0.54 pp on MATH).")
    r.table(t["gains"].reindex(columns=["scale", "variant", "eval_set", "n_runs", "base", "final",
                                        "gain", "gain_lo", "gain_hi", "fit_gain", "fit_gain_lo",
                                        "fit_gain_hi"]))
    r.table(t["spreads"])
    r.image(figures["gains"], "Gain over the base model per eval set")
    r.h("Rank across model scale")
    if len(t["ranks"]) and t["ranks"].shape[1] > 2:
        r.table(_as_ranks(t["ranks"]))
        r.table(t["kendall"])
        flips = t["inversions"]
        r.p(f"{len(flips)} rank inversion(s) between scales"
            + (f", {int((~flips['within_margin']).sum())} with |dA| >= {opt.margin} at both "
               "scales." if len(flips) else "."))
        r.table(flips)
        r.image(figures["ranks"], "Rank of each variant across model scales")
    else:
        scales = sorted(t["gains"]["scale"].unique(), key=scale_sort_key) if len(t["gains"]) else []
        fitted = sorted(t["leaderboard"].dropna(subset=["rank"])["scale"].unique(),
                        key=scale_sort_key) if len(t["leaderboard"]) else []
        if len(scales) < 2:
            r.p("Only one model scale: no cross-scale ranking.")
        else:
            ranks, taus = rank_gains_across_scales(t["gains"], primary)
            r.p(f"Ranked (identified) fits exist at {len(fitted)} of {len(scales)} scales"
                + (f" ({', '.join(map(str, fitted))})" if fitted else "")
                + f", so the ranking across scales is by the gain on {primary} at matched training "
                "(1 = largest; ties share the better rank). Whether neighbouring gains differ by "
                "more than the eval set resolves: next section.")
            r.table(_as_ranks(ranks))
            r.table(taus)
    _resolution_section(r, results, t["gains"], primary)
    if "leverage" in t:
        from analysis.paradigms import report_section
        report_section(r, t, primary, _as_ranks)
    _claims_section(r, t["claims"])
    from analysis.runaway import runaway_section
    runaway_section(r, t["runaways"])
    calibration_section(r, t["calibration"], opt)
    from analysis.plan_report import planner_section
    planner_section(r, t["plan"], t["planned"], opt)
    if len(t["halving"]):
        from analysis.halving import halving_section
        halving_section(r, t["halving"])
    _problems_section(r, runs, t["fits"], results.issues)
    return r


def _effects_section(r: Report, effects: pd.DataFrame, opt, primary: str) -> None:
    r.h(f"Design choices: what moved the asymptote A, what only the efficiency B ({primary})")
    if effects.empty:
        r.p(f"No variant to compare with the reference `{opt.reference}` at a shared scale "
            "(`--reference` picks another).")
        return
    counts = effects["verdict"].value_counts().to_dict()
    r.p(f"Every variant against `{opt.reference}` at the same scale. `choices` lists the "
        "algorithm keys that differ. dA = A(variant) - A(reference) and B_ratio = B(variant) / "
        "B(reference), with 95% CIs from the two groups' bootstrap replicates, paired: replicate "
        "r of both groups resamples the same seeds (runs in seed order) and the same eval items, "
        "so an item's difficulty and the shared R0 cancel in the difference. Whether a seed's "
        "prompt stream carries over too is measured, not assumed: `seed_rho_A` is the "
        "correlation across the `seed_pairs` seeds of the variant's and the reference's per-run "
        "A (near 0: pairing by seed gains nothing, the interval is that of independent seeds, as "
        f"the calibration simulates them){seed_pairing_summary(effects)}. Verdict: *moved A* "
        f"if the dA interval excludes 0 and |dA| >= {opt.margin}; *only B* if the B_ratio "
        f"interval excludes 1 and the dA interval lies inside +-{opt.margin} (A shown not to "
        "move); *moved B, A not resolved* if B moved and A is neither; *no effect* if dA lies "
        f"inside +-{opt.margin} and B_ratio inside x1.25; *no effect on A* if dA lies inside "
        f"+-{opt.margin} and B is neither moved nor shown equal (an equivalence test on A: the "
        "whole 95% interval inside the margin); otherwise *not resolved* (the runs "
        "cannot tell), and always when either fit is not identified (see the leaderboard notes: "
        "A is then an extrapolation and its bootstrap interval is not one). "
        f"Here: {', '.join(f'{k}: {v}' for k, v in counts.items())}."
        + (" `fp_rate` (95% upper bound `fp_hi`): how often this verdict is given, at this "
           "comparison's schedule and this study's noise, when its truth does not hold (the "
           "calibration section)." if "fp_rate" in effects else "")
        + (" " + RESOLVE_RULE if "resolve_at" in effects and effects["resolve_at"].astype(bool).any()
           else ""))
    r.table(effects)


def _claims_section(r: Report, claims: pd.DataFrame) -> None:
    r.h("The seed claims at this scale")
    r.p("Each claim is decided from these runs alone, with its numbers; a claim that does not "
        "reproduce is reported as such (nothing was tuned until it did). Verdicts: reproduces / "
        "does not reproduce / not resolved (the intervals cannot tell) / not tested (the runs "
        "it needs are missing)." + (" " + CLAIM_RULE) * bool(claims["would_resolve"].any()))
    for rec in claims.to_dict("records"):
        r.p(f"{rec['claim']}. {rec['statement']}: **{rec['verdict']}**{claim_trust(rec)}"
            f". {str(rec['evidence']).rstrip('.')}"
            + (f". Budget: {str(rec['would_resolve']).rstrip('.')}" if rec.get("would_resolve")
               else "") + ".")


def _resolution_section(r: Report, results, gains: pd.DataFrame, primary: str) -> None:
    r.h("Eval-set resolution")
    ev = results.evals
    rows = []
    for eval_set, g in ev.groupby("eval_set"):
        se = float(np.nanmedian(g["stderr"])) if g["stderr"].notna().any() else np.nan
        rows.append({"eval_set": eval_set, "n_items": g["n_items"].median(), "median_se": se,
                     "resolvable_single_runs": float(resolvable_difference(se, se))})
    r.p("Standard error of one pass rate is sd(per-item score)/sqrt(N) (items are the sampling "
        "unit); two pass rates differ resolvably at 95% only if |diff| >= 1.96*sqrt(se1^2+se2^2).")
    r.table(pd.DataFrame(rows))
    sub = gains[gains["eval_set"] == primary]
    unresolved = []
    for scale, g in sub.groupby("scale"):
        g = g.sort_values("final", ascending=False).reset_index(drop=True)
        for i in range(len(g) - 1):
            a, b = g.iloc[i], g.iloc[i + 1]
            mrd = float(resolvable_difference(a["final_se"], b["final_se"]))
            unresolved.append({"scale": scale, "first": a["variant"], "second": b["variant"],
                               "final_diff": a["final"] - b["final"], "resolvable": mrd,
                               "verdict": "resolved" if a["final"] - b["final"] >= mrd
                               else "not resolved"})
    r.p(f"Neighbouring final pass rates on {primary} (seed means; se from eval noise only):")
    r.table(pd.DataFrame(unresolved))


def _problems_section(r: Report, runs: pd.DataFrame, fits: pd.DataFrame, issues) -> None:
    r.h("Excluded runs, refused fits, load issues")
    excl = runs[runs["excluded"].notna()][["sweep", "run_id", "status", "excluded"]]
    r.p(f"{len(excl)} run(s) excluded from fits (kept in the tables with their status).")
    r.table(excl.rename(columns={"excluded": "reason"}))
    refused = fits[fits["A"].isna()][["level", "group", "message"]]
    r.p(f"{len(refused)} fit(s) refused.")
    r.table(refused)
    r.p(f"{len(issues)} load issue(s).")
    r.table(pd.DataFrame([{"kind": i.kind, "path": i.path, "line": i.line, "message": i.message}
                          for i in issues]))
