"""End to end: ``rlablate analyze`` (analysis/cli.py) on a synthetic sweep with known curves
writes every file, and their content matches the truth the sweep was made from."""
import argparse
import base64
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.cli import add_analyze_parser, run_analyze
from analysis.synth import CurveSpec, RunSpec, make_config, write_demo_sweep, write_run

# name -> (A in-dist, B, A held-out) at the small scale; the larger scale adds 0.05 to A and
# swaps the order of the last two (dapo and cispo), so the ranking must invert across scale.
ALGOS = {"grpo": (0.60, 1.4, 0.40), "dr_grpo": (0.605, 2.6, 0.40),
         "dapo": (0.66, 1.8, 0.41), "cispo": (0.72, 1.8, 0.42)}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("results") / "sweep1"
    write_demo_sweep(root, algos=ALGOS, scales=("0.5B", "1.5B"), seeds=(0, 1, 2), n_items=200,
                     steps=200, eval_every=20)
    bad = RunSpec(config=make_config("cispo", "0.5B", 9), steps=200, eval_every=20,
                  curves={"in_dist": CurveSpec(0.7, 1.8, 4e13, 0.3)}, status="diverged",
                  diverged_step=60)
    write_run(root / "cispo-0.5B-s9", bad)
    with open(root / "grpo-0.5B-s0" / "metrics.jsonl", "a") as fh:
        fh.write('{"kind": "eval", "step": 999, "compute/fl')  # a killed writer
    # the spec a sweep saves with its runs: the report quotes what it chose to run
    (root / "spec.yaml").write_text("name: sweep1\ndescription: four presets, two scales, "
                                    "3 seeds; the budget went to seeds\n")
    out = root.parent / "report"
    parser = argparse.ArgumentParser(prog="rlablate")
    add_analyze_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["analyze", str(root), "--out", str(out), "--bootstrap", "200",
                              "--seed", "1", "--calibrate", "30"])
    assert args.func is run_analyze
    assert run_analyze(args) == 0
    return out


def test_every_file_is_written(analysed):
    for name in ("report.md", "report.html", "leaderboard.csv", "fits.csv", "comparisons.csv",
                 "gains.csv", "extrapolation.csv", "curves_in_dist.png", "curves_held_out.png",
                 "leaderboard.png", "gains.png", "ranks.png", "extrapolation.png"):
        path = analysed / name
        assert path.exists() and path.stat().st_size > 200, name
    assert (analysed / "ranks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_quotes_the_sweep_spec(analysed):
    text = (analysed / "report.md").read_text()
    assert "Sweep `sweep1`: four presets, two scales, 3 seeds; the budget went to seeds" in text


def test_leaderboard_ranks_the_known_higher_A_first(analysed):
    board = pd.read_csv(analysed / "leaderboard.csv")
    small = board[board["scale"] == "0.5B"].sort_values("rank")
    large = board[board["scale"] == "1.5B"].sort_values("rank")
    assert small["variant"].iloc[0] == "cispo" and large["variant"].iloc[0] == "dapo"
    assert small["variant"].tolist()[:2] == ["cispo", "dapo"]
    assert set(small["variant"].tolist()[2:]) == {"grpo", "dr_grpo"}
    top = small.iloc[0]
    assert top["A"] == pytest.approx(0.72, abs=0.02)
    assert top["A_lo"] < top["A"] < top["A_hi"]
    assert top["B_lo"] < top["B"] < top["B_hi"] and top["ci_method"] == "seeds"
    assert large.iloc[0]["A"] == pytest.approx(0.77, abs=0.02)


def test_comparisons_report_the_deciding_axis(analysed):
    comps = pd.read_csv(analysed / "comparisons.csv")
    small = comps[comps["scale"] == "0.5B"].set_index(["first", "second"])
    assert small.loc[("cispo", "dapo"), "decided_by"] == "A"
    last = comps[(comps["scale"] == "0.5B") & comps["first"].isin(["grpo", "dr_grpo"])
                 & comps["second"].isin(["grpo", "dr_grpo"])].iloc[0]
    assert last["decided_by"] == "B" and last["winner"] == "dr_grpo"  # same A, higher B
    # A equal to 0.005: decided by B, and the A intervals overlap (the order by A is no result)
    assert last["A_cis_overlap"] == True  # noqa: E712 (a numpy/pandas bool, not None)
    md = (analysed / "report.md").read_text()
    assert "decided by A" in md and "decided by B" in md
    assert re.search(r"0.5B: (dr_grpo vs grpo|grpo vs dr_grpo): decided by B", md)


def test_fits_csv_has_groups_and_runs_and_excludes_the_diverged_run(analysed):
    fits = pd.read_csv(analysed / "fits.csv")
    groups = fits[fits["level"] == "group"]
    assert len(groups) == 4 * 2 * 2  # variants x scales x eval sets
    assert (fits["level"] == "run").sum() == 24 * 2
    assert not fits["runs"].fillna("").str.contains("s9").any()
    md = (analysed / "report.md").read_text()
    assert "cispo-0.5B-s9" in md and "diverged at step 60" in md
    assert "truncated_line" in md  # the killed writer is reported


def test_gains_scale_and_extrapolation_content(analysed):
    gains = pd.read_csv(analysed / "gains.csv")
    cispo = gains[(gains["variant"] == "cispo") & (gains["scale"] == "0.5B")].set_index("eval_set")
    assert cispo.loc["in_dist", "gain"] > 5 * cispo.loc["held_out", "gain"]
    assert cispo.loc["in_dist", "gain_lo"] < cispo.loc["in_dist", "gain"] < cispo.loc["in_dist", "gain_hi"]
    extrap = pd.read_csv(analysed / "extrapolation.csv")
    assert len(extrap) == 8 and (extrap["rmse"] < 0.05).all() and (extrap["n_heldout"] > 0).all()
    md = (analysed / "report.md").read_text()
    assert "kendall_tau" in md and "rank inversion" in md
    assert "| 0.5B | 1.5B | cispo | dapo |" in md  # the planted inversion is flagged


def test_html_is_self_contained(analysed):
    html = (analysed / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) >= 6
    assert base64.b64decode(images[0])[:4] == b"\x89PNG"
    assert not re.search(r'src="(?!data:)', html)


def test_python_dash_m_analysis_and_clear_errors(tmp_path):
    root = tmp_path / "one"
    write_demo_sweep(root, algos={"grpo": (0.6, 1.5, 0.4)}, scales=("0.5B",), seeds=(0,),
                     n_items=None, steps=120, eval_every=20)
    repo = Path(__file__).resolve().parents[1]
    ok = subprocess.run([sys.executable, "-m", "analysis", str(root), "--bootstrap", "0",
                         "--no-run-fits", "--out", str(tmp_path / "o")],
                        cwd=repo, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "o" / "leaderboard.csv").exists()
    from analysis.cli import main
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(root), "--by", "no.such.axis", "--out", str(tmp_path / "o2")]) == 2


def test_the_report_carries_the_calibration_table(analysed):
    text = (analysed / "report.md").read_text()
    assert "How far each verdict can be trusted" in text and "30 simulated sweeps" in text
    cal = pd.read_csv(analysed / "calibration.csv")
    assert {"moved A", "only B", "no effect", "claim 4 reproduces"} <= set(cal["verdict"])
    assert (cal["n_sweeps"] == 30).all()


def test_the_effects_table_carries_each_verdicts_false_positive_rate(analysed):
    eff = pd.read_csv(analysed / "effects.csv")
    asserting = eff["verdict"].str.startswith(("moved A", "only B", "no effect"))
    assert asserting.any()
    assert eff.loc[asserting, "fp_rate"].notna().all() and eff.loc[asserting, "fp_hi"].le(1).all()
    assert eff.loc[~asserting, "fp_rate"].isna().all()
    # each rate is the calibration's own false-positive rate of that verdict
    cal = pd.read_csv(analysed / "calibration.csv")
    fp = cal[cal["kind"] == "false positive"]
    for rec in eff[asserting].to_dict("records"):
        name = "moved A" if rec["verdict"].startswith("moved A") else rec["verdict"]
        assert rec["fp_rate"] in set(fp.loc[fp["verdict"] == name, "rate"]), rec
