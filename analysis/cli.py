"""The ``analyze`` subcommand: ``rlablate analyze RESULTS_DIR`` or ``python -m analysis RESULTS_DIR``.

    rlablate analyze results/my_sweep --by algo.preset --fit-start 0.05 --bootstrap 1000 --seed 0

``add_analyze_parser(subparsers)`` registers it (the harness CLI wires it in); ``run_analyze(args)``
runs it: exit 0 on success, 2 when the input cannot be analysed (the reason on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import sys

# Kept here, not imported from analysis.bootstrap / analysis.compare, so that building the parser
# (every `rlablate` command, `--help` included) does not import scipy and pandas; tests/test_cli.py
# checks they equal bootstrap.METHODS and compare.DEFAULT_MARGIN.
METHODS = ("auto", "seeds", "items", "seeds+items", "residuals")
DEFAULT_MARGIN = 0.02


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text}")
    return value


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the analyze arguments to ``parser``."""
    parser.add_argument("results_dir", metavar="RESULTS_DIR",
                        help="a run directory, a sweep directory (results/<sweep>/) or a parent "
                             "of several sweeps")
    parser.add_argument("--by", nargs="+", action="extend", metavar="AXIS",
                        help="config columns that define the compared variants, e.g. "
                             "algo.preset or algo.clip_high (default: the config columns that "
                             "vary across runs, excluding seed and scale)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default RESULTS_DIR/analysis)")
    parser.add_argument("--fit-start", type=_fraction, metavar="FRACTION", default=None,
                        help="fit only eval points with compute >= FRACTION * max compute "
                             "(ScaleRL starts after ~1.5k GPU-h, about one epoch); default: all")
    parser.add_argument("--fit-start-step", type=int, metavar="STEP", default=None,
                        help="fit only eval points with step >= STEP")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap replicates for the CIs (0 disables; default 1000)")
    parser.add_argument("--bootstrap-method", choices=METHODS, default="auto",
                        help="auto: seeds when a group has >= 2 runs, else items when "
                             "eval_items.jsonl exists, else residuals")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap random seed")
    parser.add_argument("--eval-set", default=None,
                        help="eval set for the leaderboard and comparisons (default in_dist)")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                        help="A difference below which B decides (ScaleRL: 0.02)")
    parser.add_argument("--extrapolate", type=_fraction, default=0.5, metavar="FRACTION",
                        help="extrapolation check: fit on the first FRACTION of compute")
    parser.add_argument("--seed-col", default=None, help="config column of the seed")
    parser.add_argument("--scale-col", default=None,
                        help="config column of the model scale ('none' to disable)")
    parser.add_argument("--reference", default=None, metavar="VARIANT",
                        help="the variant every other one is compared with in the design-choice "
                             "table (dA, B ratio; default grpo)")
    parser.add_argument("--no-run-fits", dest="per_run", action="store_false",
                        help="fit groups only, not every run")
    parser.add_argument("--calibrate", type=int, default=200, metavar="N",
                        help="simulated sweeps per cell of the report's calibration table "
                             "(false-positive rate and power of every verdict for this study's "
                             "schedule; default 200, ~25 s for the demo; 0 skips it; "
                             "rlablate calibrate runs 500)")
    parser.add_argument("--plan", type=int, default=40, metavar="N",
                        help="simulated sweeps per comparison of the report's power-planner "
                             "section (predicted interval widths for this study's schedule and "
                             "noise, beside the achieved ones) and of the end a replayed "
                             "resolved-rule look plans for each open comparison; default 40; 0 "
                             "skips both")
    parser.add_argument("--halving-replay", type=_rungs, default=None, metavar="STEP[,STEP...]",
                        help="replay successive halving with these rungs on the finished runs "
                             "(what `rlablate sweep --halving` would have stopped and saved, and "
                             "the Kendall tau of its ranking against the full one): a report "
                             "section and halving.csv")
    parser.add_argument("--halving-rule", choices=("bound", "resolved"), default="bound",
                        help="the rule --halving-replay replays: 'bound' stops an arm whose A "
                             "upper bound lies below the leader's lower bound; 'resolved' stops a "
                             "variant whose verdict against --reference is already resolved "
                             "(interim looks; --margin; the section then compares each verdict "
                             "with the full sweep's). Default %(default)s")
    parser.add_argument("--up-to-step", type=int, default=None, metavar="STEP",
                        help="analyse every run as it stood at STEP: only its eval and train rows "
                             "at or before STEP (what an interim look, e.g. a sequential rung, "
                             "saw; the report says so at its top)")
    return parser


def _rungs(text: str) -> list[int]:
    try:
        rungs = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated steps, e.g. 60,120") from None
    if any(r <= 0 for r in rungs) or rungs != sorted(set(rungs)):
        raise argparse.ArgumentTypeError(f"{text!r}: increasing positive steps, e.g. 60,120")
    return rungs


def add_analyze_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``analyze`` on an ``argparse`` subparsers object; sets ``func=run_analyze``."""
    parser = subparsers.add_parser("analyze", help="fit ScaleRL curves and write a report",
                                   description=__doc__.splitlines()[0])
    configure_parser(parser)
    parser.set_defaults(func=run_analyze)
    return parser


def run_analyze(args: argparse.Namespace) -> int:
    """Run the analysis described by parsed ``args``; print where the report went."""
    import shutil
    from pathlib import Path

    from analysis.options import (OptionError, check_numbers, check_paths, check_up_to,
                                  first_missing)

    try:  # the options that need no data: before anything is read or written
        check_numbers(bootstrap=args.bootstrap, calibrate=args.calibrate, margin=args.margin,
                      seed=args.seed, fit_start_step=args.fit_start_step)
        check_paths(args.results_dir, args.out)
        check_up_to(args.up_to_step, args.halving_replay)
    except OptionError as exc:
        print(f"rlablate analyze: error: {exc}", file=sys.stderr)
        return 2
    from analysis.effects import REFERENCE
    from analysis.fit import FitError
    from analysis.report import AnalysisOptions, run_analysis

    opt = AnalysisOptions(results_dir=args.results_dir, out=args.out, by=args.by,
                          fit_start=args.fit_start, fit_start_step=args.fit_start_step,
                          n_boot=args.bootstrap, boot_method=args.bootstrap_method,
                          seed=args.seed, eval_set=args.eval_set, margin=args.margin,
                          extrapolate=args.extrapolate, seed_col=args.seed_col,
                          scale_col=args.scale_col, per_run=args.per_run,
                          reference=args.reference or REFERENCE,
                          reference_explicit=args.reference is not None, calibrate=args.calibrate,
                          plan=args.plan, halving_replay=args.halving_replay, halving_rule=args.halving_rule,
                          up_to_step=args.up_to_step,
                          progress=lambda msg: print(f"rlablate analyze: {msg}", file=sys.stderr,
                                                     flush=True))
    created = first_missing(Path(args.out) if args.out else Path(args.results_dir) / "analysis")
    try:
        done = run_analysis(opt)
    except (FileNotFoundError, FitError, NotADirectoryError, OptionError) as exc:
        if created is not None and created.exists():  # a failed analyze leaves no folder
            shutil.rmtree(created)
        print(f"rlablate analyze: error: {exc}", file=sys.stderr)
        return 2
    res = done["results"]
    print(f"analysed {len(res.runs)} runs ({len(res.issues)} load issues); "
          f"report: {done['out'] / 'report.md'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m analysis``."""
    parser = configure_parser(argparse.ArgumentParser(prog="python -m analysis",
                                                      description=__doc__.splitlines()[0]))
    return run_analyze(parser.parse_args(argv))


# ------------------------------------------------------------------------------------------------
# rlablate export
# ------------------------------------------------------------------------------------------------
def add_export_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``export``: the DataFrame API's frames (analysis/frames.py) as files."""
    parser = subparsers.add_parser(
        "export", help="write a results tree's runs, evals and train rows as Parquet or CSV",
        description="Load every run at or below RESULTS_DIR into three tidy frames (runs, evals, "
                    "train; the resolved config as columns: `from analysis import load` gives the "
                    "same in Python) and write them as OUT/{runs,evals,train}.parquet (or .csv).")
    parser.add_argument("results_dir", metavar="RESULTS_DIR")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--parquet", dest="fmt", action="store_const", const="parquet",
                     help="Parquet files (pyarrow; the default)")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="CSV files")
    parser.add_argument("--out", metavar="DIR", help="output folder (default RESULTS_DIR/export)")
    parser.set_defaults(fmt="parquet")
    return parser


def run_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from analysis.options import OptionError, check_paths
    try:
        check_paths(args.results_dir, args.out)
    except OptionError as exc:
        print(f"rlablate export: error: {exc}", file=sys.stderr)
        return 2
    from analysis.frames import FRAMES, load_frames, write_frame
    frames = load_frames(args.results_dir)
    if frames.runs.empty:
        print(f"rlablate export: error: no run directories under {args.results_dir}",
              file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.results_dir) / "export"
    out.mkdir(parents=True, exist_ok=True)
    for name in FRAMES:
        df = getattr(frames, name)
        path = write_frame(df, out / f"{name}.{args.fmt}")
        print(f"{path}: {len(df)} rows x {len(df.columns)} columns")
    if frames.issues:
        print(f"{len(frames.issues)} load issues (truncated lines, missing files): "
              f"`from analysis import load; load(DIR).issues` lists them")
    return 0


# ------------------------------------------------------------------------------------------------
# rlablate calibrate
# ------------------------------------------------------------------------------------------------
_NOISE_FLAGS = {  # flag -> (NoiseModel field, help)
    "--R0": ("R0", "warm-start pass rate of the simulated curves"),
    "--A": ("A", "reference ceiling A"),
    "--B": ("B", "reference exponent B"),
    "--mid-frac": ("mid_frac", "C_mid as a fraction of the reference group's train.steps"),
    "--seed-sd-A": ("seed_sd_A", "seed-to-seed sd of A"),
    "--seed-sd-logB": ("seed_sd_logB", "seed-to-seed sd of log B"),
    "--item-spread": ("item_spread", "sd of the eval items' starts and ceilings around R0 and A"),
    "--wobble-sd": ("wobble_sd", "sd of the within-run AR(1) wobble of the pass rate"),
    "--wobble-rho-step": ("wobble_rho_step", "the wobble's correlation per train step"),
    "--runaway-p": ("runaway_p", "probability that a run runs away (analysis/runaway.py)"),
    "--runaway-dA": ("runaway_dA", "how far a run-away moves its run's ceiling A"),
    "--effect-A": ("effect_A", "dA of the 'moved A' alternative"),
    "--effect-B": ("effect_B", "B ratio of the 'only B' alternative"),
    "--spread": ("spread", "claim 4: sd of the algorithms' true gains (null: both sets)"),
    "--spread-alt-held-out": ("spread_alt_held_out", "claim 4 alternative: held-out spread"),
    "--gain-seed-sd": ("gain_seed_sd", "claim 4: seed sd of a run's gain"),
}


def configure_calibrate_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the calibrate arguments to ``parser``."""
    parser.add_argument("spec", metavar="SPEC.yaml",
                        help="a sweep spec (or the spec.yaml saved in a sweep's results folder): "
                             "its steps, eval schedule and seeds are simulated")
    parser.add_argument("--sweeps", type=int, default=500, metavar="N",
                        help="simulated sweeps per cell (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                        help="margin on A of the verdicts (ScaleRL: 0.02)")
    parser.add_argument("--reference", default="grpo", metavar="VARIANT",
                        help="the variant the design choices are compared with")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap replicates per simulated fit (as analyze)")
    parser.add_argument("--replications", metavar="SEEDS,SEEDS,...",
                        help="calibrate what `rlablate combine` says of this many replications "
                             "of the spec, each with the given seeds per arm (e.g. 4,6,6): the "
                             "comparisons pooled, the claims over the union of their runs")
    parser.add_argument("--look-at", type=int, default=None, metavar="STEP",
                        help="the sequential rule (`rlablate sweep --halving STEP --halving-rule "
                             "resolved`): each comparison looked at at STEP and, if not resolved "
                             "there, at the end; its error rates and the share stopped early")
    parser.add_argument("--look-at-seeds", type=int, default=None, metavar="N",
                        help="a look at each arm's first N seeds (at --look-at, else at the end) "
                             "and, for what it leaves open, again with all the spec's seeds: "
                             "what adding seeds to an open comparison (a report's resolve_at) "
                             "costs in false positives. The seed claims 1, 2 and 4 take the same "
                             "look (decided there: it stands; else read with every seed), as a "
                             "claim's budget run after the report is")
    parser.add_argument("--claim-noise-from", metavar="claim_inputs.json",
                        help="the seed claims' noise as a study measured it (the "
                             "claim_inputs.json `rlablate analyze` wrote; "
                             "calibrate_claims.measured_claim_noise); noise flags override it")
    parser.add_argument("--out", metavar="FILE.csv", help="also write the table as CSV")
    for flag, (name, text) in _NOISE_FLAGS.items():
        parser.add_argument(flag, type=float, dest=f"noise_{name}", default=None,
                            help=f"{text} (default: analysis.calibrate.NoiseModel)")
    return parser


def add_calibrate_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``calibrate`` on an ``argparse`` subparsers object; sets ``func=run_calibrate``."""
    parser = subparsers.add_parser(
        "calibrate", help="false-positive rate and power of every verdict, by simulation",
        description="Calibration by simulation: how often each verdict of the report is wrong, "
                    "for one sweep spec (analysis/calibrate.py).")
    configure_calibrate_parser(parser)
    parser.set_defaults(func=run_calibrate)
    return parser


def run_calibrate(args: argparse.Namespace) -> int:
    """Simulate ``args.sweeps`` sweeps per cell for the spec and print the calibration table."""
    import time

    from analysis.calibrate import NoiseModel, calibrate, describe, read_schedule, with_overrides
    from analysis.fit import FitError
    from analysis.report import format_markdown_table

    t0 = time.perf_counter()
    try:
        name, groups = read_schedule(args.spec)
    except (OSError, FitError, ValueError, TypeError, KeyError) as exc:
        print(f"rlablate calibrate: error: cannot read {args.spec}: {exc}", file=sys.stderr)
        return 2
    base = NoiseModel()
    if args.claim_noise_from:
        from analysis.calibrate_claims import noise_from_file
        try:
            base = noise_from_file(args.claim_noise_from, base)
        except ValueError as exc:
            print(f"rlablate calibrate: error: {exc}", file=sys.stderr)
            return 2
    noise = with_overrides(base, **{f: getattr(args, f"noise_{f}")
                                    for f, _ in _NOISE_FLAGS.values()})
    if args.sweeps < 1:
        print("rlablate calibrate: error: --sweeps must be >= 1", file=sys.stderr)
        return 2
    replications = None
    if args.replications is not None:
        parts = args.replications.split(",")
        replications = tuple(int(x) for x in parts) if all(x.isdigit() for x in parts) else ()
        if len(replications) < 2 or min(replications) < 2:
            print("rlablate calibrate: error: --replications takes two or more seed counts, each "
                  f">= 2, comma-separated (e.g. 4,6,6); got {args.replications!r}", file=sys.stderr)
            return 2
    if args.look_at is not None and (replications or args.look_at < 1 or args.look_at >= min(
            g.steps for g in groups)):
        print(f"rlablate calibrate: error: --look-at = {args.look_at}: a step in [1, "
              f"{min(g.steps for g in groups) - 1}] (below every group's steps), without "
              "--replications", file=sys.stderr)
        return 2
    fewest = min(g.seeds for g in groups)
    if args.look_at_seeds is not None and (replications or not 2 <= args.look_at_seeds < fewest):
        print(f"rlablate calibrate: error: --look-at-seeds = {args.look_at_seeds}: a seed count in "
              f"[2, {fewest - 1}] (below every group's seeds), without --replications",
              file=sys.stderr)
        return 2
    table = calibrate(groups, noise, args.sweeps, args.seed, args.margin, args.reference,
                      args.bootstrap, progress=lambda m: print(f"  {m}", file=sys.stderr),
                      replications=replications, look_at=args.look_at,
                      look_seeds=args.look_at_seeds)
    what = (f"{len(replications)} replications (seeds {'+'.join(map(str, replications))} an "
            "arm) pooled as `rlablate combine` pools them" if replications else "one study")
    print(f"calibration of sweep {name!r} ({len(groups)} groups; {what}), {args.sweeps} "
          f"simulated sweeps per cell")
    print(describe(noise, args.margin))
    print(format_markdown_table(table))
    if args.out:
        table.to_csv(args.out, index=False)
    fp = table[table["kind"] == "false positive"]
    bad = fp[fp["lo"] > 0.05]
    print(f"{len(fp) - len(bad)} of {len(fp)} false-positive rates are <= 5% within their 95% "
          f"interval; {time.perf_counter() - t0:.0f} s")
    return 0


def calibrate_main(argv: list[str] | None = None) -> int:
    """``python -m analysis.calibrate``-style entry point (used by the tests)."""
    parser = configure_calibrate_parser(argparse.ArgumentParser(prog="rlablate calibrate"))
    return run_calibrate(parser.parse_args(argv))
