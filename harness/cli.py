"""`rlablate`: the command line.

    rlablate train CONFIG.yaml [key=value ...]     run (or resume) one training run
    rlablate config CONFIG.yaml [key=value ...]    print the resolved config, write nothing
    rlablate presets                               the algorithm presets x their axis values
    rlablate choices                               list every design-choice axis and its values
    rlablate analyze RESULTS_DIR                   fit curves, write the report
    rlablate calibrate SPEC.yaml                   false-positive rate and power of every verdict
    rlablate plan SPEC.yaml --pilot DIR            predicted interval widths, what the design resolves
    rlablate sweep SPEC.yaml [--executor E]        launch a sweep's unfinished runs (idempotent)
    rlablate status SPEC.yaml|SWEEP_DIR            counts and per-run progress of a sweep
    rlablate export RESULTS_DIR [--parquet|--csv]  runs, evals, train rows as tidy files

Exit codes: 0 ok, 1 the run failed, 2 a bad config or command line (nothing written), 3 the run
diverged (non-finite reward/advantage/loss).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable

from .registry import Registry

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DIVERGED = 0, 1, 2, 3


@dataclass(frozen=True)
class Command:
    """A subcommand: `add(subparsers)` registers its parser(s), `run(args) -> exit code` runs it."""
    add: Callable
    run: Callable


# name -> Command. A wing adds its own parser: the sweep wing's `sweep` and `status`, the
# analysis package's `analyze`; the loader of each is called when the parser is built.
COMMANDS = Registry("command")


def _config_help() -> str:
    from .config import describe_fields
    lines = ["config keys (set in the YAML file or as key=value overrides):"]
    for key, default, help_ in describe_fields():
        lines.append(f"  {key} (default {default})")
        lines += textwrap.wrap(help_, width=92, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 too; keep its one-line message
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"rlablate: error: {message}\n")


_COMMON = dict(formatter_class=argparse.RawDescriptionHelpFormatter, epilog=None)


# ------------------------------------------------------------------------------------ train, config
def _add_train(sub) -> None:
    t = sub.add_parser("train", help="run or resume one training run", description=(
        "Train one run: warm start (cached), then RL steps with periodic eval, writing "
        "<run.results_dir>/<run.sweep>/<run_id>/{config.yaml,metrics.jsonl,summary.json,"
        "checkpoints/,tb/}. Running the same command again resumes from the last checkpoint; "
        "a finished run is never overwritten."), **_COMMON)
    t.epilog = _config_help()
    t.add_argument("config", nargs="?", help="YAML config file (omit for the embedded default)")
    t.add_argument("overrides", nargs="*", metavar="key=value",
                   help="dotted overrides applied after the file, e.g. optim.lr=3e-4 run.seed=1")
    t.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_config(sub) -> None:
    c = sub.add_parser("config", help="print the resolved config (validates it; writes nothing)",
                       description="Resolve defaults <- preset <- file <- overrides, validate, print "
                       "the YAML that a run would record, and the run directory.", **_COMMON)
    c.epilog = _config_help()
    c.add_argument("config", nargs="?", help="YAML config file")
    c.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides")


def _split_config_arg(args) -> tuple[str | None, list[str]]:
    """`rlablate train a=b` (no file) puts the first override into `config`; put it back."""
    if args.config and "=" in args.config and not args.config.endswith((".yaml", ".yml")):
        return None, [args.config] + list(args.overrides)
    return args.config, list(args.overrides)


def _load(args):
    from .config import ConfigError, load_config, repeated_overrides
    path, overrides = _split_config_arg(args)
    for note in repeated_overrides(overrides):
        print(f"rlablate: note: {note}", file=sys.stderr)
    try:
        return load_config(path, overrides)
    except ConfigError as e:
        print(f"rlablate: config error: {e}", file=sys.stderr)
        return None


def _run_config(args) -> int:
    from .config import dump_yaml
    cfg = _load(args)
    if cfg is None:
        return EXIT_USAGE
    sys.stdout.write(dump_yaml(cfg))
    print(f"# run_id: {cfg.run_id()}\n# run_dir: {cfg.run_dir()}")
    return EXIT_OK


def _run_train(args) -> int:
    cfg = _load(args)
    if cfg is None:
        return EXIT_USAGE
    from .config import ConfigError, check_environment
    try:  # the device and the files, before the run directory is made
        check_environment(cfg)
    except ConfigError as e:
        print(f"rlablate: config error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from .loop import train
    from .loop.warm_start import WarmStartError
    try:
        summary = train(cfg, progress=not args.quiet)
    except WarmStartError as e:
        print(f"rlablate: warm start failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    except ImportError as e:  # an optional extra is missing (e.g. vLLM); traceback in summary.json
        print(f"rlablate: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("rlablate: interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_FAILED
    except OSError as e:  # results dir read-only, disk full, ...: one line, the run resumes later
        print(f"rlablate: run failed: cannot write {e.filename or cfg.run_dir()}: "
              f"{e.strerror or e}; free space or fix permissions, then run the same command "
              f"again to resume", file=sys.stderr)
        return EXIT_FAILED
    status = summary["status"]
    final = summary.get("final") or {}
    print(f"{status}: {cfg.run_dir()}  step {summary.get('step')}  "
          f"in_dist pass@1 {final.get('eval/in_dist/pass@1', float('nan')):.3f}  "
          f"held_out pass@1 {final.get('eval/held_out/pass@1', float('nan')):.3f}")
    if status == "diverged":
        print(f"rlablate: {summary.get('error')}", file=sys.stderr)
        return EXIT_DIVERGED
    return EXIT_OK if status == "finished" else EXIT_FAILED


# ------------------------------------------------------------------------------- presets, choices
def _add_presets(sub) -> None:
    sub.add_parser("presets", help="list the algorithm presets with their axis values",
                   description="One row per preset (harness/presets/<name>.yaml): the value it picks "
                   "on every design-choice axis; '.' = the axis default. Use one with "
                   "`rlablate train preset=NAME` (shorthand for algo.preset=NAME).")


def _run_presets(args) -> int:
    from . import algos
    from .config import list_presets, load_preset
    axes = list(algos.REGISTRIES) + ["clip_low", "clip_high", "weight_cap", "div_low", "div_high",
                                     "tau_pos", "tau_neg", "overlong_cache"]
    table = [["preset"] + axes]
    for name in list_presets():
        p = load_preset(name)
        table.append([name] + [str(p[a]) if a in p else "." for a in axes])
    widths = [max(len(r[i]) for r in table) for i in range(len(axes) + 1)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return EXIT_OK


def _add_choices(sub) -> None:
    sub.add_parser("choices", help="list the design-choice axes, their values and the presets",
                   description="Every registered value of every axis, with the first line of its "
                   "docstring (formula and paper), and the shipped presets.")


def _run_choices(args) -> int:
    from . import algos
    from .config import list_presets, load_preset
    for axis, reg in algos.REGISTRIES.items():
        print(f"algo.{axis}:")
        for name in reg.names():
            print(f"  {name:22s} {reg.doc(name)}")
    print("presets (algo.preset):")
    for name in list_presets():
        print(f"  {name:22s} " + ", ".join(f"{k}={v}" for k, v in load_preset(name).items()))
    return EXIT_OK


# ------------------------------------------------------------------------------- the other wings
def _sweep_wing(name: str) -> Command:
    """`sweep` / `status`: parser and runner live in harness/sweep/cli.py."""
    def add(sub) -> None:
        from .sweep.cli import add_parser
        add_parser(sub, name)

    def run(args) -> int:
        from .sweep.cli import run_cli
        return run_cli(args, exit_usage=EXIT_USAGE, exit_failed=EXIT_FAILED)
    return Command(add, run)


def _add_analyze(sub) -> None:
    from analysis.cli import add_analyze_parser
    add_analyze_parser(sub)


def _run_analyze(args) -> int:
    from analysis.cli import run_analyze
    return run_analyze(args)


def _add_export(sub) -> None:
    from analysis.cli import add_export_parser
    add_export_parser(sub)


def _run_export(args) -> int:
    from analysis.cli import run_export
    return run_export(args)


def _add_calibrate(sub) -> None:
    from analysis.cli import add_calibrate_parser
    add_calibrate_parser(sub)


def _run_calibrate(args) -> int:
    from analysis.cli import run_calibrate
    return run_calibrate(args)


def _add_combine(sub) -> None:
    from analysis.combine_cli import add_combine_parser
    add_combine_parser(sub)


def _run_combine(args) -> int:
    from analysis.combine_cli import run_combine
    return run_combine(args)


def _add_plan(sub) -> None:
    from analysis.plan_cli import add_plan_parser
    add_plan_parser(sub)


def _run_plan(args) -> int:
    from analysis.plan_cli import run_plan
    return run_plan(args)


COMMANDS.add("train", Command(_add_train, _run_train))
COMMANDS.add("config", Command(_add_config, _run_config))
COMMANDS.add("presets", Command(_add_presets, _run_presets))
COMMANDS.add("choices", Command(_add_choices, _run_choices))
COMMANDS.add("sweep", _sweep_wing("sweep"))
COMMANDS.add("status", _sweep_wing("status"))
COMMANDS.add("analyze", Command(_add_analyze, _run_analyze))
COMMANDS.add("calibrate", Command(_add_calibrate, _run_calibrate))
COMMANDS.add("plan", Command(_add_plan, _run_plan))
COMMANDS.add("combine", Command(_add_combine, _run_combine))
COMMANDS.add("export", Command(_add_export, _run_export))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rlablate", description=__doc__.split("\n\n")[0] + "\n\n" +
                "Controlled ablations of RL post-training: every design choice (advantage, ratio, "
                "surrogate, aggregation, ...) is a named axis of one shared loop; algorithms are "
                "presets of choices.", formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:  # registration order: the order of `rlablate --help`
        COMMANDS[name].add(sub)
    return p


def _spacing_hint(tokens: list[str]) -> str | None:
    """`optim.lr = 3e-4`, `optim.lr =3e-4`, `optim.lr= 3e-4`: a hint toward `optim.lr=3e-4`."""
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok == "=" and 0 < i and nxt is not None:
            parts = tokens[i - 1:i + 2]
        elif tok.startswith("=") and i > 0 and "=" not in tokens[i - 1]:
            parts = tokens[i - 1:i + 1]
        elif tok.endswith("=") and nxt is not None and "=" not in nxt and not nxt.startswith("-"):
            parts = [tok, nxt]
        else:
            continue
        return (f"{' '.join(parts)!r}: write an override without spaces around '=': "
                f"{''.join(parts)}")
    return None


def _option_hint(extra: list[str], argv: list[str]) -> str | None:
    """`--steps 10`, `--train.steps=10` (not options of the command): a hint toward the config
    key, `train.steps=10`."""
    from .config import describe_fields
    keys = sorted((k for k, _, _ in describe_fields()), key=lambda k: k.startswith("warmup."))
    for tok in extra:
        if not tok.startswith("--") or len(tok) < 3:
            continue
        name, _, value = tok[2:].partition("=")
        i = argv.index(tok) if tok in argv else -1
        if not value and 0 <= i < len(argv) - 1 and not argv[i + 1].startswith("-"):
            value = argv[i + 1]
        name = name.replace("-", "_")
        hits = [k for k in keys if k == name or k.endswith("." + name)]
        if hits:
            return (f"unrecognized option {tok!r}: config keys are set as key=value, not as "
                    f"options: {hits[0]}={value or '...'}"
                    + (f" (or {', '.join(hits[1:4])})" if len(hits) > 1 else ""))
    return None


# the commands whose work takes time: their wall time is printed at the end (stderr)
TIMED = ("train", "sweep", "analyze", "calibrate")


def main(argv: list[str] | None = None) -> int:
    import time
    t0 = time.perf_counter()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    # key=value overrides may also follow the options (`rlablate sweep s.yaml --dry-run a=b`)
    args, extra = parser.parse_known_args(argv)
    hint = _spacing_hint(argv[1:]) if hasattr(args, "overrides") else None
    if hint:
        parser.error(hint)
    if extra:
        if not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra):
            parser.error(_option_hint(extra, argv) or f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = list(args.overrides) + extra
    code = COMMANDS[args.cmd].run(args)
    if args.cmd in TIMED and code != EXIT_USAGE and not getattr(args, "dry_run", False):
        print(f"rlablate {args.cmd}: {time.perf_counter() - t0:.1f} s wall", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
