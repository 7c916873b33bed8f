"""Grouping runs (by any config axis) and fitting every run and group with bootstrap CIs.

A *variant* is what a comparison is about (an algorithm, or one design choice); it is given by
``--by`` config columns, or detected as the config columns that vary across runs, excluding
the seed, the model scale and per-run labels (a column unique to every run, such as a run name).
A *group* is one variant at one scale: its runs differ only by seed. Failed and diverged runs
are kept in the tables but excluded from fits, with the reason recorded.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.bootstrap import (BootstrapResult, CurveData, bootstrap_fit, build_run_curve,
                                fit_curve_data, summarise_fit, window_curve)
from analysis.fit import FitError, FitResult, FitWindow
from analysis.load import Results, exclusion_reason, load_eval_items
from analysis.options import did_you_mean

SEED_NAMES = ("run.seed", "seed", "train.seed")
SCALE_NAMES = ("model.scale", "scale", "model.size")
PREFERRED_VARIANT = ("algorithm", "algo.name", "algo.preset", "preset", "algo")
#: bookkeeping keys that never define a variant (the harness leaves the same keys out of run_id)
PER_RUN_PATTERN = re.compile(
    r"^run\.(name|id|run_id|sweep|results_dir|cache_dir|threads)$|(^|[._])(dir|path|output)$")
ALL = "all"


@dataclass(frozen=True)
class Axes:
    """Columns that define variants, scale and seed."""

    variant: tuple[str, ...]
    scale: str | None
    seed: str | None


@dataclass
class GroupFit:
    """The fit of one group (or one run, level="run") on one eval set."""

    level: str  # "group" or "run"
    variant: str
    scale: str
    eval_set: str
    curve: CurveData  # all points of the group's runs (unwindowed)
    windowed: CurveData | None = None
    fit: FitResult | None = None
    boot: BootstrapResult | None = None
    error: str | None = None
    run_ids: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.level == "run" and self.run_ids:
            return self.run_ids[0]
        return self.variant if self.scale == ALL else f"{self.variant} @ {self.scale}"

    @property
    def notes(self) -> str:
        """Data notes (dropped points) and why the fit or its CIs were refused, if they were."""
        return "; ".join([n for r in self.curve.runs for n in r.notes]
                         + ([self.error] if self.error else []))


def _first_present(candidates, columns) -> str | None:
    for name in candidates:
        if name in columns:
            return name
    return None


def detect_axes(results: Results, by: list[str] | None = None, seed_col: str | None = None,
                scale_col: str | None = None) -> Axes:
    """Choose the seed, scale and variant columns (explicit arguments win; see module doc).

    ``scale_col="none"`` turns the scale axis off (all runs count as one scale)."""
    runs, cols = results.runs, results.config_columns
    for name in [*(by or []), seed_col, scale_col]:
        if name and name != "none" and name not in runs.columns:
            varying = [c for c in cols if runs[c].astype(str).nunique() > 1]
            raise FitError(f"unknown axis {name!r}" + did_you_mean(name, cols) + "; config "
                           f"columns that vary across these runs: {', '.join(varying) or '(none)'} "
                           f"({len(cols)} config columns in all)")
    seed = seed_col or _first_present(SEED_NAMES, cols) or next(
        (c for c in cols if c.endswith(".seed")), None)
    scale = None if scale_col == "none" else (scale_col or _first_present(SCALE_NAMES, cols))
    if by:
        return Axes(variant=tuple(c for c in by if c not in (seed, scale)), scale=scale, seed=seed)
    varying = [c for c in cols if c not in (seed, scale) and runs[c].astype(str).nunique() > 1]
    many_seeds = seed is not None and runs[seed].nunique() > 1
    order = [c for c in PREFERRED_VARIANT if c in varying] + sorted(
        c for c in varying if c not in PREFERRED_VARIANT)
    chosen: list[str] = []
    base = [scale] if scale else []
    for col in order:
        per_run = runs[col].astype(str).nunique() == len(runs) and len(runs) > 1
        if PER_RUN_PATTERN.search(col) or (per_run and many_seeds):
            continue
        before = runs.groupby(base + chosen, dropna=False).ngroups if base + chosen else 1
        after = runs.groupby(base + chosen + [col], dropna=False).ngroups
        if after > before:
            chosen.append(col)
    return Axes(variant=tuple(chosen), scale=scale, seed=seed)


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMbBtT]?)")
_UNIT = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def pilot_axes(results: Results) -> Axes:
    """:func:`detect_axes`, where a pilot of one algorithm (no varying key) is grouped by its
    ``algo.preset`` (the planner's and the wall estimate's reading of a pilot)."""
    axes = detect_axes(results)
    if not axes.variant and "algo.preset" in results.runs.columns:
        axes = detect_axes(results, by=["algo.preset"])
    return axes


def scale_sort_key(value) -> tuple:
    """Order model scales numerically: '0.5B' < '1.5B' < '7B' < '14B' (text sorts last)."""
    match = _SIZE.search(str(value))
    if not match:
        return (1, float("inf"), str(value))
    return (0, float(match[1]) * _UNIT[match[2].lower()], str(value))


def label_variant(values: dict) -> str:
    """'cispo' for one axis, 'algo.preset=cispo, algo.kl=k3' for several, 'all' for none."""
    if not values:
        return ALL
    if len(values) == 1:
        return str(next(iter(values.values())))
    return ", ".join(f"{k}={v}" for k, v in values.items())


def assign_groups(results: Results, axes: Axes) -> pd.DataFrame:
    """runs table plus ``variant``, ``scale_value`` and ``excluded`` (reason or None)."""
    runs = results.runs.copy()
    runs["variant"] = [label_variant({c: r[c] for c in axes.variant}) for _, r in runs.iterrows()]
    runs["scale_value"] = runs[axes.scale].astype(str) if axes.scale else ALL
    if axes.scale and "model.path" in runs.columns:
        # a pretrained model's size is named by its path (harness: model.scale = "pretrained")
        named = (runs["scale_value"] == "pretrained") & runs["model.path"].notna()
        runs.loc[named, "scale_value"] = [str(p).rstrip("/").split("/")[-1]
                                          for p in runs.loc[named, "model.path"]]
    runs["excluded"] = [exclusion_reason(r) for _, r in runs.iterrows()]
    return runs


def fit_all(results: Results, axes: Axes, *, window: FitWindow, n_boot: int = 1000,
            seed: int = 0, method: str = "auto", per_run: bool = True) -> list[GroupFit]:
    """Fit every group (and, with per_run, every run) on every eval set, with bootstrap CIs.

    Refusals (too few points, flat curves, no step-0 eval, ...) are kept as ``error`` text."""
    runs = assign_groups(results, axes)
    usable = runs[runs["excluded"].isna()]
    evals = results.evals.merge(usable[["sweep", "run_id", "variant", "scale_value"]],
                                on=["sweep", "run_id"])
    items_cache: dict[str, dict] = {}
    need_items = method in ("items", "seeds+items", "auto")

    def items_of(run_dir: str) -> dict:
        if run_dir not in items_cache:
            items_cache[run_dir] = load_eval_items(run_dir, results.issues) if need_items else {}
        return items_cache[run_dir]

    out: list[GroupFit] = []
    for (variant, scale, eval_set), sub in evals.groupby(["variant", "scale_value", "eval_set"],
                                                         sort=True):
        run_curves, errors, seeds = [], [], []
        for (sweep, run_id), run_rows in sub.groupby(["sweep", "run_id"], sort=True):
            row = usable.loc[(usable["sweep"] == sweep) & (usable["run_id"] == run_id)].iloc[0]
            try:
                run_curves.append(build_run_curve(run_rows, items_of(row["run_dir"]), eval_set))
                seeds.append(_seed_key(row.get(axes.seed) if axes.seed else None))
            except FitError as exc:
                errors.append(str(exc))
        # runs in seed order: replicate r of every group's seed bootstrap then draws the same
        # seeds (the bootstrap is paired across variants, analysis.effects.effect_intervals)
        order = sorted(range(len(run_curves)), key=lambda i: (seeds[i], run_curves[i].run_id))
        run_curves = [run_curves[i] for i in order]
        label = f"{variant} @ {scale} [{eval_set}]" if scale != ALL else f"{variant} [{eval_set}]"
        members = [CurveData(f"{r.run_id} [{eval_set}]", [r]) for r in run_curves] if per_run else []
        for member in members:
            out.append(_fit_one("run", member, window, n_boot, seed, method, variant, scale,
                                eval_set))
        if not run_curves:
            out.append(GroupFit("group", variant, scale, eval_set, CurveData(label, []),
                                error="; ".join(errors) or "no usable runs"))
            continue
        group = _fit_one("group", CurveData(label, run_curves), window, n_boot, seed, method,
                         variant, scale, eval_set)
        if errors:
            group.error = "; ".join(filter(None, [group.error, *errors]))
        out.append(group)
    return out


def _seed_key(value) -> tuple:
    """Sort key of a seed value: numbers numerically, then text, missing last."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return (2, 0.0, "")
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _fit_one(level, curve, window, n_boot, seed, method, variant, scale, eval_set) -> GroupFit:
    gf = GroupFit(level, variant, scale, eval_set, curve, run_ids=[r.run_id for r in curve.runs])
    gf.windowed = window_curve(curve, window)
    try:
        gf.fit = fit_curve_data(gf.windowed)
    except FitError as exc:
        gf.error = str(exc)
        return gf
    if n_boot >= 2:
        chosen = "seeds" if (method == "seeds+items" and not gf.windowed.has_items()) else method
        if level == "run" and "seeds" in chosen:
            chosen = "auto"
        try:
            gf.boot = bootstrap_fit(gf.windowed, n_boot, method=chosen, seed=seed, point=gf.fit)
        except FitError as exc:
            gf.error = f"no CIs: {exc}"
    return gf


def fits_table(fits: list[GroupFit]) -> pd.DataFrame:
    """One row per fit (groups and runs) for ``fits.csv``."""
    rows = []
    for gf in fits:
        rec = summarise_fit(gf.label, gf.fit, gf.boot, gf.notes)
        if gf.fit is not None:
            rec["message"] = "; ".join(filter(None, [rec["message"], gf.notes]))
        rows.append({"level": gf.level, "variant": gf.variant, "scale": gf.scale,
                     "eval_set": gf.eval_set, "n_runs": len(gf.run_ids),
                     "runs": " ".join(gf.run_ids), **rec})
    cols = ["level", "variant", "scale", "eval_set", "n_runs", "A", "A_lo", "A_hi", "B", "B_lo",
            "B_hi", "C_mid", "C_mid_lo", "C_mid_hi", "R0", "rmse", "n_points", "window",
            "converged", "identified", "A_prof_lo", "A_prof_hi", "noise", "lof_ratio",
            "boot_method", "ci_method", "boot_n", "boot_at_bound", "message", "runs", "group"]
    return pd.DataFrame(rows).reindex(columns=cols)


def up_to_common_step(df: pd.DataFrame, run_keys: list[str], by: list[str]) -> pd.DataFrame:
    """The rows of ``df`` at or before, per ``by`` group, the last step every run there reached
    (a run is identified by ``run_keys``): what "matched training" means when a sweep runs some
    variants longer than others."""
    if df.empty:
        return df
    last = df.groupby(run_keys, dropna=False)["step"].transform("max")
    common = last.groupby([df[c].astype(str) for c in by]).transform("min")
    return df[df["step"] <= common]


def final_points(results: Results, runs: pd.DataFrame) -> pd.DataFrame:
    """Per usable run and eval set: R0 (step 0) and the "final" eval (step, pass rate, stderr).

    Finals are compared across variants, so they are taken at matched training: the last eval at
    or before the *common step* of the run's scale and eval set, the largest step every run there
    reached. When all runs have the same length that is each run's last eval; when some runs are
    longer (a sweep that runs a few variants further to fit their asymptote), their later evals
    still enter the curve fits but not the final-vs-final comparisons."""
    usable = runs[runs["excluded"].isna()][["sweep", "run_id", "variant", "scale_value"]]
    ev = results.evals.merge(usable, on=["sweep", "run_id"])
    if ev.empty:
        return pd.DataFrame(columns=["sweep", "run_id", "variant", "scale_value", "eval_set",
                                     "r0", "final", "final_se", "final_step", "n_items"])
    ev = ev.sort_values("step")
    keys = ["sweep", "run_id", "variant", "scale_value", "eval_set"]
    ev = up_to_common_step(ev, keys, ["scale_value", "eval_set"])
    last = ev.groupby(keys).tail(1).set_index(keys)
    start = ev[ev["step"] == 0].groupby(keys)["pass_rate"].first()
    out = pd.DataFrame({"r0": start, "final": last["pass_rate"], "final_se": last["stderr"],
                        "final_step": last["step"], "n_items": last["n_items"]})
    return out.reset_index()


def summarise_groups(finals: pd.DataFrame) -> pd.DataFrame:
    """Per variant, scale, eval set: base R0, final pass rate, gain = final - R0 (mean over
    seeds) with a 95% t-interval over seeds (eval stderr when there is one seed), and the
    eval-noise standard error of the mean final pass rate."""
    from scipy import stats

    rows = []
    for (variant, scale, eval_set), g in finals.groupby(["variant", "scale_value", "eval_set"]):
        gains = (g["final"] - g["r0"]).to_numpy(float)
        n = int(np.isfinite(gains).sum())
        se_eval = float(np.sqrt(np.nansum(g["final_se"] ** 2)) / max(n, 1))
        if n >= 2:
            half = stats.t.ppf(0.975, n - 1) * np.nanstd(gains, ddof=1) / np.sqrt(n)
        else:
            half = 1.959964 * float(np.sqrt(2) * se_eval) if n else np.nan
        rows.append({"variant": variant, "scale": scale, "eval_set": eval_set, "n_runs": n,
                     "base": g["r0"].mean(), "final": g["final"].mean(), "final_se": se_eval,
                     "gain": np.nanmean(gains) if n else np.nan,
                     "gain_lo": np.nanmean(gains) - half if n else np.nan,
                     "gain_hi": np.nanmean(gains) + half if n else np.nan,
                     "n_items": g["n_items"].median()})
    return pd.DataFrame(rows)
