"""The ``plan`` subcommand: ``rlablate plan SPEC.yaml --pilot DIR``, the power planner's command line.

``add_plan_parser(subparsers)`` registers it (the harness CLI wires it in); ``run_plan(args)`` runs it:
exit 0 on success, 2 on bad input (one line on stderr naming what is wrong).
"""
from __future__ import annotations

import argparse
import sys

from analysis.cli import DEFAULT_MARGIN


def configure_plan_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the plan arguments to ``parser``."""
    parser.add_argument("spec", metavar="SPEC.yaml",
                        help="the sweep spec whose design is planned (its steps, eval schedule, "
                             "seeds and eval size are simulated)")
    parser.add_argument("--pilot", metavar="DIR",
                        help="results of a pilot (e.g. the reference alone, 2+ seeds): its "
                             "curve and noise drive the simulation (default: the calibration's "
                             "NoiseModel, with a warning)")
    parser.add_argument("--pilot-up-to-step", type=int, metavar="N",
                        help="read the pilot's runs as they stood at step N (as `analyze "
                             "--up-to-step`): at a sequential design's look, plan the runs that go "
                             "on from what the look saw (with --per-variant-noise, each open "
                             "arm's own noise so far)")
    parser.add_argument("--per-variant-noise", action="store_true",
                        help="simulate each arm the pilot also ran with its own seed-to-seed "
                             "and within-run noise (2+ converged per-run fits), not the "
                             "reference's; the truth and item spread stay the reference's")
    parser.add_argument("--eval-set", default="in_dist", help="eval set (default in_dist)")
    parser.add_argument("--reference", default="grpo", metavar="VARIANT",
                        help="the variant every other one is compared with (default grpo)")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                        help="margin on A (ScaleRL: 0.02): the smallest dA a 'moved A' verdict "
                             "may claim")
    parser.add_argument("--target-width", type=float, default=0.10, metavar="W",
                        help="target 95%% width of the dA interval for the budget search "
                             "(default 0.10)")
    parser.add_argument("--raw-noise", dest="match", action="store_false",
                        help="simulate the pilot's per-run seed sds and wobble as measured, "
                             "without matching the simulated per-run fits' scatter to the "
                             "pilot's (analysis/scatter.py; the planner before session 17, which "
                             "counts the within-run noise twice)")
    parser.add_argument("--sweeps", type=int, default=100, metavar="N",
                        help="simulated sweeps per distinct comparison (default 100)")
    parser.add_argument("--no-budget", dest="budget", action="store_false",
                        help="skip the budget search")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed")
    parser.add_argument("--claim-noise-from", metavar="claim_inputs.json",
                        help="also plan claims 1, 2 and 4 at the noise a pilot's claims "
                             "measured (its analysis' claim_inputs.json; analysis/plan_claims.py)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="workers the wall estimate schedules the runs on (local processes or "
                             "concurrent SLURM array tasks; default: the spec's local.parallel). "
                             "--write records the estimate at the spec's own workers")
    parser.add_argument("--wall-target", type=float, metavar="MIN",
                        help="also print the fewest workers that bring the sweep within MIN "
                             "minutes at the pilot's run times (needs --pilot)")
    parser.add_argument("--write", action="store_true",
                        help="pre-register: write the predicted widths into the spec's `plan:` "
                             "block (the report prints them beside the achieved widths)")
    parser.add_argument("--out", metavar="FILE.csv", help="also write the predictions as CSV")
    return parser


def add_plan_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``plan`` on an ``argparse`` subparsers object; sets ``func=run_plan``."""
    parser = subparsers.add_parser(
        "plan", help="predict interval widths and what a design can resolve, before it runs",
        description="The power planner: what a sweep design can resolve, predicted before it "
                    "runs (analysis/plan.py).")
    configure_plan_parser(parser)
    parser.set_defaults(func=run_plan)
    return parser


def run_plan(args: argparse.Namespace) -> int:
    """Predict the spec's interval widths from a pilot and print them (and the budget search)."""
    import time

    from analysis import plan, wall
    from analysis.fit import FitError
    from analysis.report import format_markdown_table
    from analysis.schedule import read_schedule

    t0 = time.perf_counter()
    if args.sweeps < 10:
        print("rlablate plan: error: --sweeps must be >= 10", file=sys.stderr)
        return 2
    if not 0 < args.target_width < 2:
        print("rlablate plan: error: --target-width must be in (0, 2)", file=sys.stderr)
        return 2
    if args.per_variant_noise and not args.pilot:
        print("rlablate plan: error: --per-variant-noise needs --pilot DIR (the arms' own runs)",
              file=sys.stderr)
        return 2
    if args.pilot_up_to_step is not None and (not args.pilot or args.pilot_up_to_step <= 0):
        print("rlablate plan: error: --pilot-up-to-step needs --pilot DIR and a step >= 1 (got "
              f"{args.pilot_up_to_step})", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers < 1:
        print(f"rlablate plan: error: --workers must be >= 1 (got {args.workers})", file=sys.stderr)
        return 2
    if args.wall_target is not None and not args.wall_target > 0:
        print(f"rlablate plan: error: --wall-target must be > 0 minutes (got {args.wall_target})",
              file=sys.stderr)
        return 2
    if args.wall_target is not None and not args.pilot:
        print("rlablate plan: error: --wall-target needs --pilot DIR (the timed runs it schedules)",
              file=sys.stderr)
        return 2
    try:
        name, groups = read_schedule(args.spec)
    except (OSError, FitError, ValueError, TypeError, KeyError) as exc:
        print(f"rlablate plan: error: cannot read {args.spec}: {exc}", file=sys.stderr)
        return 2
    inputs = None
    if args.claim_noise_from:
        from analysis.calibrate_claims import read_claim_inputs
        try:
            inputs = read_claim_inputs(args.claim_noise_from)
        except ValueError as exc:
            print(f"rlablate plan: error: {exc}", file=sys.stderr)
            return 2
    try:
        pilot = plan.pilot_from_dir(args.pilot, args.reference, args.eval_set, groups,
                                    per_variant=args.per_variant_noise, match=args.match,
                                    up_to_step=args.pilot_up_to_step)
    except (FileNotFoundError, FitError, ValueError, NotADirectoryError) as exc:
        print(f"rlablate plan: error: {exc}", file=sys.stderr)
        return 2
    table = plan.predict(groups, pilot, args.sweeps, args.seed, args.margin, args.reference)
    print(f"plan of sweep {name!r} ({len(groups)} groups), {args.sweeps} simulated sweeps per comparison")
    for note in pilot.notes:
        print(f"  {note}")
    print(format_markdown_table(table))
    if args.out:
        table.to_csv(args.out, index=False)
    costs, spec_workers, wall_s = {}, wall.spec_workers(args.spec), None
    workers = args.workers or spec_workers
    if args.pilot:
        costs = wall.run_costs(wall.pilot_run_dirs(args.pilot))
        wall_s, line = wall.estimate(groups, costs, args.reference, workers)
        print(line)
        if wall_s is not None and args.wall_target is not None:
            print(wall.workers_line(groups, costs, args.reference, args.wall_target))
        if wall_s is not None and workers != spec_workers:  # the record is the spec's own design
            wall_s = wall.estimate(groups, costs, args.reference, spec_workers)[0]
    budget = None
    ref = next((g for g in groups if g.variant == args.reference), None)
    if args.budget and ref is not None:
        budget = plan.budget_table(ref, pilot, args.target_width, max(args.sweeps // 2, 10),
                                   args.seed)
        if costs:  # what each budget costs the whole sweep, in minutes on the plan's workers
            budget["sweep_wall_min"] = wall.budget_walls(budget, groups, costs, args.reference,
                                                         workers)
        print(f"budget search for a single-choice comparison at {ref.scale} (target dA width "
              f"{args.target_width}):")
        print(format_markdown_table(budget))
        best = budget[budget["reaches"]]
        print("cheapest budget reaching the target: " + (
            f"{best.iloc[0]['seeds']} seeds x {best.iloc[0]['steps']} steps, eval "
            f"{best.iloc[0]['eval']} (cost x{best.iloc[0]['cost']:.2f} of the spec's)"
            if len(best) else "none of the candidates (more seeds or a quieter regime needed)"))
    claims = None
    if inputs is not None:
        from analysis.plan_claims import claim_plan
        claims = claim_plan(groups, inputs, max(args.sweeps, 100), args.seed, args.reference)
        print("the seed claims at this design: *share* = simulated studies (truth: the pilot's "
              "estimates) that give the verdict; the rest as `rlablate calibrate`")
        print(format_markdown_table(claims))
    if args.write:
        plan.write_plan(args.spec, table, pilot, args, wall_s=wall_s, claims=claims)
        print(f"wrote the plan into {args.spec} (key `plan`)")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0
