"""The static report renders properly (issue 20): report.html shows the report's Markdown as
HTML (no raw `**`), ranks print as integers, every one of many variants has its own colour /
marker / line style, and the gains plot puts variant names on the y axis (no overlapping labels)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from analysis.synth import write_demo_sweep

ALGOS = {"grpo": (0.60, 1.4, 0.40), "dapo": (0.68, 1.8, 0.41), "cispo": (0.74, 1.8, 0.42)}


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    from analysis.report import AnalysisOptions, run_analysis
    root = tmp_path_factory.mktemp("render") / "sw"
    write_demo_sweep(root, algos=ALGOS, scales=("0.5B", "1.5B"), seeds=(0, 1), n_items=100,
                     steps=120, eval_every=20)
    return run_analysis(AnalysisOptions(results_dir=str(root), out=str(root.parent / "o"),
                                        n_boot=40, calibrate=0))


def test_html_renders_the_markdown(done):
    md = (done["out"] / "report.md").read_text()
    page = (done["out"] / "report.html").read_text()
    assert "**" in md and "`" in md  # the Markdown has bold and code ...
    body = re.sub(r"<table.*?</table>", "", page, flags=re.S)
    assert "**" not in body and "<strong>" in page and "<code>" in page  # ... the HTML renders it
    assert "<h1>rlablate analysis</h1>" in page


def test_ranks_print_as_integers(done):
    from analysis.report import _as_ranks, format_markdown_table
    ranks = pd.DataFrame({"variant": ["a", "b", "c"], "0.5B": [1.0, 2.0, float("nan")],
                          "1.5B": [2.0, 1.0, 3.0]})
    text = format_markdown_table(_as_ranks(ranks))
    assert "| a | 1 | 2 |" in text and "| c |  | 3 |" in text and "1.000" not in text
    board = format_markdown_table(pd.DataFrame({"rank": [1.0, float("nan")], "n_runs": [2.0, 3.0],
                                                "A": [0.5, 0.25]}))
    assert "| 1 | 2 | 0.500 |" in board and "|  | 3 | 0.250 |" in board
    md = (done["out"] / "report.md").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("| scale | rank |")]
    assert lines
    for header in lines:  # every leaderboard's rank column: empty or an integer
        rows = md.split(header, 1)[1].strip().splitlines()[1:]
        for row in rows:
            if not row.startswith("|"):
                break
            rank = row.split("|")[2].strip()
            assert rank == "" or rank.isdigit(), row


def test_thirteen_variants_are_thirteen_styles():
    from analysis.plots import _styles
    st = _styles([f"variant{i}" for i in range(13)])
    assert len(set(st.values())) == 13
    assert len({c for c, _, _ in st.values()}) == 13  # tab20: 13 distinct colours


def test_gains_plot_puts_variant_names_on_the_y_axis(done, tmp_path):
    import matplotlib.pyplot as plt
    from analysis import plots
    captured = {}
    real = plots._save

    def keep(fig, path, legend=None):
        captured["labels"] = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        return real(fig, path, legend)
    plots._save = keep
    try:
        plots.plot_gains(done["tables"]["gains"], tmp_path / "g.png")
    finally:
        plots._save = real
        plt.close("all")
    assert captured["labels"] == ["grpo", "dapo", "cispo"]  # alphabetical from the top
    assert (tmp_path / "g.png").stat().st_size > 5000
