"""analysis/interactive.py: the interactive leaderboard page, loaded in a real headless Chromium
(Playwright driving the system's chromium-headless-shell; `make setup` installs it as root): no
console error, no network request (the page is self-contained), every tab draws its curves, the
legend toggles a variant, hover shows values, tables sort, and a screenshot's pixels show the
curves in the variants' colours."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from analysis.synth import write_demo_sweep

ALGOS = {"grpo": (0.60, 1.4, 0.40), "dapo": (0.68, 1.8, 0.41), "cispo": (0.74, 1.8, 0.42)}
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")


def browser_path() -> str | None:
    return os.environ.get("RLABLATE_CHROMIUM") or next(
        (p for p in map(shutil.which, BROWSERS) if p), None)


def need_browser():
    """The browser test runs wherever a Chromium and Playwright are installed (make setup
    installs both as root); without them it skips and says why, unless RLABLATE_REQUIRE_BROWSER
    is set (make test as root), where a missing browser is a failure."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    if browser_path() is None:
        missing.append("a chromium binary (apt install chromium-headless-shell)")
    if missing:
        if os.environ.get("RLABLATE_REQUIRE_BROWSER"):
            pytest.fail("RLABLATE_REQUIRE_BROWSER is set but " + " and ".join(missing) + " missing")
        pytest.skip("needs " + " and ".join(missing))


@pytest.fixture(scope="module")
def page_path(tmp_path_factory) -> Path:
    from analysis.report import AnalysisOptions, run_analysis
    root = tmp_path_factory.mktemp("inter") / "sw"
    write_demo_sweep(root, algos=ALGOS, scales=("0.5B", "1.5B"), seeds=(0, 1, 2), n_items=100,
                     steps=200, eval_every=20)
    out = root.parent / "out"
    done = run_analysis(AnalysisOptions(results_dir=str(root), out=str(out), n_boot=60,
                                        calibrate=0))
    assert done["interactive"] == out / "interactive.html"
    return out / "interactive.html"


def test_the_page_is_one_self_contained_file(page_path):
    text = page_path.read_text()
    head, body = text.split("<body>", 1)
    assert re.findall(r"<script[^>]*>", head) == ["<script>"]  # plotly.js inline, no src=
    assert "<link" not in head and "<script src" not in body
    assert len(text) > 3_000_000  # plotly.js itself is embedded
    for name in ("grpo", "dapo", "cispo", "Leaderboard", "The seed claims", "Verdict:"):
        assert name in text


def test_styles_tell_more_variants_apart_than_colours():
    from analysis.interactive import styles
    st = styles([f"v{i:02d}" for i in range(30)])
    keys = {(s["color"], s["symbol"], s["dash"]) for s in st.values()}
    assert len(keys) == 30
    assert len({s["color"] for s in st.values()}) == 24


def test_the_page_in_headless_chromium(page_path, tmp_path):
    need_browser()
    from playwright.sync_api import sync_playwright
    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            # 2 eval sets x 2 scales = 4 tabs, each a Plotly figure; in_dist (primary) first
            buttons = page.locator(".tabbtn")
            assert buttons.count() == 4
            assert buttons.nth(0).inner_text().startswith("in_dist")
            assert page.locator(".js-plotly-plot").count() == 4
            n = page.evaluate("document.querySelector('#tab-0 .plot').data.length")
            # per variant: 3 faint run traces, band, fit line, seed means
            assert n == 3 * (3 + 3)
            names = page.evaluate("document.querySelector('#tab-0 .plot').data"
                                  ".filter(t => t.showlegend !== false).map(t => t.name)")
            assert [x.split(" ")[0] for x in names] == ["cispo", "dapo", "grpo"]
            shot = tmp_path / "page.png"
            page.screenshot(path=str(shot))
            # hover the last seed-mean point of cispo: a hover label with its values
            xy = page.evaluate("""() => { const gd = document.querySelector('#tab-0 .plot');
                const t = gd.data.findIndex(d => d.showlegend !== false);
                const d = gd.data[t], i = d.x.length - 1, L = gd._fullLayout;
                const r = gd.getBoundingClientRect();
                return [r.left + L._size.l + L.xaxis.l2p(Math.log10(d.x[i])),
                        r.top + L._size.t + L.yaxis.l2p(d.y[i])]; }""")
            page.mouse.move(xy[0], xy[1])
            page.wait_for_selector(".hoverlayer .hovertext", timeout=5_000)
            hover = page.locator(".hoverlayer .hovertext").first.text_content()
            assert "cispo" in hover and "pass@1" in hover and "step 200" in hover
            # the legend toggles every trace of a variant
            page.locator("#tab-0 .legend .traces .legendtoggle").first.click(force=True)
            page.wait_for_timeout(1000)  # plotly waits out a double-click before it toggles
            vis = page.evaluate("document.querySelector('#tab-0 .plot').data"
                                ".filter(t => t.legendgroup === 'cispo').map(t => t.visible)")
            assert vis and all(v == "legendonly" for v in vis)
            # tabs: the second one shows, the first hides
            buttons.nth(1).click()
            assert page.locator("#tab-1").is_visible() and not page.locator("#tab-0").is_visible()
            # sortable tables: sort the leaderboard by variant, both ways
            head = page.locator("#table-leaderboard th", has_text="variant").first
            col = page.evaluate("[...document.querySelectorAll('#table-leaderboard th')]"
                                ".findIndex(h => h.textContent.startsWith('variant'))")
            cells = f"[...document.querySelectorAll('#table-leaderboard tbody tr')].map(r => r.cells[{col}].textContent)"
            head.click()
            up = page.evaluate(cells)
            head.click()
            down = page.evaluate(cells)
            assert up == sorted(up) and down == sorted(up, reverse=True) and len(set(up)) == 3
        finally:
            browser.close()
    assert errors == []
    assert all(u.startswith("file://") or u.startswith("data:") for u in requests), requests
    # the screenshot's pixels: each variant's colour is drawn in the plot area
    from matplotlib.image import imread
    img = (imread(shot)[..., :3] * 255).astype(int)
    from analysis.interactive import styles
    for v, s in styles(ALGOS).items():
        rgb = np.array([int(s["color"][i:i + 2], 16) for i in (1, 3, 5)])
        hits = (np.abs(img - rgb).sum(axis=2) < 40).sum()
        assert hits > 150, (v, s["color"], hits)
