"""Combining replications: one design run several times on disjoint seeds, analysed once each.

A study that resolves too little is often re-run on fresh seeds (another session, another
cluster). Each run of the design has its own report; this module combines their design-choice
comparisons (``effects.csv``) into one estimate per comparison, with a fixed-effect
inverse-variance meta-analysis:

    dA = sum_i w_i dA_i / sum_i w_i,   w_i = 1 / se_i^2,   se(dA) = 1 / sqrt(sum_i w_i)

and the same for log(B ratio). Each study's standard error is read off its 95% interval as
``se_i = (hi_i - lo_i) / (2 * 1.96)`` (a normal approximation of a bootstrap percentile interval:
the width is kept, any skew is not). Heterogeneity is Cochran's Q = sum_i w_i (dA_i - dA)^2 on
k - 1 degrees of freedom, with I^2 = max(0, (Q - (k - 1)) / Q) (Higgins & Thompson 2002, Stat.
Med. 21:1539). A fixed effect is the model of *replications*: the studies must be the same design
(their ``spec.yaml`` equal but for name, description, seeds, plan and the executor), on disjoint
seeds (runs are deterministic, so a shared seed is the same run counted twice), from one base
model (the same step-0 eval R0: a warm start rebuilt on another CPU's numerics is another model);
all three are checked.
A comparison whose Q rejects homogeneity at 5% is reported but given no verdict: the studies
disagree by more than their intervals allow, and a pooled number would hide it.

The combined interval goes through the report's own verdict rule
(:func:`analysis.effects.effect_verdict`: moved A / only B / no effect on A within the margin /
not resolved); a comparison is identified only if it was in every study. Under the normal model
the equivalence verdict's false-positive rate is the nominal 2.5% per side; `rlablate calibrate`
has not simulated the combination.

The seed claims are combined exactly, not by meta-analysis: each report keeps the per-run numbers
its claims were decided from (``claim_inputs.json``: trend values, the reference's level, the
presets' finals), and :func:`combine_claims` decides claims 1, 2 and 4 again over the union of the
replications' runs with the report's own rules (:func:`analysis.claims.decide_claims`), as one
study with all their seeds would. Claim 3 reads the filter's pooled comparison above. Reports
written before claim_inputs.json existed cannot have their claims combined; that is said, not
guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import json

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from analysis.claims import decide_claims
from analysis.effects import B_MARGIN, UNIDENTIFIED, effect_verdict
from analysis.compare import Z95 as Z975

#: spec keys that may differ between replications of one design
FREE_KEYS = ("name", "description", "seeds", "plan", "local", "slurm")
KEY = ["scale", "variant", "vs"]


@dataclass
class Study:
    path: Path
    effects: pd.DataFrame
    spec: dict | None
    claim_inputs: dict | None = None
    r0: dict | None = None  # {eval set: the step-0 eval every run started from}, from fits.csv


def load_study(path: str | Path) -> Study:
    """A report directory (what ``rlablate analyze --out`` wrote): its effects.csv and, when
    present, the spec.yaml the report copied."""
    path = Path(path)
    eff = path / "effects.csv"
    if not eff.is_file():
        raise ValueError(f"{path}: no effects.csv (not a report directory of `rlablate analyze`, "
                         "or its sweep had no comparison)")
    spec_file = path / "spec.yaml"
    spec = yaml.safe_load(spec_file.read_text()) if spec_file.is_file() else None
    inputs_file = path / "claim_inputs.json"
    inputs = json.loads(inputs_file.read_text()) if inputs_file.is_file() else None
    fits_file = path / "fits.csv"
    r0 = None
    if fits_file.is_file():
        fits = pd.read_csv(fits_file, usecols=["eval_set", "R0"]).dropna()
        r0 = {k: sorted(set(g["R0"])) for k, g in fits.groupby("eval_set")}
    return Study(path, pd.read_csv(eff), spec, inputs, r0)


def check_base(studies: list[Study], mixed_base: bool = False) -> list[str]:
    """Raise ValueError unless every study started from the same base: the same step-0 eval (R0)
    on every eval set they share. A warm start is rebuilt per machine and is chaotic in the CPU's
    numerics (harness.numerics: 0.400 on one CPU, 0.456 on another, for one config), so one spec
    run on two machines is two base models; ``mixed_base`` pools them anyway, with a note."""
    known = [s for s in studies if s.r0]
    notes = [] if len(known) == len(studies) else [
        "base not checked for " + ", ".join(str(s.path) for s in studies if not s.r0)
        + " (no fits.csv in the report)"]
    for s in known[1:]:
        for k in sorted(set(known[0].r0) & set(s.r0)):
            a, b = known[0].r0[k], s.r0[k]
            if not (len(a) == len(b) and np.allclose(a, b, rtol=0, atol=1e-12)):
                msg = (f"{s.path} did not start where {known[0].path} did: R0 ({k}, the step-0 "
                       f"eval) {_r0(b)} vs {_r0(a)}: another warm start (one spec, so another "
                       "machine's numerics or another harness/torch built it)")
                if not mixed_base:
                    raise ValueError(msg + "; --mixed-base pools them anyway")
                notes.append(msg + "; pooled anyway (--mixed-base): the effect is averaged over "
                             "base models, and Q tests whether it differs between them")
    return notes


def _r0(v: list) -> str:
    return "/".join(f"{x:.4f}" for x in v)


def check_replications(studies: list[Study], mixed_base: bool = False) -> list[str]:
    """Raise ValueError (one line naming the key) unless the studies are one design, from one
    base (:func:`check_base`), on disjoint seeds; return notes on what could not be checked."""
    specs = [(s.path, s.spec) for s in studies if s.spec is not None]
    notes = [] if len(specs) == len(studies) else [
        "design not checked for " + ", ".join(str(s.path) for s in studies if s.spec is None)
        + " (no spec.yaml in the report)"]
    if specs:
        p0, ref = specs[0]
        design0 = {k: v for k, v in ref.items() if k not in FREE_KEYS}
        for p, spec in specs[1:]:
            design = {k: v for k, v in spec.items() if k not in FREE_KEYS}
            for k in sorted(set(design0) | set(design)):
                if design0.get(k) != design.get(k):
                    raise ValueError(f"{p} is not a replication of {p0}: spec key {k!r} differs "
                                     f"({_show(design0, k)} vs {_show(design, k)}); only "
                                     f"{', '.join(FREE_KEYS)} may differ")
    notes = check_base(studies, mixed_base) + notes  # one design: does it start from one model?
    seen: dict[int, Path] = {}
    for p, spec in specs:
        seeds = spec.get("seeds") or []
        for s in range(seeds) if isinstance(seeds, int) else seeds:  # a count: 0 .. n-1
            if s in seen:
                raise ValueError(f"seed {s} is in both {seen[s]} and {p}: replications need "
                                 "disjoint seeds (a run is deterministic in its seed)")
            seen[s] = p
    return notes


def calibrate_command(studies: list[Study], margin: float) -> str:
    """The `rlablate calibrate` line that simulates these replications' pooled verdicts (each
    study's seeds an arm, from its spec), or "" when a spec is missing."""
    if any(s.spec is None for s in studies):
        return ""
    counts = [s.spec.get("seeds") for s in studies]
    counts = [c if isinstance(c, int) else len(c or []) for c in counts]
    return (f"rlablate calibrate {studies[0].path / 'spec.yaml'} --replications "
            f"{','.join(map(str, counts))} --margin {margin:g}")


def _show(d: dict, k: str) -> str:
    return repr(d[k]) if k in d else "absent"


def fixed_effect(est: np.ndarray, se: np.ndarray) -> dict:
    """Inverse-variance fixed-effect pooling of k estimates with standard errors ``se``."""
    w = 1.0 / se ** 2
    mean = float(np.sum(w * est) / np.sum(w))
    k = len(est)
    q = float(np.sum(w * (est - mean) ** 2))
    return {"est": mean, "se": float(1.0 / np.sqrt(np.sum(w))), "Q": q,
            "Q_p": float(stats.chi2.sf(q, k - 1)) if k > 1 else float("nan"),
            "I2": max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0}


def pool_effect(dA, dA_lo, dA_hi, B_ratio, B_lo, B_hi, margin: float,
                b_margin: float = B_MARGIN, alpha_q: float = 0.05) -> dict:
    """One comparison pooled over k studies (arrays of each study's point estimates and 95%
    interval ends): dA and log(B ratio) by :func:`fixed_effect`, their 95% intervals, Q, I^2 and
    the report's verdict; no verdict when Q rejects homogeneity at ``alpha_q``. The estimates
    must all be identified (the caller decides what an unidentified study means).
    :func:`combine` and the replication calibration (analysis.calibrate) both use it."""
    dA, B_ratio = np.asarray(dA, float), np.asarray(B_ratio, float)
    a = fixed_effect(dA, _se(np.asarray(dA_lo, float), np.asarray(dA_hi, float)))
    b = fixed_effect(np.log(B_ratio), _se(np.log(np.asarray(B_lo, float)),
                                          np.log(np.asarray(B_hi, float))))
    a_ci = (a["est"] - Z975 * a["se"], a["est"] + Z975 * a["se"])
    b_ci = (float(np.exp(b["est"] - Z975 * b["se"])), float(np.exp(b["est"] + Z975 * b["se"])))
    hetero = [name for name, r in (("dA", a), ("B", b)) if r["Q_p"] < alpha_q]
    verdict = (f"heterogeneous ({', '.join(hetero)}: Q p < {alpha_q:g}), not combined"
               if hetero else effect_verdict(a["est"], a_ci, b_ci, True, margin, b_margin))
    return {"dA": a["est"], "dA_lo": a_ci[0], "dA_hi": a_ci[1], "B_ratio": float(np.exp(b["est"])),
            "B_ratio_lo": b_ci[0], "B_ratio_hi": b_ci[1], "Q_dA": a["Q"], "Q_dA_p": a["Q_p"],
            "I2_dA": a["I2"], "Q_B_p": b["Q_p"], "verdict": verdict}


def _se(lo, hi) -> np.ndarray:
    return (np.asarray(hi, float) - np.asarray(lo, float)) / (2 * Z975)


def combine(studies: list[Study], margin: float, b_margin: float = B_MARGIN,
            alpha_q: float = 0.05) -> pd.DataFrame:
    """One row per comparison present in every study: each study's dA, the pooled dA and B ratio
    with 95% intervals, Q, I^2 and the verdict."""
    frames = [s.effects.assign(study=i) for i, s in enumerate(studies)]
    allf = pd.concat(frames, ignore_index=True)
    rows = []
    for key, g in allf.groupby(KEY, sort=True):
        if g["study"].nunique() < len(studies):
            continue
        g = g.sort_values("study")
        finite = g[["dA_lo", "dA_hi", "B_ratio_lo", "B_ratio_hi"]].notna().all(axis=1)
        rec = dict(zip(KEY, key), studies=len(g),
                   per_study="; ".join(f"{r.dA:+.3f} [{r.dA_lo:+.3f}, {r.dA_hi:+.3f}]"
                                       for r in g.itertuples()))
        identified = bool(finite.all() and not g["verdict"].eq(UNIDENTIFIED).any())
        if not identified:
            rows.append({**rec, "verdict": UNIDENTIFIED + " in some study"})
            continue
        rows.append({**rec, **pool_effect(g["dA"], g["dA_lo"], g["dA_hi"], g["B_ratio"],
                                          g["B_ratio_lo"], g["B_ratio_hi"], margin, b_margin,
                                          alpha_q)})
    cols = [*KEY, "studies", "per_study", "dA", "dA_lo", "dA_hi", "B_ratio", "B_ratio_lo",
            "B_ratio_hi", "Q_dA", "Q_dA_p", "I2_dA", "Q_B_p", "verdict"]
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------------------
# The seed claims over the union of the replications' runs
# ------------------------------------------------------------------------------------------------
def merge_claim_inputs(inputs: list[dict]) -> dict:
    """One :func:`analysis.claims.claim_inputs` record for the union of the studies' runs:
    trend values and finals concatenated, each level (a mean over logged values) re-weighted by
    its count. Raises ValueError (one line) when the studies did not test the same claims with
    the same variants, which replications of one design always do."""
    first = inputs[0]
    out = {"eval_set": first["eval_set"], "held_out": first["held_out"]}
    for other in inputs[1:]:
        for k in ("eval_set", "held_out"):
            if other[k] != first[k]:
                raise ValueError(f"the claims were read on different eval sets ({k}: "
                                 f"{first[k]!r} vs {other[k]!r})")
    for claim in ("1", "2", "3", "4"):
        parts = [i.get(claim) for i in inputs]
        if all(p is None for p in parts):
            continue
        if any(p is None for p in parts):
            raise ValueError(f"claim {claim} was tested in some of the reports and not in others")
        names = {k: parts[0][k] for k in ("first", "second", "filter", "reference", "presets")
                 if k in parts[0]}
        for p in parts[1:]:
            for k, v in names.items():
                if p[k] != v:
                    raise ValueError(f"claim {claim} compares {v!r} in one report and {p[k]!r} "
                                     "in another")
        merged = dict(names)
        if "trend" in parts[0]:
            merged["trend"] = [row for p in parts for row in p["trend"]]
            merged["level"] = _pool_mean([p["level"] for p in parts])
            mixed = [row for p in parts for row in p.get("trend_mixed", [])]
            if mixed:  # exploratory: the runs that log it, from any of the reports
                merged["trend_mixed"] = mixed
        if "clip_frac" in parts[0]:
            merged["clip_frac"] = _pool_mean([p["clip_frac"] for p in parts])
            merged["confounded"] = any(p["confounded"] for p in parts)
        if "finals" in parts[0]:
            merged["finals"] = [row for p in parts for row in p["finals"]]
        out[claim] = merged
    return out


def _pool_mean(parts: list[list]) -> list:
    """[mean, n] of the union from each part's [mean, n] (parts with n = 0 carry nothing)."""
    kept = [(m, n) for m, n in parts if n]
    if not kept:
        return [float("nan"), 0]
    if len(kept) == 1:
        return [float(kept[0][0]), int(kept[0][1])]
    n = sum(k[1] for k in kept)
    return [float(sum(m * k for m, k in kept) / n), int(n)]


def combine_claims(studies: list[Study], combined: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The four claims over the union of the studies' runs (claim 3 from ``combined``, the
    pooled comparisons), or an empty table and the reason they cannot be combined."""
    missing = [str(s.path) for s in studies if s.claim_inputs is None]
    if missing:
        return pd.DataFrame(), ("claims not combined: no claim_inputs.json in " + ", ".join(missing)
                                + " (a report from before `rlablate analyze` wrote it; analyse "
                                "its runs again to add it)")
    merged = merge_claim_inputs([s.claim_inputs for s in studies])
    return decide_claims(merged, combined), ""
