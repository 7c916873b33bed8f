"""How far each verdict can be trusted: the simulated false-positive rate of every verdict a
report gives (from :func:`analysis.calibrate.calibrate` on the study's own schedule and noise),
attached to its row, and the report's calibration section."""
from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.calibrate import describe

#: the calibration row that measures each design-choice verdict ("moved A and B" is a "moved A")
_VERDICT_ROW = {"moved A": "moved A", "moved A and B": "moved A", "only B": "only B",
                "no effect": "no effect", "no effect on A": "no effect on A"}


def attach_false_positive(effects: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``effects`` (analysis.effects.choice_effects) with the simulated false-positive rate of
    each comparison's own verdict at its own schedule: ``fp_rate`` and its 95% upper bound
    ``fp_hi`` from the calibration ``table`` (:func:`analysis.calibrate.calibrate`); NaN where the verdict asserts
    nothing (*not resolved*, *moved B, A not resolved*) or the comparison was not calibrated."""
    out = effects.copy()
    out["fp_rate"], out["fp_hi"] = np.nan, np.nan
    if table is None or table.empty or effects.empty:
        return out
    where = {w: setting for setting, who in table.attrs.get("members", {}).items() for w in who}
    fp = table[table["kind"] == "false positive"].set_index(["setting", "verdict"])
    for i, rec in out.iterrows():
        setting = where.get(f"{rec['variant']} @ {rec['scale']}")
        name = _VERDICT_ROW.get(rec["verdict"])
        if setting is not None and name is not None and (setting, name) in fp.index:
            row = fp.loc[(setting, name)]
            out.loc[i, "fp_rate"], out.loc[i, "fp_hi"] = float(row["rate"]), float(row["hi"])
    return out


def attach_claim_false_positive(claims: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``claims`` (analysis.claims.seed_claims) with the simulated false-positive rate of each
    claim's verdict (``fp_rate``, ``fp_hi``: the calibration row "claim N reproduces / does not
    reproduce / no effect"); NaN for *not resolved*, *not tested* and claim 3's mixed verdicts.
    ``power``: the simulated power of *reproduces* at this design and noise, for every claim the
    calibration simulated, whatever it reads: what the design could have decided."""
    out = claims.copy()
    out["fp_rate"], out["fp_hi"], out["power"] = np.nan, np.nan, np.nan
    if table is None or table.empty or claims.empty:
        return out
    power = table[table["kind"] == "power"].drop_duplicates("verdict").set_index("verdict")
    out["power"] = [float(power.loc[f"claim {n} reproduces", "rate"])
                    if f"claim {n} reproduces" in power.index else np.nan for n in out["claim"]]
    fp = table[table["kind"] == "false positive"]
    for i, rec in out.iterrows():
        v = str(rec["verdict"])
        kind = ("reproduces" if v == "reproduces" else "does not reproduce"
                if v == "does not reproduce" else "no effect" if v.startswith("no effect") else None)
        rows = fp[fp["verdict"] == f"claim {rec['claim']} {kind}"] if kind else fp.iloc[:0]
        if len(rows):
            out.loc[i, "fp_rate"], out.loc[i, "fp_hi"] = float(rows["rate"].max()), float(rows["hi"].max())
    return out


def claim_trust(rec: dict) -> str:
    """The parenthesis after a claim's verdict in the report: its false-positive rate and the
    power of *reproduces* (:func:`attach_claim_false_positive`), where simulated."""
    fp, pw = rec.get("fp_rate", np.nan), rec.get("power", np.nan)
    parts = ([f"simulated false-positive rate {fp:.1%}, 95% upper bound {rec['fp_hi']:.1%}"]
             if fp == fp else []) + ([f"power of *reproduces* at this design and noise {pw:.1%}"]
                                     if pw == pw else [])
    return f" ({'; '.join(parts)})" if parts else ""


def _calibration_source(measured: tuple[bool, bool]) -> str:
    """Which noise and truth the calibration simulated (``measured``: (noise measured, the
    reference's curve identified))."""
    if not measured[0]:
        return "No fitted reference: the default noise and truths. "
    return ("The noise (seed sd of A and log B, item spread, within-run wobble) is the one this "
            "study's reference runs measured (as the planner below reads it); "
            + ("the null truth is the reference's own identified curve (A, B, C_mid). "
               if measured[1] else "the truths are the defaults (the reference's fit is not "
               "identified). "))


def calibration_section(r, cal: pd.DataFrame, opt) -> None:
    """The report's calibration section (``r``: an analysis.report.Report)."""
    r.h("How far each verdict can be trusted (calibration by simulation)")
    if cal is None or cal.empty:
        r.p("Not calibrated in this run (`--calibrate 0`); `rlablate calibrate SPEC.yaml` "
            "prints the table for a sweep spec.")
        return
    fp = cal[cal["kind"] == "false positive"]
    bad = fp[fp["lo"] > 0.05]
    r.p(f"{opt.calibrate} simulated sweeps per cell with this study's own schedule (each group's "
        "last step, eval interval, seeds and eval size), analysed with the same fits and verdict "
        "functions as this report. *false positive*: how often the verdict is given when its "
        "truth does not hold (the worst truth tried); *power*: how often it is given when it "
        "does. 95% Clopper-Pearson intervals. "
        + _calibration_source(cal.attrs.get("measured", (False, False)))
        + describe(cal.attrs.get("noise"), opt.margin) + f" {len(fp) - len(bad)} of {len(fp)} "
        "false-positive rates are <= 5% within their interval"
        + (f"; above: {', '.join(bad['verdict'])}." if len(bad) else "."))
    r.table(cal)
