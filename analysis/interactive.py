"""The interactive leaderboard page: one self-contained HTML file that works offline
(``interactive.html`` beside report.html; Plotly, with plotly.js embedded in the file).

* one tab per (eval set, model scale): pass rate against training compute (log axis) per variant:
  the seed-mean points (hover: step, compute, pass rate, seed sd, runs), each run's points faint,
  the fitted ScaleRL curve R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (arXiv 2510.13786) and its
  95% band (the pointwise 2.5-97.5 percentiles of the curves of the bootstrap replicates);
  clicking a variant in the legend hides or shows all of its traces (double click: only it);
* every variant keeps one colour, marker and dash across tabs; with more than 24 variants the
  marker and dash still tell the pairs apart;
* sortable tables (click a header): the leaderboard, the design-choice verdicts, the gains;
* the seed claims, each with its verdict and its evidence.

``write_page(path, fits, tables, sets, title)`` is fed the same fits and tables the report uses
(analysis/report.py); it computes nothing the report does not.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.groups import GroupFit, scale_sort_key
from analysis.solver import predict_reward

SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "triangle-down", "cross",
           "pentagon", "hexagram")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
TABLES = (("leaderboard", "Leaderboard (ranked where the fit is identified)"),
          ("effects", "Design choices against the reference"),
          ("gains", "Gains over the base model at matched training"))


def palette() -> list[str]:
    import plotly.colors
    return list(plotly.colors.qualitative.Dark24)


def styles(variants) -> dict[str, dict]:
    """variant -> colour, marker symbol and dash; fixed across every tab of the page."""
    colours = palette()
    out = {}
    for i, v in enumerate(sorted(set(variants))):
        out[v] = {"color": colours[i % len(colours)], "symbol": SYMBOLS[i % len(SYMBOLS)],
                  "dash": DASHES[(i // len(colours) + i) % len(DASHES)]}
    return out


def band(g: GroupFit, c: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray] | None:
    """Pointwise percentile band of the bootstrap replicates' curves at compute ``c``."""
    b = g.boot
    if b is None or g.fit is None or len(np.atleast_1d(b.A)) < 10:
        return None
    A, B, C = (np.asarray(x, dtype=float)[:, None] for x in (b.A, b.B, b.C_mid))
    ok = np.isfinite(A[:, 0]) & np.isfinite(B[:, 0]) & np.isfinite(C[:, 0])
    if ok.sum() < 10:
        return None
    curves = predict_reward(c[None, :], A[ok], B[ok], C[ok], g.fit.R0)
    lo, hi = np.nanpercentile(curves, [50 * (1 - level), 50 * (1 + level)], axis=0)
    return lo, hi


def _traces(g: GroupFit, style: dict) -> list[dict]:
    v, col = g.variant, style["color"]
    mean = g.curve.mean_curve()
    traces = []
    for run in g.curve.runs:
        traces.append(dict(type="scatter", mode="markers", x=list(map(float, run.compute)),
                           y=list(map(float, run.y)), legendgroup=v, showlegend=False,
                           marker=dict(color=col, size=4, opacity=0.25, symbol=style["symbol"]),
                           name=f"{v}: {run.run_id}",
                           hovertemplate=f"{html.escape(run.run_id)}<br>compute %{{x:.3g}}"
                                         "<br>pass@1 %{y:.3f}<extra></extra>"))
    label = v
    if g.fit is not None:
        f = g.fit
        c = np.geomspace(max(mean["compute"].min() / 2, 1.0), mean["compute"].max() * 1.5, 120)
        b = band(g, c)
        if b is not None:
            traces.append(dict(type="scatter", mode="lines", x=list(c) + list(c[::-1]),
                               y=list(b[1]) + list(b[0][::-1]), fill="toself", fillcolor=col,
                               opacity=0.15, line=dict(width=0), legendgroup=v, showlegend=False,
                               hoverinfo="skip", name=f"{v} 95% band"))
        traces.append(dict(type="scatter", mode="lines", x=list(c), y=list(map(float, f.predict(c))),
                           line=dict(color=col, width=2, dash=style["dash"]), legendgroup=v,
                           showlegend=False, name=f"{v} fit",
                           hovertemplate=f"{html.escape(v)} fit: A={f.A:.3f}, B={f.B:.2f}, "
                                         f"C_mid={f.C_mid:.3g}<br>compute %{{x:.3g}} -> "
                                         "%{y:.3f}<extra></extra>"))
        label += f" (A={f.A:.3f}, B={f.B:.2f})"
    else:
        label += " (no fit)"
    sd = mean["sd"].fillna(0).to_numpy(float)
    traces.append(dict(
        type="scatter", mode="markers", x=list(map(float, mean["compute"])),
        y=list(map(float, mean["pass_rate"])), legendgroup=v, name=label,
        marker=dict(color=col, size=8, symbol=style["symbol"], line=dict(width=1, color="white")),
        error_y=dict(type="data", array=list(sd), visible=True, color=col, thickness=1),
        customdata=np.stack([mean["step"], sd, mean["n_runs"]], axis=1).tolist(),
        hovertemplate=f"<b>{html.escape(v)}</b><br>step %{{customdata[0]}}<br>compute %{{x:.3g}}"
                      "<br>pass@1 %{y:.3f} (seed sd %{customdata[1]:.3f}, "
                      "%{customdata[2]} runs)<extra></extra>"))
    return traces


def figure(groups: list[GroupFit], eval_set: str, scale: str, st: dict) -> dict:
    data = []
    for g in sorted(groups, key=lambda g: g.variant):
        data += _traces(g, st[g.variant])
    r0 = float(np.mean([g.curve.R0 for g in groups])) if groups else None
    layout = dict(
        title=dict(text=f"pass@1 on {eval_set} vs training compute, scale {scale}", x=0.01),
        xaxis=dict(type="log", title="training compute (FLOPs, log scale)"),
        yaxis=dict(title=f"pass@1 on {eval_set}"), hovermode="closest", height=560,
        legend=dict(font=dict(size=11), itemclick="toggle", itemdoubleclick="toggleothers"),
        margin=dict(l=60, r=20, t=50, b=50), template="plotly_white",
        shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=r0, y1=r0,
                     line=dict(color="#888", dash="dot", width=1))] if r0 is not None else [],
        annotations=[dict(xref="paper", x=0.0, y=r0, text="R0 (step 0)", showarrow=False,
                          yanchor="bottom", xanchor="left", font=dict(size=10, color="#666"))]
        if r0 is not None else [])
    return {"data": data, "layout": layout}


def _cell(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            return ""
        if float(value).is_integer() and abs(value) < 1e5:
            return str(int(value))
        return f"{value:.3g}" if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3) \
            else f"{value:.3f}"
    return "" if value is None else str(value)


def table_html(df: pd.DataFrame, name: str) -> str:
    if df is None or df.empty:
        return "<p><em>(none)</em></p>"
    head = "".join(f"<th title='click to sort'>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, rec):
            text = _cell(v)
            cls = " class='verdict'" if c in ("verdict", "note") else ""
            cells.append(f"<td{cls} data-v='{html.escape(text, quote=True)}'>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table class='sortable' id='table-{name}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def claims_html(claims: pd.DataFrame) -> str:
    if claims is None or claims.empty:
        return "<p><em>(no claims)</em></p>"
    out = []
    for _, c in claims.iterrows():
        out.append(f"<div class='claim'><h3>Claim {html.escape(_cell(c.get('claim')))}: "
                   f"{html.escape(str(c.get('statement', '')))}</h3>"
                   f"<p class='verdict'><b>Verdict:</b> {html.escape(str(c.get('verdict', '')))}</p>"
                   f"<p><b>Evidence:</b> {html.escape(str(c.get('evidence', '')))}</p></div>")
    return "".join(out)


SCRIPT = """
function showTab(id){
  document.querySelectorAll('.tab').forEach(t=>t.style.display=(t.id===id?'block':'none'));
  document.querySelectorAll('.tabbtn').forEach(b=>b.classList.toggle('on',b.dataset.tab===id));
  const plot=document.querySelector('#'+id+' .plot'); if(plot&&plot.data){Plotly.Plots.resize(plot);}
}
function sortTable(th){
  const table=th.closest('table'), i=[...th.parentNode.children].indexOf(th);
  const body=table.tBodies[0], rows=[...body.rows], asc=th.dataset.asc!=='1';
  const key=r=>{const v=r.cells[i].dataset.v; const x=parseFloat(v); return isNaN(x)?v:x;};
  rows.sort((a,b)=>{const x=key(a),y=key(b);
    if(x===''&&y!=='')return 1; if(y===''&&x!=='')return -1;
    const c=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));
    return asc?c:-c;});
  table.querySelectorAll('th').forEach(h=>delete h.dataset.asc); th.dataset.asc=asc?'1':'0';
  rows.forEach(r=>body.appendChild(r));
}
document.addEventListener('DOMContentLoaded',()=>{
  for(const [id,fig] of Object.entries(FIGURES)){
    Plotly.newPlot(document.querySelector('#'+id+' .plot'),fig.data,fig.layout,
                   {responsive:true,displaylogo:false});
  }
  document.querySelectorAll('table.sortable th').forEach(th=>th.addEventListener('click',()=>sortTable(th)));
  const first=document.querySelector('.tabbtn'); if(first){showTab(first.dataset.tab);}
  document.body.dataset.ready='1';
});
"""

STYLE = ("body{font-family:system-ui,sans-serif;max-width:1300px;margin:auto;padding:1em;color:#222}"
         ".tabbtn{border:1px solid #bbb;background:#f4f4f4;padding:4px 10px;margin:2px;cursor:pointer;"
         "border-radius:4px}.tabbtn.on{background:#2a6fdb;color:white;border-color:#2a6fdb}"
         "table{border-collapse:collapse;font-size:12px;margin:0.5em 0}th{cursor:pointer;"
         "background:#eef}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
         "td.verdict{text-align:left;max-width:420px}.claim{border-left:4px solid #2a6fdb;"
         "padding:0 0.8em;margin:0.8em 0}.claim h3{font-size:15px;margin:0.3em 0}"
         "th[data-asc='1']::after{content:' \\25B2'}th[data-asc='0']::after{content:' \\25BC'}")


def write_page(path: Path, fits: list[GroupFit], tables: dict, sets: list[str],
               title: str = "rlablate: interactive leaderboard") -> Path:
    """Write the page; returns its path. ``tables``: the report's tables by name."""
    from plotly.offline import get_plotlyjs
    from plotly.utils import PlotlyJSONEncoder

    groups = [g for g in fits if g.level == "group" and g.curve.runs]
    st = styles(g.variant for g in groups)
    figures, buttons = {}, []
    for s in sets:
        for scale in sorted({g.scale for g in groups if g.eval_set == s}, key=scale_sort_key):
            tid = f"tab-{len(figures)}"
            sel = [g for g in groups if g.eval_set == s and g.scale == scale]
            figures[tid] = figure(sel, s, scale, st)
            buttons.append((tid, f"{s} · {scale}"))
    tabs = "".join(f"<button class='tabbtn' data-tab='{t}' onclick=\"showTab('{t}')\">"
                   f"{html.escape(label)}</button>" for t, label in buttons)
    panes = "".join(f"<div class='tab' id='{t}'><div class='plot'></div></div>" for t, _ in buttons)
    body = [f"<h1>{html.escape(title)}</h1>",
            "<p>Pass rate against training compute per variant: large markers are seed means "
            "(bars: sd over seeds), faint markers single runs, lines the fitted ScaleRL curves "
            "with their 95% bootstrap bands. Click a variant in the legend to hide or show it, "
            "double-click to show it alone; hover a point for its values. Tabs: eval set x "
            "model scale.</p>", f"<div id='tabs'>{tabs}</div>", panes]
    for name, heading in TABLES:
        body.append(f"<h2>{html.escape(heading)}</h2>{table_html(tables.get(name), name)}")
    body.append(f"<h2>The seed claims</h2>{claims_html(tables.get('claims'))}")
    fig_json = json.dumps(figures, cls=PlotlyJSONEncoder)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
            f"{''.join(body)}<script>const FIGURES={fig_json};{SCRIPT}</script></body></html>\n")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
