"""The sweep wing's commands, as a table (name -> parser builder, runner), wired into `rlablate` by
`harness/cli.py` through `add_parsers(sub)` and `run_cli(args)`:

    rlablate sweep SPEC.yaml [key=value ...] [--executor E] [--dry-run] [--only K=V,..] [--wait]
    rlablate status SPEC.yaml [key=value ...] | SWEEP_DIR

Exit 2 for a bad spec or a launch that cannot go ahead (nothing written or submitted), 1 when a
waited-for run did not finish, else 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .executors import EXECUTORS, LaunchError
from .expand import Run, expand, select, sweep_dir
from .launch import launch, plan, summarize
from .spec import Spec, SpecError, load_spec
from .status import NotASweepDir, runs_of_dir, status_report

FMT = argparse.RawDescriptionHelpFormatter


@dataclass(frozen=True)
class Command:
    help: str
    description: str
    add_args: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, int], int]  # (args, exit_failed) -> exit code


def _sweep_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("spec", help="sweep spec YAML (see harness/sweep/spec.py for the keys)")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="dotted keys applied to every run, e.g. run.results_dir=/scratch/r or "
                        "slurm.partition=gpu (a swept key cannot be overridden)")
    s.add_argument("--executor", choices=list(EXECUTORS), default=None,
                   help="; ".join(EXECUTORS.meta(n).help for n in EXECUTORS)
                   + ". Default: the spec's `executor`")
    s.add_argument("--dry-run", action="store_true",
                   help="print the runs, their state and what would be submitted; write nothing")
    s.add_argument("--parallel", type=int, default=0,
                   help="local executor: runs at once (default: the spec's local.parallel, else "
                        "one per CPU core)")
    s.add_argument("--only", action="append", default=[], metavar="KEY=V[,V...]",
                   help="submit only the runs whose swept KEY has one of these values (repeatable; "
                        "all must hold), e.g. --only algo.preset=grpo,dapo; the sweep still records "
                        "every run")
    s.add_argument("--wait", action="store_true",
                   help="slurm executor: wait for the jobs and report each run's outcome")
    s.add_argument("--halving", metavar="STEP[,STEP...]", default=None,
                   help="successive halving: train every run to each rung, stop the arms whose A "
                        "upper bound lies below the leader's lower bound (fitted curves), go on "
                        "with the rest; halving.json records it (see harness/sweep/halving.py)")
    s.add_argument("--halving-rule", choices=("bound", "resolved"), default=None,
                   help="with --halving: 'bound' (default) as above; 'resolved' stops each variant "
                        "whose verdict against --halving-reference is already resolved at the rung "
                        "(moved A, only B, no effect on A within --halving-margin) and goes on with "
                        "the open ones and the reference: steps where the curves have not bent")
    s.add_argument("--halving-reference", default=None, metavar="PRESET",
                   help="with --halving-rule resolved: the reference arm (an algo.preset of the "
                        "sweep; default grpo)")
    s.add_argument("--halving-margin", type=float, default=None, metavar="M",
                   help="with --halving-rule resolved: the equivalence margin on A (default 0.02, "
                        "as rlablate analyze; use the one the analysis will use)")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="local executor: one progress bar over all runs' steps with each running "
                        "run's step (default: on when stderr is a terminal)")


def _status_args(t: argparse.ArgumentParser) -> None:
    t.add_argument("target", help="a sweep spec YAML, or a sweep directory <results_dir>/<name>")
    t.add_argument("overrides", nargs="*", metavar="key=value",
                   help="with a spec: the same overrides as given to `rlablate sweep`")


def _load(path: str, overrides: list[str]) -> tuple[Spec, list[Run]]:
    from ..config import repeated_overrides
    for note in repeated_overrides(overrides):
        print(f"rlablate: note: {note}", file=sys.stderr)
    spec = load_spec(path, overrides)
    return spec, expand(spec)


def run_sweep(args: argparse.Namespace, exit_failed: int) -> int:
    spec, runs = _load(args.spec, args.overrides)
    executor = args.executor or spec.executor
    if args.parallel < 0:
        raise SpecError(f"--parallel = {args.parallel}: must be >= 0")
    selected = {r.run_id for r in select(spec, runs, args.only)} if args.only else None
    if args.dry_run:
        states, todo, skipped = plan(runs, selected)
        go = {r.run_id for r in todo}
        print(table(runs, spec, {"state": [states[r.run_id].state for r in runs],
                                 "action": ["submit" if r.run_id in go else "skip" for r in runs]}))
        print(f"{summarize(runs)}; {executor} executor would submit {len(todo)}, skip "
              f"{len(skipped)}; sweep dir {sweep_dir(runs)}  (dry run: nothing written)")
        return 0
    if EXECUTORS.meta(executor).cluster in ("local", "debug"):  # this machine runs them
        from ..config import ConfigError, check_environment
        for r in runs:  # the device and the files, before anything is written or submitted
            try:
                check_environment(r.cfg)
            except ConfigError as e:
                raise SpecError(f"run {r.run_id}: {e}") from None
    show = sys.stderr.isatty() if args.progress is None else args.progress
    from .halving import halving_rule
    rule = halving_rule(args, runs)
    if args.halving:
        from .halving import parse_rungs, successive_halving
        rungs = parse_rungs(args.halving, runs)
        if selected is not None or (executor == "slurm" and not args.wait):
            raise SpecError("--halving: needs every run (no --only) and an executor that waits "
                            "(local, debug, or slurm with --wait)")
        res = successive_halving(spec, runs, executor, rungs, args.parallel, show_progress=show,
                                 **rule)
    else:
        res = launch(spec, runs, executor, parallel=args.parallel, wait=args.wait,
                     selected=selected, show_progress=show)
    bad = [rid for rid, s in res["results"].items() if s != "finished"]
    if res["results"]:
        print(f"{len(res['results']) - len(bad)} of {len(res['results'])} submitted runs finished"
              + (f"; not finished: {', '.join(bad)}" if bad else ""))
    return exit_failed if bad else 0


def run_status(args: argparse.Namespace, exit_failed: int) -> int:
    target = Path(args.target)
    if target.is_dir():
        if args.overrides:
            raise SpecError("status DIR takes no key=value overrides")
        sdir, ids = target, runs_of_dir(target)
    else:
        _, runs = _load(args.target, args.overrides)
        sdir, ids = sweep_dir(runs), [r.run_id for r in runs]
    text, _ = status_report(sdir, ids)
    print(text)
    if not target.is_dir():
        note = other_runs_note(sdir, ids, args.target)
        if note:
            print(note)
    return 0


def other_runs_note(sdir: Path, ids: list[str], spec_path: str) -> str | None:
    """A spec expanded without the overrides given at launch names other run ids than the ones
    in its sweep dir (sweep.json and the run directories know those): say so, instead of showing
    every run pending beside finished ones."""
    try:
        launched = runs_of_dir(sdir)
    except NotASweepDir:
        return None
    other = [rid for rid in launched if rid not in set(ids)]
    if not other:
        return None
    return (f"note: {sdir} holds {len(other)} run(s) that this spec, expanded with these "
            f"overrides, does not name (launched with other key=value overrides, or an earlier "
            f"version of the spec?): give `rlablate status {spec_path}` the launch's overrides, "
            f"or see them all with `rlablate status {sdir}`")


COMMANDS: dict[str, Command] = {
    "sweep": Command(
        "expand a sweep spec and launch its runs (idempotent)",
        "Expand SPEC (sweeps/*.yaml) into runs and submit those not finished, not running and not "
        "queued, through submitit. Re-running the same command skips finished runs and resumes "
        "the rest from their checkpoints. The sweep dir <run.results_dir>/<name>/ records the spec, "
        "git commit and package versions (sweep.json), the jobs (jobs.jsonl) and the submitit logs "
        "(_submitit/).", _sweep_args, run_sweep),
    "status": Command(
        "counts and per-run progress of a sweep",
        "State of every run of a sweep: pending (not submitted), queued, running, incomplete "
        "(stopped mid-way; resumes on the next `rlablate sweep`), failed, finished, diverged; "
        "step/progress, attempts, the latest job id and its SLURM state.", _status_args, run_status),
}


def add_parser(sub, name: str) -> None:
    """The parser of subcommand `name` (sweep or status) on an argparse subparsers object."""
    c = COMMANDS[name]
    c.add_args(sub.add_parser(name, help=c.help, description=c.description, formatter_class=FMT))


def add_parsers(sub) -> None:
    for name in COMMANDS:
        add_parser(sub, name)


def run_cli(args, exit_usage: int = 2, exit_failed: int = 1) -> int:
    """`rlablate sweep` / `rlablate status`: a spec or launch error is one line and `exit_usage`."""
    try:
        return COMMANDS[args.cmd].run(args, exit_failed)
    except (SpecError, LaunchError, NotASweepDir) as e:
        print(f"rlablate: {'spec' if isinstance(e, SpecError) else 'launch'} error: {e}",
              file=sys.stderr)
        return exit_usage


def table(runs: list[Run], spec: Spec, extra: dict[str, list[str]] | None = None) -> str:
    """A plain-text table: index, run_id, the swept values, and any extra columns."""
    keys = list(spec.swept_keys)
    header = ["#", "run_id"] + keys + list(extra or {})
    rows = [[str(r.index), r.run_id] + [str(r.point.get(k, "-")) for k in keys]
            + [col[i] for col in (extra or {}).values()] for i, r in enumerate(runs)]
    widths = [max(len(h), *(len(row[j]) for row in rows)) if rows else len(h)
              for j, h in enumerate(header)]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    return "\n".join(fmt.format(*row).rstrip() for row in [header] + rows)
