"""Read run directories (docs/run_format.md) into tidy pandas tables.

``load_results(path)`` accepts a single run directory, a sweep directory
(``results/<sweep>/``) or any parent of several sweeps, and returns :class:`Results`:

* ``evals``: one row per eval point per eval set, with the run's flattened resolved config
  (``algo.advantage``, ``model.scale``, ``run.seed``, ...), ``run_id``, ``sweep``, ``status``,
  ``step``, ``compute`` (= ``compute/flops``), ``pass_rate`` (= ``eval/<set>/pass@1``),
  ``stderr``, ``n_items``, ``k`` and any other ``eval/<set>/<metric>`` as a column;
* ``runs``: one row per run (status, error, diverged step, number of eval rows, config);
* ``train``: one row per training step (``sweep``, ``run_id``, ``step``) with the training
  metrics the analysis reads (:data:`TRAIN_KEYS`: the seed claims' response length, entropy and
  clip fraction, the truncated share of run-aways), so nothing downstream reads metrics.jsonl again;
* ``issues``: every line or file that could not be read, as :class:`LoadIssue` -- a truncated
  last line (a killed writer), garbage lines, missing files, duplicated steps. Nothing is dropped
  without an issue that says so.

Failed and diverged runs are kept (with their status); :func:`exclusion_reason` says why a
run must not enter a fit. Per-item results (``eval_items.jsonl``) load with
:func:`load_eval_items` for the item bootstrap.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

RUN_MARKERS = ("metrics.jsonl", "config.yaml", "summary.json")
EVAL_KEY = re.compile(r"^eval/(?P<set>[^/]+)/(?P<metric>.+)$")
METRIC_COLUMNS = {"pass@1": "pass_rate"}
CORE_COLUMNS = ["sweep", "run_id", "status", "eval_set", "step", "compute", "compute_tokens",
                "wall_s", "pass_rate", "stderr", "n_items", "k"]
FIT_STATUSES = ("finished", "running", "unknown")
#: Training-row metrics kept in ``Results.train`` (analysis.claims reads them).
TRAIN_KEYS = ("rollout/response_len_incorrect", "policy/entropy", "policy/clip_frac",
              "rollout/truncated_frac",  # length run-aways (analysis.runaway)
              "rollout/response_len_incorrect_mixed")  # claim 1's exploratory line


@dataclass(frozen=True)
class LoadIssue:
    """Something in a run directory that could not be read as the contract says."""

    path: str
    kind: str  # truncated_line | garbage_line | missing_file | bad_file | duplicate_step | ...
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"[{self.kind}] {where}: {self.message}"


@dataclass
class Results:
    """Everything read from a results tree. ``config_columns`` lists the flattened config keys."""

    evals: pd.DataFrame
    runs: pd.DataFrame
    issues: list[LoadIssue] = field(default_factory=list)
    config_columns: list[str] = field(default_factory=list)
    root: str = ""
    train: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["sweep", "run_id", "step", *TRAIN_KEYS]))
    #: algo deviations from the preset that every run shares ('minibatches=8'): a setting of the
    #: study, like a spec's ``set:``, so they are left out of the ``algorithm`` labels
    shared_settings: list[str] = field(default_factory=list)


def flatten_config(cfg, prefix: str = "") -> dict:
    """Flatten nested mappings to dotted keys: {"algo": {"kl": 0.1}} -> {"algo.kl": 0.1}.

    Lists and other non-scalars become JSON strings so that every value can be grouped on."""
    out = {}
    if not isinstance(cfg, dict):
        return {prefix or "config": cfg}
    for key, value in cfg.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten_config(value, name))
        elif isinstance(value, (list, tuple, dict)):
            out[name] = json.dumps(value, sort_keys=True, default=str)
        else:
            out[name] = value
    return out


def find_run_dirs(path: str | os.PathLike) -> list[Path]:
    """All run directories at or below ``path`` (a directory holding any of RUN_MARKERS).

    Does not descend into a run directory (its ``checkpoints/`` and ``tb/``)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"results path does not exist: {root}")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if any(m in filenames for m in RUN_MARKERS):
            found.append(Path(dirpath))
            dirnames[:] = []
        else:
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(found)


def read_jsonl(path: Path, issues: list[LoadIssue]) -> list[tuple[int, dict]]:
    """Parse a JSONL file, returning (line number, object) pairs; bad lines become issues.

    A last line without a newline that does not parse is a truncated write (``truncated_line``);
    any other unparsable or non-object line is ``garbage_line``."""
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    ends_with_newline = raw.endswith(b"\n")
    rows = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_last = i == len(lines) and not ends_with_newline
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            kind = "truncated_line" if is_last else "garbage_line"
            snippet = line[:60].decode("utf-8", "replace")
            why = getattr(exc, "msg", None) or f"not text: {exc.reason}"  # UnicodeDecodeError has no msg
            issues.append(LoadIssue(str(path), kind, f"unparsable ({why}): {snippet!r}", i))
            continue
        if not isinstance(obj, dict):
            issues.append(LoadIssue(str(path), "garbage_line", f"not a JSON object: {obj!r:.60}", i))
            continue
        rows.append((i, obj))
    return rows


def _read_yaml(path: Path, issues: list[LoadIssue]) -> dict:
    if not path.exists():
        issues.append(LoadIssue(str(path), "missing_file", "no config.yaml: config columns are empty"))
        return {}
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        issues.append(LoadIssue(str(path), "bad_file", f"config.yaml does not parse: {exc}"))
        return {}
    if not isinstance(cfg, dict):
        issues.append(LoadIssue(str(path), "bad_file", "config.yaml is not a mapping"))
        return {}
    return cfg


def _read_summary(path: Path, issues: list[LoadIssue]) -> dict:
    if not path.exists():
        issues.append(LoadIssue(str(path), "missing_file", "no summary.json: status is 'unknown'"))
        return {}
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        issues.append(LoadIssue(str(path), "bad_file", f"summary.json does not parse: {exc.msg}"))
        return {}
    return summary if isinstance(summary, dict) else {}


def _as_number(value):
    if isinstance(value, bool) or value is None:
        return np.nan
    try:
        out = float(value)
    except (TypeError, ValueError):
        return np.nan
    return out


def parse_eval_row(obj: dict) -> list[dict]:
    """Split one ``eval`` row of metrics.jsonl into one tidy record per eval set."""
    per_set: dict[str, dict] = {}
    for key, value in obj.items():
        match = EVAL_KEY.match(key)
        if match is None:
            continue
        metric = METRIC_COLUMNS.get(match["metric"], match["metric"])
        per_set.setdefault(match["set"], {})[metric] = _as_number(value)
    base = {"step": obj.get("step"), "compute": _as_number(obj.get("compute/flops")),
            "compute_tokens": _as_number(obj.get("compute/tokens")),
            "wall_s": _as_number(obj.get("compute/wall_s"))}
    return [{**base, "eval_set": name, **metrics} for name, metrics in sorted(per_set.items())]


def _fp(d) -> str:
    """A fingerprint's one-line summary (harness.numerics.fingerprint); runs written before
    fingerprints were recorded (2026-12-05) read as 'unknown'."""
    return (d or {}).get("summary") or "unknown"


def _numerics(summary: dict) -> str:
    now = _fp(summary.get("numerics"))
    before = summary.get("numerics_before_resume")
    return f"{_fp(before)}, then {now}" if before else now


def numerics_line(runs: pd.DataFrame) -> str:
    """What the runs computed on. Fixed seeds reproduce only on the same numerics (CPU kernel
    path, torch, threads; harness.numerics): a study whose runs, or whose warm starts, did not
    share them is said to be mixed, and a rerun on other numerics is a new draw, not a copy."""
    if runs.empty:
        return "Numerics: no run."
    run_c = runs.get("numerics", pd.Series("unknown", index=runs.index)).fillna("unknown").value_counts()
    warm_c = runs.get("warm_numerics", pd.Series("unknown", index=runs.index)).fillna("unknown").value_counts()
    tail = (" Fixed seeds reproduce a run only on the same numerics: on another CPU's kernel path "
            "the warm start and every trajectory are another draw (LOG 2026-12-05).")
    if list(run_c.index) == ["unknown"] and list(warm_c.index) == ["unknown"]:
        return "Numerics: not recorded (runs written before fingerprints, 2026-12-05)." + tail
    if len(run_c) == 1 and len(warm_c) == 1:
        warm = "the same" if warm_c.index[0] == run_c.index[0] else warm_c.index[0]
        return f"Numerics: all {len(runs)} runs on {run_c.index[0]}; warm start built on {warm}." + tail
    show = lambda c: "; ".join(f"{n} on {k}" for k, n in c.items())  # noqa: E731
    return (f"Numerics **mixed**: runs {show(run_c)}; warm starts built (runs) {show(warm_c)}. "
            "These runs are not one machine's deterministic set." + tail)


def load_run(run_dir: Path, sweep: str, issues: list[LoadIssue],
             train: list[dict] | None = None,
             train_keys: tuple[str, ...] | None = TRAIN_KEYS) -> tuple[dict, list[dict]]:
    """Read one run directory: (run record with flattened config, list of tidy eval records).
    Training rows (their step and ``train_keys``; None = every metric) are appended to ``train``
    when given."""
    config = flatten_config(_read_yaml(run_dir / "config.yaml", issues))
    summary = _read_summary(run_dir / "summary.json", issues)
    status = str(summary.get("status", "unknown"))
    run = {"sweep": sweep, "run_id": run_dir.name, "run_dir": str(run_dir), "status": status,
           "last_step": summary.get("step"), "total_steps": summary.get("total_steps"),
           "error": summary.get("error"), "diverged_step": summary.get("diverged_step"),
           "numerics": _numerics(summary),
           "warm_numerics": _fp(((summary.get("warm_start") or {}).get("numerics")))}
    metrics = run_dir / "metrics.jsonl"
    records: list[dict] = []
    if not metrics.exists():
        issues.append(LoadIssue(str(metrics), "missing_file", "no metrics.jsonl: run has no evals"))
    else:
        seen: dict[tuple, int] = {}
        for lineno, obj in read_jsonl(metrics, issues):
            if obj.get("kind") != "eval":
                if obj.get("kind") not in ("train",):
                    issues.append(LoadIssue(str(metrics), "garbage_line",
                                            f"unknown row kind {obj.get('kind')!r}", lineno))
                elif train is not None and isinstance(obj.get("step"), int):
                    keys = train_keys if train_keys is not None else [
                        k for k in obj if k not in ("kind", "step")]
                    train.append({"step": obj["step"],
                                  **{k: _as_number(obj.get(k)) for k in keys}})
                continue
            step = obj.get("step")
            if not isinstance(step, int) or isinstance(step, bool):
                issues.append(LoadIssue(str(metrics), "garbage_line",
                                        f"eval row without an integer step: {step!r}", lineno))
                continue
            for rec in parse_eval_row(obj):
                key = (step, rec["eval_set"])
                if key in seen:
                    issues.append(LoadIssue(str(metrics), "duplicate_step",
                                            f"step {step} set {rec['eval_set']} repeated; the "
                                            f"later row (line {lineno}) replaces line {seen[key]}",
                                            lineno))
                    records = [r for r in records if (r["step"], r["eval_set"]) != key]
                seen[key] = lineno
                records.append(rec)
    run["n_eval_rows"] = len(records)
    return {**run, **{f"cfg::{k}": v for k, v in config.items()}}, records


def _split_config_names(frame: pd.DataFrame, reserved: set[str]) -> tuple[pd.DataFrame, list[str]]:
    """Rename ``cfg::key`` columns to ``key`` (or ``config.key`` where a core name is taken)."""
    renames, cfg_cols = {}, []
    for col in frame.columns:
        if col.startswith("cfg::"):
            name = col[5:]
            name = f"config.{name}" if name in reserved else name
            renames[col] = name
            cfg_cols.append(name)
    return frame.rename(columns=renames), cfg_cols


def load_results(path: str | os.PathLike,
                 train_keys: tuple[str, ...] | None = TRAIN_KEYS,
                 up_to_step: int | None = None) -> Results:
    """Load every run at or below ``path`` into a :class:`Results` (see the module docstring).
    ``train_keys``: the training metrics kept in ``train`` (None: all of them). ``up_to_step``:
    keep only the eval and train rows at or before that step (every run as it stood then: what
    an interim look saw; the runs' configs and summaries are kept as they are)."""
    root = Path(path)
    issues: list[LoadIssue] = []
    run_dirs = find_run_dirs(root)
    if not run_dirs:
        issues.append(LoadIssue(str(root), "missing_file", "no run directories found"))
    run_rows, eval_rows, train_rows = [], [], []
    for run_dir in run_dirs:
        rel_parent = run_dir.parent.relative_to(root) if run_dir != root else None
        sweep = str(rel_parent) if rel_parent not in (None, Path(".")) else run_dir.parent.name
        steps: list[dict] = []
        run, records = load_run(run_dir, sweep, issues, steps, train_keys)
        run_rows.append(run)
        identity = {"sweep": sweep, "run_id": run["run_id"], "status": run["status"]}
        eval_rows.extend({**identity, **rec} for rec in records)
        train_rows.extend({"sweep": sweep, "run_id": run["run_id"], **row} for row in steps)
    if len({(r["sweep"], r["run_id"]) for r in run_rows}) < len(run_rows):
        issues.append(LoadIssue(str(root), "duplicate_run", "two run directories share a sweep "
                                "and run_id; use the run_dir column to tell them apart"))
    runs = pd.DataFrame(run_rows)
    reserved = set(CORE_COLUMNS) | set(runs.columns) - {c for c in runs.columns if c.startswith("cfg::")}
    runs, cfg_cols = _split_config_names(runs, reserved | {"eval_set", "response_len"})
    shared: list[str] = []
    if "algo.preset" in runs.columns and "algo.deviates_from_preset" in runs.columns \
            and "algorithm" not in runs.columns:
        shared = shared_deviations(runs)
        runs["algorithm"] = [algorithm_label(r, drop=shared) for _, r in runs.iterrows()]
        cfg_cols.append("algorithm")
    evals = pd.DataFrame(eval_rows)
    if evals.empty:
        evals = pd.DataFrame(columns=CORE_COLUMNS)
    for col in CORE_COLUMNS:
        if col not in evals.columns:
            evals[col] = np.nan
    if cfg_cols:
        evals = evals.merge(runs[["sweep", "run_id", "run_dir"] + cfg_cols],
                            on=["sweep", "run_id"], how="left")
    extra = [c for c in evals.columns if c not in CORE_COLUMNS and c not in cfg_cols]
    evals = evals[CORE_COLUMNS + extra + cfg_cols]
    evals = evals.sort_values(["sweep", "run_id", "eval_set", "step"], kind="stable")
    evals["step"] = evals["step"].astype("int64") if len(evals) else evals["step"]
    keys = train_keys if train_keys is not None else list(dict.fromkeys(
        k for row in train_rows for k in row if k not in ("sweep", "run_id", "step")))
    train = pd.DataFrame(train_rows, columns=["sweep", "run_id", "step", *keys])
    if up_to_step is not None:
        evals, train = evals[evals["step"] <= up_to_step], train[train["step"] <= up_to_step]
        train = train.reset_index(drop=True)
    return Results(evals=evals.reset_index(drop=True), runs=runs, issues=issues,
                   config_columns=cfg_cols, root=str(root), train=train,
                   shared_settings=[f"algo.{d}" for d in shared])


def _deviations(run: pd.Series | dict) -> list[str]:
    try:
        keys = json.loads(run.get("algo.deviates_from_preset") or "[]")
    except (TypeError, ValueError):
        keys = []
    return [f"{k}={_short(run.get(f'algo.{k}'))}" for k in keys]


def shared_deviations(runs: pd.DataFrame) -> list[str]:
    """The 'key=value' deviations from the preset that every run shares, in the order the first
    run lists them. They are the study's setting (an off-policy regime sets algo.minibatches = 8
    for every arm, as a spec's ``set:`` does), not what tells its variants apart, so the labels
    leave them out, like the planner's (:mod:`analysis.schedule`) do for ``set:`` keys; the
    report names them once."""
    if runs.empty:
        return []
    per_run = [_deviations(r) for _, r in runs.iterrows()]
    common = set(per_run[0]).intersection(*map(set, per_run[1:]))
    return [d for d in per_run[0] if d in common]


def algorithm_label(run: pd.Series | dict, drop=()) -> str:
    """A run's algorithm as the harness records it: the preset plus every algo key the config
    set to another value ('grpo', 'grpo+clip_high=0.28'), less the deviations in ``drop`` (those
    every run of the study shares: :func:`shared_deviations`). One column, so a preset grid with
    a few single-choice ablations groups as one variant axis instead of many sparse ones."""
    return str(run.get("algo.preset")) + "".join(f"+{d}" for d in _deviations(run)
                                                  if d not in drop)


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


def exclusion_reason(run: pd.Series | dict) -> str | None:
    """Why a run must not enter a fit (None if it may): failed or diverged status."""
    status = run.get("status")
    if status in FIT_STATUSES:
        return None
    if status == "diverged":
        step = run.get("diverged_step")
        where = "" if step is None or (isinstance(step, float) and math.isnan(step)) else f" at step {int(step)}"
        return f"diverged{where}" + (f": {run.get('error')}" if run.get("error") else "")
    if status == "failed":
        return "failed" + (f": {run.get('error')}" if run.get("error") else "")
    return f"status {status!r} is not one of {FIT_STATUSES}"


def load_eval_items(run_dir: str | os.PathLike, issues: list[LoadIssue] | None = None
                    ) -> dict[tuple[int, str], np.ndarray]:
    """Read ``eval_items.jsonl``: {(step, set): per-item fraction of k samples correct}.

    Returns an empty dict when the file is absent. Bad lines are appended to ``issues``."""
    path = Path(run_dir) / "eval_items.jsonl"
    issues = [] if issues is None else issues
    if not path.exists():
        return {}
    out = {}
    for lineno, obj in read_jsonl(path, issues):
        try:
            key = (int(obj["step"]), str(obj["set"]))
            values = np.asarray(obj["correct"], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            issues.append(LoadIssue(str(path), "garbage_line", f"bad item row: {exc}", lineno))
            continue
        if values.ndim != 1 or not np.isfinite(values).all():
            issues.append(LoadIssue(str(path), "garbage_line", "correct is not a finite list", lineno))
            continue
        out[key] = values
    return out


@dataclass
class Frames:
    """The tidy frames of a results tree: the DataFrame API (documented in analysis/frames.py)."""

    runs: pd.DataFrame
    evals: pd.DataFrame
    train: pd.DataFrame
    issues: list[LoadIssue] = field(default_factory=list)
    config_columns: list[str] = field(default_factory=list)


def load_frames(path: str | os.PathLike) -> Frames:
    """Every run at or below ``path``: runs, evals and train rows with the config as columns."""
    r = load_results(path, train_keys=None)
    cfg = list(r.config_columns)
    train = r.train
    if cfg and len(r.runs):
        train = train.merge(r.runs[["sweep", "run_id", *cfg]], on=["sweep", "run_id"], how="left")
    else:
        train = train.reindex(columns=[*train.columns, *cfg])
    runs = r.runs if len(r.runs.columns) else pd.DataFrame(columns=["sweep", "run_id", "status"])
    return Frames(runs=runs, evals=r.evals, train=train.reset_index(drop=True),
                  issues=list(r.issues), config_columns=cfg)


class _CallableModule(types.ModuleType):
    """``from analysis import load; load(path)``: this module, called, is
    :func:`load_frames` (the DataFrame API documented in analysis/frames.py). Python's documented way
    to customise a module (assigning its ``__class__``, docs: "Customizing module attribute
    access"); ``analysis.load.load_results`` and the rest stay as they are."""

    def __call__(self, path: str | os.PathLike) -> Frames:
        return load_frames(path)


sys.modules[__name__].__class__ = _CallableModule
