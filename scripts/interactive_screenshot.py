"""Screenshot of an interactive leaderboard page (analysis/interactive.py) in headless Chromium.

    python scripts/interactive_screenshot.py results/demo/interactive.html docs/img/interactive.png
    python scripts/interactive_screenshot.py --synthetic docs/img/interactive.png

`--synthetic` first writes and analyses the synthetic sweep of tests/test_report.py (four presets
with known curves, two scales, three seeds: analysis/synth.py) into a temporary folder. The browser
is the system's chromium-headless-shell (or $RLABLATE_CHROMIUM), driven by Playwright.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ALGOS = {"grpo": (0.60, 1.4, 0.40), "dr_grpo": (0.605, 2.6, 0.40),
         "dapo": (0.66, 1.8, 0.41), "cispo": (0.72, 1.8, 0.42)}


def synthetic_page(tmp: Path) -> Path:
    from analysis.report import AnalysisOptions, run_analysis
    from analysis.synth import write_demo_sweep
    write_demo_sweep(tmp / "sweep", algos=ALGOS, scales=("0.5B", "1.5B"), seeds=(0, 1, 2),
                     n_items=200, steps=200, eval_every=20)
    return run_analysis(AnalysisOptions(results_dir=str(tmp / "sweep"), out=str(tmp / "out"),
                                        n_boot=200, calibrate=0))["interactive"]


def shoot(page_path: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright
    exe = os.environ.get("RLABLATE_CHROMIUM") or shutil.which("chromium-headless-shell") \
        or shutil.which("chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 820})
        page.goto(Path(page_path).resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_timeout(500)
        page.screenshot(path=str(out))
        browser.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--synthetic":
        with tempfile.TemporaryDirectory() as d:
            shoot(synthetic_page(Path(d)), Path(args[1]))
    else:
        shoot(Path(args[0]), Path(args[1]))
    print(args[-1])
