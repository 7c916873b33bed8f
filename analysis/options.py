"""Checks of `rlablate analyze`'s options, like the config loader's: each bad option is one line
naming the option, the value and what is allowed (`OptionError`), before any file is written.

``check_paths(results_dir, out)`` runs before anything is read; ``check_against_results(opt,
results, variants)`` once the runs are loaded (the eval sets and variants they have). The CLI
turns an `OptionError` into exit code 2 and removes an output folder it created.
"""
from __future__ import annotations

import difflib
from pathlib import Path


class OptionError(ValueError):
    """A bad option of `rlablate analyze`: one line."""


def did_you_mean(value: str, names) -> str:
    names = [str(n) for n in names]
    lower = {n.lower(): n for n in names}
    hit = lower.get(str(value).lower()) or next(iter(difflib.get_close_matches(
        str(value), names, n=1, cutoff=0.6)), None) or next(iter(difflib.get_close_matches(
            str(value).lower(), list(lower), n=1, cutoff=0.6)), None)
    if hit in lower:
        hit = lower[hit]
    return f" (did you mean {hit!r}?)" if hit else ""


def check_numbers(**values) -> None:
    """Counts that must be >= 0 (`--bootstrap`, `--calibrate`, ...): flag name -> value."""
    for flag, value in values.items():
        if value is not None and value < 0:
            raise OptionError(f"--{flag.replace('_', '-')} = {value}: must be >= 0")


def check_up_to(step: int | None, rungs: list[int] | None) -> None:
    """`--up-to-step` must be a positive step past every `--halving-replay` rung."""
    if step is None:
        return
    if step <= 0:
        raise OptionError(f"--up-to-step = {step}: must be a positive step")
    late = [r for r in rungs or () if r >= step]
    if late:
        raise OptionError(f"--halving-replay {','.join(map(str, late))}: at or past --up-to-step "
                          f"{step} (a look must come before the end it is replayed against)")


def check_paths(results_dir: str, out: str | None) -> None:
    root = Path(results_dir)
    if not root.exists():
        raise OptionError(f"RESULTS_DIR {results_dir!r}: no such directory")
    if not root.is_dir():
        hint = (" (a sweep spec: analyze its results directory, <run.results_dir>/<name>/)"
                if root.suffix in (".yaml", ".yml") else "")
        raise OptionError(f"RESULTS_DIR {results_dir!r}: not a directory; give a run directory, "
                          f"a sweep directory or a parent of several{hint}")
    if out is not None:
        o = Path(out)
        if o.exists() and not o.is_dir():
            raise OptionError(f"--out {out!r}: exists and is not a directory")
        for parent in o.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise OptionError(f"--out {out!r}: {parent} is not a directory")
                break


def check_against_results(eval_set: str | None, sets, reference: str | None, variants) -> None:
    """`--eval-set` must name an eval set the runs have; an explicit `--reference` a variant."""
    sets = sorted(map(str, sets))
    if eval_set is not None and eval_set not in sets:
        raise OptionError(f"--eval-set {eval_set!r}: the runs have eval sets "
                          f"{', '.join(sets) or '(none)'}" + did_you_mean(eval_set, sets))
    variants = sorted(set(map(str, variants)))
    if reference is not None and reference not in variants:
        shown = ", ".join(variants[:12]) + (f", ... ({len(variants)} in all)"
                                            if len(variants) > 12 else "")
        raise OptionError(f"--reference {reference!r}: not a variant of these runs; variants: "
                          f"{shown}" + did_you_mean(reference, variants))


def first_missing(path: Path) -> Path | None:
    """The outermost directory of `path` that does not exist yet (what a mkdir -p would create)."""
    path = Path(path).absolute()
    if path.exists():
        return None
    top = path
    for parent in path.parents:
        if parent.exists():
            return top
        top = parent
    return top
