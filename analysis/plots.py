"""PNG figures of the analysis (matplotlib, Agg backend; every function returns the file path).

* :func:`plot_curves` -- pass rate against training compute (log axis) per scale: seed-mean
  points, individual runs faint, and the fitted ScaleRL curve
  R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (arXiv 2510.13786) of each variant.
* :func:`plot_extrapolation` -- curves fitted on the first part of compute, extended past the
  cut-off, against the observed later points.
* :func:`plot_leaderboard` -- A with its CI beside B with its CI, per scale.
* :func:`plot_gains` -- gain over the base model per eval set (OXRL, arXiv 2603.19335).
* :func:`plot_ranks` -- rank of each variant across model scales.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.bootstrap import window_curve  # noqa: E402
from analysis.fit import FitError, FitWindow  # noqa: E402
from analysis.bootstrap import fit_curve_data  # noqa: E402
from analysis.groups import GroupFit, scale_sort_key  # noqa: E402

DPI = 110


MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", "-.", ":")


def _colours(variants) -> dict:
    """A colour per variant: tab10 up to 10 variants, tab20 beyond (then the marker and line
    style of :func:`_styles` tell the pairs apart too)."""
    names = sorted(set(variants))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {v: cmap(i % cmap.N) for i, v in enumerate(names)}


def _styles(variants) -> dict:
    """variant -> (colour, marker, line style): no two variants share all three."""
    colours = _colours(variants)
    return {v: (colours[v], MARKERS[i % len(MARKERS)], LINESTYLES[(i // len(MARKERS)) % len(LINESTYLES)])
            for i, v in enumerate(sorted(colours))}


def _save(fig, path: Path, legend: tuple | None = None) -> Path:
    """Lay out, write and close; ``legend`` (handles, labels) goes under the panels."""
    if legend is not None:
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        fig.legend(*legend, loc="lower center", ncol=len(legend[0]), fontsize=8, frameon=False)
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _panels(n: int, width: float = 5.2, height: float = 4.0):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, axes[0]


def _style_compute_axes(ax, eval_set: str, title: str) -> None:
    """Log-compute x axis, pass-rate y axis, grid, and a legend when something is labelled."""
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap on short ranges
    ax.set_xlabel("training compute (FLOPs, log scale)")
    ax.set_ylabel(f"pass@1 on {eval_set}")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    handles = ax.get_legend_handles_labels()[0]
    if len(handles) > 4:  # many variants: beside the panel, where it covers no point
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    elif handles:
        ax.legend(fontsize=7, loc="lower right")


def plot_curves(fits: list[GroupFit], eval_set: str, path: Path, title: str = "") -> Path:
    """Curves and fits of every group on ``eval_set``, one panel per scale."""
    groups = [g for g in fits if g.level == "group" and g.eval_set == eval_set and g.curve.runs]
    scales = sorted({g.scale for g in groups}, key=scale_sort_key)
    styles = _styles(g.variant for g in groups)
    fig, axes = _panels(max(1, len(scales)))
    for ax, scale in zip(axes, scales):
        for g in (g for g in groups if g.scale == scale):
            col, marker, ls = styles[g.variant]
            for run in g.curve.runs:
                ax.plot(run.compute, run.y, ".", color=col, alpha=0.18, ms=3)
            mean = g.curve.mean_curve()
            label = g.variant
            if g.fit is not None:
                f = g.fit
                c = np.geomspace(mean["compute"].min() / 2, mean["compute"].max() * 1.5, 200)
                ax.plot(c, f.predict(c), ls, color=col, lw=1.8)
                label += f"  (A={f.A:.3f}, B={f.B:.2f})"
            else:
                label += "  (no fit)"
            ax.plot(mean["compute"], mean["pass_rate"], marker, color=col, ms=4, label=label,
                    ls="none")
            ax.axhline(g.curve.R0, color=col, ls=":", lw=0.8)
        _style_compute_axes(ax, eval_set, f"scale {scale}" if scale != "all" else "all runs")
    fig.suptitle(title or f"Pass rate vs compute with ScaleRL fits ({eval_set}); "
                 "dotted lines: R0 (step 0)", fontsize=10)
    return _save(fig, path)


def plot_extrapolation(fits: list[GroupFit], eval_set: str, fraction: float,
                       window: FitWindow, path: Path) -> Path:
    """Fit on compute <= fraction * C_max, extend the curve, overlay the later observations."""
    groups = [g for g in fits if g.level == "group" and g.eval_set == eval_set and g.fit]
    scales = sorted({g.scale for g in groups}, key=scale_sort_key)
    colours = _colours(g.variant for g in groups)
    fig, axes = _panels(max(1, len(scales)))
    for ax, scale in zip(axes, scales):
        for g in (g for g in groups if g.scale == scale):
            col = colours[g.variant]
            mean = g.curve.mean_curve()
            cut = fraction * mean["compute"].max()
            early = mean["compute"] <= cut
            ax.plot(mean["compute"][early], mean["pass_rate"][early], "o", color=col, ms=3)
            ax.plot(mean["compute"][~early], mean["pass_rate"][~early], "x", color=col, ms=5)
            try:
                part = fit_curve_data(window_curve(g.curve, FitWindow(
                    window.start_fraction, window.start_step, fraction)))
            except FitError:
                continue
            c = np.geomspace(mean["compute"].min() / 2, mean["compute"].max() * 1.5, 200)
            ax.plot(c, part.predict(c), "--", color=col, lw=1.5, label=f"{g.variant}")
            ax.axvline(cut, color="grey", ls=":", lw=0.8)
        _style_compute_axes(ax, eval_set,
                            f"scale {scale}: fit on first {fraction:.0%} (o), predict the rest (x)")
    return _save(fig, path)


def plot_leaderboard(board: pd.DataFrame, path: Path, margin: float) -> Path:
    """Two columns per scale: A with its 95% CI (the +-margin band around the best A shaded)
    and B with its CI; variants ordered by rank."""
    scales = sorted(board["scale"].unique(), key=scale_sort_key) if len(board) else []
    fig, axes = plt.subplots(max(1, len(scales)), 2, squeeze=False,
                             figsize=(10, 0.5 + 0.45 * max(3, board.groupby("scale").size().max()
                                                               if len(board) else 3)
                                      * max(1, len(scales))))
    legend = None
    for (ax_a, ax_b), scale in zip(axes, scales):
        b = board[board["scale"] == scale].sort_values("rank", na_position="last")
        y = np.arange(len(b))[::-1]
        conv = b["identified"].fillna(False).astype(bool).to_numpy() if "identified" in b else \
            np.ones(len(b), bool)
        for ax, name in ((ax_a, "A"), (ax_b, "B")):
            val = b[name].to_numpy(float)
            lo_b, hi_b = b[f"{name}_lo"].to_numpy(float), b[f"{name}_hi"].to_numpy(float)
            if name == "A":  # a pass rate: the interval is drawn inside [0, 1]
                lo_b, hi_b = np.clip(lo_b, 0, 1), np.clip(hi_b, 0, 1)
            lo = np.clip(val - lo_b, 0, None)
            hi = np.clip(hi_b - val, 0, None)
            for mask, style in ((conv, dict(fmt="o", color="C0")),
                                (~conv, dict(fmt="o", color="C0", mfc="white", alpha=0.6))):
                if mask.any():
                    ax.errorbar(val[mask], y[mask], xerr=[np.nan_to_num(lo[mask]),
                                np.nan_to_num(hi[mask])], capsize=3, **style)
            ax.set_yticks(y, [f"#{int(r)} {v}" if pd.notna(r) else f"-- {v}"
                              for r, v in zip(b["rank"], b["variant"])])
            ax.grid(alpha=0.3, axis="x")
        ax_a.set_xlim(0, 1)
        if (b["B"] > 0).any():
            ax_b.set_xscale("log")
        if (b["A"].notna() & conv).any():  # the band marks the best ranked (identified) A
            best = b["A"][conv].max()
            ax_a.axvspan(best - margin, best + margin, color="orange", alpha=0.15,
                         label=f"best A +- {margin}")
            if (~conv & b["A"].notna().to_numpy()).any():
                ax_a.plot([], [], "o", mfc="white", color="C0", label="not identified (unranked)")
            legend = ax_a.get_legend_handles_labels()  # drawn once, under the panels
        elif b["A"].notna().any():  # fitted, none identified: say so above the panel, not on it
            ax_a.plot([], [], "o", mfc="white", color="C0", label="not identified (unranked)")
            legend = ax_a.get_legend_handles_labels()
        else:
            for ax in (ax_a, ax_b):
                ax.text(0.5, 0.5, "no fitted curve at this scale\n(see the report's notes)",
                        ha="center", va="center", transform=ax.transAxes, fontsize=9, color="grey")
        ax_a.set_xlabel("asymptote A (pass rate), 95% CI")
        ax_b.set_xlabel("scaling exponent B, 95% CI (log)")
        none = "" if conv.any() or not b["A"].notna().any() else " (none identified)"
        ax_a.set_title(f"scale {scale}: asymptote A{none}")
        ax_b.set_title(f"scale {scale}: efficiency B")
    return _save(fig, path, legend)  # under the panels, where it can cover no data row


def plot_gains(gains: pd.DataFrame, path: Path) -> Path:
    """Grouped bars: gain over base (final - R0, 95% CI) per variant, one bar per eval set."""
    scales = sorted(gains["scale"].unique(), key=scale_sort_key) if len(gains) else []
    n_var = gains["variant"].nunique() if len(gains) else 1
    # horizontal bars: a variant's name is a y label, so many long names never overlap
    fig, axes = _panels(max(1, len(scales)), width=5.5, height=max(3.0, 1.2 + 0.42 * n_var))
    sets = sorted(gains["eval_set"].unique(), key=lambda s: (s != "in_dist", s)) if len(gains) else []
    for ax, scale in zip(axes, scales):
        g = gains[gains["scale"] == scale]
        variants = sorted(g["variant"].unique(), reverse=True)  # alphabetical from the top
        y = np.arange(len(variants))
        height = 0.8 / max(1, len(sets))
        for i, s in enumerate(sets):
            rows = g[g["eval_set"] == s].set_index("variant").reindex(variants)
            val = 100 * rows["gain"].to_numpy(float)
            err = 100 * np.vstack([rows["gain"] - rows["gain_lo"], rows["gain_hi"] - rows["gain"]])
            ax.barh(y - (i - (len(sets) - 1) / 2) * height, val, height, label=s,
                    xerr=np.nan_to_num(np.abs(err)), capsize=3)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y, variants, fontsize=8)
        ax.set_xlabel("gain over base, final - R0 (pass@1 points, 95% CI)")
        ax.set_title(f"scale {scale}: in-distribution vs held-out gains")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="x")
    return _save(fig, path)


def plot_ranks(ranks: pd.DataFrame, taus: pd.DataFrame, path: Path) -> Path:
    """Rank of each variant at each model scale (1 = best), with Kendall tau in the title."""
    scales = [c for c in ranks.columns if c != "variant"]
    fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(scales) + 3), 4))
    colours = _colours(ranks["variant"])
    x = np.arange(len(scales))
    for _, row in ranks.iterrows():
        ax.plot(x, row[scales].to_numpy(float), "o-", color=colours[row["variant"]],
                label=row["variant"])
    ax.set_xticks(x, [str(s) for s in scales])
    ax.set_xlabel("model scale")
    ax.set_ylabel("rank by the ScaleRL rule (1 = best)")
    ax.invert_yaxis()
    ax.yaxis.get_major_locator().set_params(integer=True)
    tau_txt = ", ".join(f"tau({r.scale_a},{r.scale_b})={r.kendall_tau:+.2f}"
                        for r in taus.itertuples()) if len(taus) else ""
    ax.set_title(f"Rank across scale  {tau_txt}", fontsize=9)
    ax.legend(fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    ax.grid(alpha=0.3)
    return _save(fig, path)
