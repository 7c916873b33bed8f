"""The ``combine`` subcommand: ``rlablate combine REPORT_DIR REPORT_DIR ...`` (analysis/meta.py).

Kept apart from analysis/cli.py (analyze, export, calibrate, plan) for size; the same lazy imports:
building the parser imports neither scipy nor pandas."""
from __future__ import annotations

import argparse
import sys

from analysis.cli import DEFAULT_MARGIN


def add_combine_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``combine``: a fixed-effect meta-analysis of replicated studies (analysis/meta.py)."""
    parser = subparsers.add_parser(
        "combine", help="combine the comparisons of one design's replications (meta-analysis)",
        description="Pool the design-choice comparisons (effects.csv) of several reports of ONE "
                    "design run on disjoint seeds: inverse-variance fixed-effect estimates of dA "
                    "and of the B ratio with 95%% intervals, Cochran's Q and I^2, and the report's "
                    "verdict rule on the pooled intervals (analysis/meta.py states the normal "
                    "approximation it makes). The reports' spec.yaml must agree on every key but "
                    "name, description, seeds, plan and the executor; exit 2 otherwise. The seed "
                    "claims are decided again over the union of the replications' runs from each "
                    "report's claim_inputs.json (exactly, as one study of all their seeds would).")
    parser.add_argument("report_dirs", nargs="+", metavar="REPORT_DIR",
                        help="directories written by `rlablate analyze` (two or more)")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                        help="equivalence margin on A for 'no effect on A' (default %(default)s; "
                             "use the studies' own)")
    parser.add_argument("--out", metavar="FILE.csv", help="also write the table as CSV")
    parser.add_argument("--mixed-base", action="store_true",
                        help="pool studies whose runs started from different warm starts "
                             "(R0 differs: e.g. built on another CPU); refused by default")
    parser.add_argument("--claims-out", metavar="FILE.csv",
                        help="also write the seed claims decided over the union of the "
                             "replications' runs as CSV")
    return parser


def run_combine(args: argparse.Namespace) -> int:
    """Print the pooled comparisons; 2 when the reports are not replications of one design."""
    from analysis import meta
    from analysis.report import format_markdown_table

    def fail(message: str) -> int:
        print(f"rlablate combine: error: {message}", file=sys.stderr)
        return 2

    if len(args.report_dirs) < 2:
        return fail("give two or more report directories")
    if not 0 < args.margin < 1:
        return fail(f"--margin must be in (0, 1), got {args.margin}")
    try:
        studies = [meta.load_study(d) for d in args.report_dirs]
        notes = meta.check_replications(studies, args.mixed_base)
        table = meta.combine(studies, args.margin)
        if table.empty:
            return fail("no comparison is in every report")
        claims, why_not = meta.combine_claims(studies, table)
        if why_not and args.claims_out:
            return fail(f"--claims-out: {why_not}")
    except (ValueError, OSError) as exc:
        return fail(str(exc))
    print(f"{len(studies)} replications: " + ", ".join(args.report_dirs))
    for note in notes:
        print(f"  {note}")
    print(f"fixed-effect inverse-variance pooling; each study's se = 95% interval width / 3.92 "
          f"(normal approximation); margin on A +-{args.margin:g}; post hoc unless a spec "
          "pre-registered it")
    print(format_markdown_table(table))
    if command := meta.calibrate_command(studies, args.margin):
        print(f"their false-positive rates, simulated: {command} (plus the noise a report's "
              "calibration section states)")
    if args.out:
        table.to_csv(args.out, index=False)
    if why_not:
        print(why_not)
        return 0
    print("\nThe seed claims over the union of the replications' runs (claims 1, 2 and 4 decided "
          "again from every run's numbers; claim 3 from the pooled filter comparison above):")
    for rec in claims.to_dict("records"):
        print(f"  {rec['claim']}. {rec['statement']}: {rec['verdict']}\n     {rec['evidence']}"
              + (f"\n     would resolve: {rec['would_resolve']}" if rec["would_resolve"] else ""))
    if args.claims_out:
        claims.to_csv(args.claims_out, index=False)
    return 0
