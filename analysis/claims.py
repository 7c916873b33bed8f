"""The seed claims, decided from the runs with their uncertainty.

The report's seed-claims section, computed from what the runs logged (its design-choice section
is analysis/effects.py). :func:`seed_claims` gives the four claims the project was started to
check, each with its numbers and one of: reproduces / does not reproduce / not resolved at this
scale / not tested (the runs needed are missing). A claim is never tuned until it reproduces; the
verdict is what the data says.

  1. Dr. GRPO stops the growth of incorrect-response length seen with GRPO (Liu et al. 2025,
     arXiv 2503.20783: GRPO's 1/|o_i| normalisation lets wrong answers grow long).
  2. Clip-higher keeps policy entropy higher than symmetric clipping (DAPO, arXiv 2503.14476).
  3. Zero-variance filtering / dynamic sampling changes efficiency more than the asymptote
     (ScaleRL, arXiv 2510.13786: most choices move B, few move A).
  4. Algorithm differences are larger in-distribution than held-out (OXRL, arXiv 2603.19335).

Per-run trends (incorrect length, entropy) come from the ``train`` rows of ``metrics.jsonl``
(``Results.train``), over the steps both compared variants reached; a
difference between variants is taken over the (scale, seed) pairs both have, with a Student t
interval over pairs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from analysis.groups import up_to_common_step
from analysis.load import TRAIN_KEYS
from analysis.resolve import claim1_budget, claim2_budget, claim4_budget, needs_steps
from analysis.variance import (  # noqa: F401 (between_variants, spread_difference re-exported)
    CLAIM4_DECIDED, between_variants, claim4_verdict, spread_difference)


# ------------------------------------------------------------------------------------------------
# Per-run training series
# ------------------------------------------------------------------------------------------------
def train_series(runs: pd.DataFrame, train: pd.DataFrame, keys: list[str],
                 seed_col: str | None = "run.seed") -> pd.DataFrame:
    """Tidy ``train`` rows (``Results.train``) of the usable runs: run_id, variant, scale_value,
    seed, step and ``keys``; runs with an exclusion reason are left out."""
    cols = ["run_id", "variant", "scale_value", "seed", "step", *keys]
    usable = runs[runs["excluded"].isna()] if "excluded" in runs else runs
    meta = usable[["sweep", "run_id", "variant", "scale_value"]].assign(
        seed=usable[seed_col] if seed_col and seed_col in usable else 0)
    if train is None or train.empty or meta.empty:
        return pd.DataFrame(columns=cols)
    out = train[["sweep", "run_id", "step", *keys]].merge(meta, on=["sweep", "run_id"])
    for k in keys:
        out[k] = pd.to_numeric(out[k], errors="coerce")
    return out[cols].reset_index(drop=True)


def matched(series: pd.DataFrame, variants) -> pd.DataFrame:
    """The rows of `variants` up to, per scale, the last step every one of their runs reached,
    so that two variants' trends are compared over the same training (a sweep may run one of
    them longer to fit its asymptote)."""
    return up_to_common_step(series[series["variant"].isin(list(variants))], ["run_id"],
                             ["scale_value"])


def run_trend(series: pd.DataFrame, key: str, how: str) -> pd.DataFrame:
    """One number per run: ``change`` = mean over the last quarter of steps minus the first
    quarter; ``late_mean`` = mean over the second half; ``last_quarter`` = mean over the last
    quarter."""
    rows = []
    for run_id, g in series.groupby("run_id"):
        g = g.sort_values("step")
        v = g[key].to_numpy(float)
        n = len(v)
        if n < 4 or not np.isfinite(v).any():
            continue
        q = max(n // 4, 1)
        if how == "change":
            value = np.nanmean(v[-q:]) - np.nanmean(v[:q])
        else:
            value = np.nanmean(v[-q:]) if how == "last_quarter" else np.nanmean(v[n // 2:])
        first = g.iloc[0]
        rows.append({"run_id": run_id, "variant": first["variant"], "scale": first["scale_value"],
                     "seed": first["seed"], "value": float(value)})
    return pd.DataFrame(rows, columns=["run_id", "variant", "scale", "seed", "value"])


def t_interval(values) -> tuple[float, float, float, int]:
    """Mean and 95% Student t interval of ``values`` (nan interval for fewer than 2)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    m = float(v.mean())
    if n < 2:
        return m, float("nan"), float("nan"), 1
    half = float(stats.t.ppf(0.975, n - 1) * v.std(ddof=1) / np.sqrt(n))
    return m, m - half, m + half, n


def paired(trend: pd.DataFrame, first: str, second: str) -> tuple[float, float, float, int]:
    """first - second over the (scale, seed) pairs both variants have, with a t interval."""
    return t_interval(paired_values(trend, first, second))


def paired_values(trend: pd.DataFrame, first: str, second: str) -> list[float]:
    """first - second per (scale, seed) pair both variants have."""
    rows = zip(trend["variant"].tolist(), trend["scale"].tolist(), trend["seed"].tolist(),
               trend["value"].tolist())
    a, b = {}, {}
    for variant, scale, seed, value in rows:
        if variant == first:
            a[(scale, seed)] = value
        elif variant == second:
            b[(scale, seed)] = value
    return [a[k] - b[k] for k in a if k in b]


# ------------------------------------------------------------------------------------------------
# The four seed claims
# ------------------------------------------------------------------------------------------------
def _find(variants, *candidates) -> str | None:
    for c in candidates:
        if c in variants:
            return c
    return None


def _pick(variants, prefix: str, needle: str) -> str | None:
    """A single-choice ablation of ``prefix`` whose label contains ``needle``."""
    hits = sorted(v for v in variants if v.startswith(prefix + "+") and needle in v)
    return hits[0] if hits else None


def _fmt(m, lo, hi, n, unit="") -> str:
    if not np.isfinite(m):
        return "n/a"
    ci = f" [{lo:+.3g}, {hi:+.3g}]" if np.isfinite(lo) else ""
    return f"{m:+.3g}{unit}{ci} (n={n})"


def claim_inputs(runs: pd.DataFrame, train: pd.DataFrame, finals: pd.DataFrame,
                 eval_set: str, held_out: str = "held_out",
                 seed_col: str | None = "run.seed") -> dict:
    """The per-run numbers the four claims are decided from, as plain JSON-able values (the
    report writes them to ``claim_inputs.json``): claims 1 and 2, one trend value per run and the
    reference's level (mean and count of its logged values, which sets the equivalence margin);
    claim 2 also the reference's clipped fraction; claim 3, which ablation is the filter (its
    verdict comes from the design-choice table); claim 4, the presets' per-run finals. Several
    replications' inputs, merged (:func:`analysis.meta.merge_claim_inputs`), decide the claims
    over the union of their runs, as if one study had run them all. A claim whose variants are
    missing has no entry."""
    variants = set(runs["variant"].dropna())
    series = train_series(runs, train, list(TRAIN_KEYS), seed_col)
    out: dict = {"eval_set": eval_set, "held_out": held_out}
    grpo, dr = _find(variants, "grpo"), _find(variants, "dr_grpo")
    if grpo and dr:
        both = matched(series, (grpo, dr))
        out["1"] = {"first": grpo, "second": dr,
                    "trend": _trend_rows(run_trend(both, "rollout/response_len_incorrect", "change")),
                    "level": _mean_n(both.loc[both["variant"] == grpo,
                                              "rollout/response_len_incorrect"])}
        mixed = run_trend(both, "rollout/response_len_incorrect_mixed", "change")
        if len(mixed):  # runs that log it (rows since session 30): an exploratory line
            out["1"]["trend_mixed"] = _trend_rows(mixed)
    ch = _pick(variants, "grpo", "clip_high") if grpo else None
    pair = (ch, grpo) if ch else ((_find(variants, "dapo"), grpo) if grpo else (None, None))
    if all(pair):
        both = matched(series, pair)
        ref_rows = both[both["variant"] == pair[1]]
        out["2"] = {"first": pair[0], "second": pair[1], "confounded": not ch,
                    "trend": _trend_rows(run_trend(both, "policy/entropy", "late_mean")),
                    "level": _mean_n(ref_rows["policy/entropy"]),
                    "clip_frac": _mean_n(ref_rows["policy/clip_frac"])}
    flt = _pick(variants, "grpo", "group_filter") if grpo else None
    if flt:
        out["3"] = {"filter": flt, "reference": grpo}
    presets = sorted(v for v in variants if "+" not in v)
    fin = finals[finals["variant"].isin(presets)] if finals is not None else pd.DataFrame()
    if len(fin) and {eval_set, held_out} <= set(fin["eval_set"]) and len(presets) > 2:
        out["4"] = {"presets": presets, "finals": [
            [str(r.variant), _plain(r.scale_value), str(r.eval_set), float(r.final), float(r.r0)]
            for r in fin[["variant", "scale_value", "eval_set", "final", "r0"]].itertuples()]}
    return out


def _plain(x):
    """A numpy scalar as the Python value JSON writes."""
    return x.item() if isinstance(x, np.generic) else x


def _trend_rows(trend: pd.DataFrame) -> list[list]:
    return [[str(r.variant), _plain(r.scale), _plain(r.seed), float(r.value)]
            for r in trend.itertuples()]


def trend_frame(rows: list[list]) -> pd.DataFrame:
    """The trend rows of a ``claim_inputs.json`` (variant, scale, seed, value) as a table."""
    return pd.DataFrame(rows, columns=["variant", "scale", "seed", "value"])


def _mean_n(values: pd.Series) -> list:
    """[mean, count] of the finite values (pandas' mean, as the claims always used)."""
    v = pd.to_numeric(values, errors="coerce")
    n = int(v.notna().sum())
    return [float(v.mean()) if n else float("nan"), n]


def seed_claims(runs: pd.DataFrame, train: pd.DataFrame, fits, finals: pd.DataFrame,
                effects: pd.DataFrame, eval_set: str, held_out: str = "held_out",
                seed_col: str | None = "run.seed") -> pd.DataFrame:
    """The four claims with evidence and verdict (see the module docstring). ``train`` is
    ``Results.train``. Each verdict comes from one ``claimN_verdict`` function, the same ones
    :mod:`analysis.calibrate` measures."""
    return decide_claims(claim_inputs(runs, train, finals, eval_set, held_out, seed_col), effects)


def decide_claims(inputs: dict, effects: pd.DataFrame) -> pd.DataFrame:
    """The four claims decided from :func:`claim_inputs` (one study's, or several replications'
    merged) and the design-choice table ``effects`` (claim 3)."""
    out = []
    text1 = "Dr. GRPO stops the growth of incorrect-response length seen with GRPO"
    if "1" in inputs:
        c = inputs["1"]
        trend, (grpo, dr) = trend_frame(c["trend"]), (c["first"], c["second"])
        margin = CLAIM1_MARGIN_FRAC * float(c["level"][0])
        verdict, evidence = claim1_verdict(trend, grpo, dr, margin)
        if c.get("trend_mixed"):
            evidence = evidence.rstrip() + " " + claim1_mixed_line(trend_frame(c["trend_mixed"]), grpo, dr)
        budget = (claim1_budget(trend.loc[trend["variant"] == grpo, "value"],
                                paired_values(trend, grpo, dr), margin)
                  if verdict == "not resolved" else "")
        out.append(_claim(1, text1, verdict, evidence, budget))
    else:
        out.append(_claim(1, text1, "not tested", "needs variants grpo and dr_grpo"))

    text2 = "Clip-higher keeps policy entropy higher than symmetric clipping"
    if "2" in inputs:
        c = inputs["2"]
        trend, pair = trend_frame(c["trend"]), (c["first"], c["second"])
        clip_frac = float(c["clip_frac"][0]) if c["clip_frac"][1] else float("nan")
        margin = CLAIM2_MARGIN_FRAC * float(c["level"][0])
        verdict, evidence = claim2_verdict(trend, *pair, clip_frac=clip_frac, margin=margin)
        if c["confounded"]:
            evidence += "; dapo differs from grpo in more than the clip, so this is confounded"
        budget = (claim2_budget(paired_values(trend, *pair), margin)
                  if verdict == "not resolved" else "")
        out.append(_claim(2, text2, verdict, evidence, budget))
    else:
        out.append(_claim(2, text2, "not tested", "needs grpo and grpo+clip_high=... (or dapo)"))

    text3 = "Zero-variance filtering / dynamic sampling changes efficiency more than the asymptote"
    flt, grpo = (inputs["3"]["filter"], inputs["3"]["reference"]) if "3" in inputs else (None, None)
    sub = effects[effects["variant"] == flt] if flt is not None and len(effects) else pd.DataFrame()
    if len(sub):
        parts = [f"{rec['scale']}: dA = {rec['dA']:+.3f} [{rec['dA_lo']:+.3f}, "
                 f"{rec['dA_hi']:+.3f}], B ratio = {rec['B_ratio']:.2f} "
                 f"[{rec['B_ratio_lo']:.2f}, {rec['B_ratio_hi']:.2f}] -> {rec['verdict']}"
                 for rec in sub.to_dict("records")]
        verdict = claim3_verdict(list(sub["verdict"]))
        asks = ([rec for rec in sub.to_dict("records") if rec.get("resolve_at")]
                if verdict == "not resolved" and "resolve_at" in sub else [])
        budget = "; ".join(f"{rec['scale']}: {rec['resolve_at']}" for rec in asks)
        out.append(_claim(3, text3, verdict, f"{flt} vs {grpo}, " + "; ".join(parts),
                          budget and (f"{budget} (analysis/resolve.py)"
                                      if any(needs_steps(rec["resolve_at"]) for rec in asks)
                                      else f"the filter's dA interval would resolve ({budget}), "
                                      "if its point estimate held (t rule, analysis/resolve.py)")))
    else:
        out.append(_claim(3, text3, "not tested",
                          "needs grpo and a fitted grpo+group_filter=... ablation"))

    text4 = "Algorithm differences are larger in-distribution than held-out"
    eval_set, held_out = inputs["eval_set"], inputs["held_out"]
    if "4" in inputs:
        presets = inputs["4"]["presets"]
        fin = pd.DataFrame(inputs["4"]["finals"],
                           columns=["variant", "scale_value", "eval_set", "final", "r0"])
        verdict, parts = claim4_verdict(fin, eval_set, held_out)
        budget = (claim4_budget(fin, eval_set, held_out)
                  if verdict not in CLAIM4_DECIDED else "")
        out.append(_claim(4, text4, verdict, f"{len(presets)} algorithms, gain = final - R0 per "
                          "run; the between-algorithm sd is what remains after the seed-to-seed "
                          "(and eval) noise within an algorithm is taken out; the F-test asks "
                          "whether the algorithms differ at all, z whether the in-distribution "
                          "variance component exceeds the held-out one (one-sided, 2.5%). "
                          + "; ".join(parts), budget))
    else:
        out.append(_claim(4, text4, "not tested", f"needs >2 algorithms evaluated on {eval_set} "
                          f"and {held_out}"))
    return pd.DataFrame(out)


#: equivalence margins of claims 1 and 2, as fractions of the reference's own level (stated
#: before any run: 5% of GRPO's mean incorrect-response length, 10% of its mean token entropy)
CLAIM1_MARGIN_FRAC = 0.05
CLAIM2_MARGIN_FRAC = 0.10


def _inside(ci, margin) -> bool:
    return bool(np.isfinite(ci[1]) and np.isfinite(ci[2]) and margin is not None
                and np.isfinite(margin) and -margin < ci[1] and ci[2] < margin)


def claim1_verdict(trend: pd.DataFrame, grpo: str, dr: str,
                   margin: float | None = None) -> tuple[str, str]:
    """Claim 1 from per-run length changes (:func:`run_trend`): reproduces when GRPO's growth and
    the paired GRPO - Dr. GRPO intervals are above 0; "no effect within +-m" when the paired
    interval lies inside +-margin (tokens: an equivalence test); does not reproduce when GRPO's
    interval is <= 0 or Dr. GRPO grows resolvably without being outgrown. The evidence gives GRPO's
    median run too: the rule is on the mean, which a few runs can carry (LOG, session 30)."""
    gv = trend.loc[trend["variant"] == grpo, "value"].dropna().to_numpy(float)
    g, d = t_interval(gv), t_interval(trend[trend["variant"] == dr]["value"])
    diff = paired(trend, grpo, dr)
    grows = np.isfinite(g[1]) and g[1] > 0
    stops = grows and np.isfinite(diff[1]) and diff[1] > 0
    dr_grows = np.isfinite(d[1]) and d[1] > 0 and not stops
    verdict = ("reproduces" if stops else
               f"no effect within +-{margin:.2g} tokens" if _inside(diff, margin) else
               "does not reproduce" if (np.isfinite(g[2]) and g[2] <= 0) or dr_grows
               else "not resolved")
    evidence = (f"change in mean incorrect-response length (tokens, last quarter of steps - "
                f"first quarter), per run: {grpo} {_fmt(*g)}, {dr} {_fmt(*d)}; "
                f"paired {grpo} - {dr}: {_fmt(*diff)}; {grpo}'s median run "
                f"{np.median(gv) if gv.size else np.nan:+.3g} ({int((gv > 0).sum())} of {gv.size} grow). "
                + ("GRPO's incorrect responses show no resolvable growth here, so there is "
                   "nothing for Dr. GRPO to stop." if not grows else ""))
    return verdict, evidence


def claim1_mixed_line(trend: pd.DataFrame, grpo: str, dr: str) -> str:
    """Claim 1's statistic over incorrect responses in groups with both outcomes only (the only
    groups with non-zero advantages, so the only ones GRPO's 1/|o_i| weights): a shift in which
    prompts fail (the unsolvable share's all-wrong groups) cannot move it. Exploratory: it
    decides nothing, and covers only the runs that log it."""
    g, d = (t_interval(trend[trend["variant"] == v]["value"]) for v in (grpo, dr))
    return (f"Exploratory, not the verdict's statistic: the same change over incorrect responses "
            f"in groups with both outcomes only: {grpo} {_fmt(*g)}, {dr} {_fmt(*d)}; paired "
            f"{_fmt(*paired(trend, grpo, dr))}.")


def claim2_verdict(trend: pd.DataFrame, clip: str, ref: str,
                   clip_frac: float = float("nan"), margin: float | None = None
                   ) -> tuple[str, str]:
    """Claim 2 from per-run late entropy: the paired clip-higher - reference interval above 0
    reproduces, below 0 does not; inside +-margin (nats) reads "no effect within +-m"."""
    diff = paired(trend, clip, ref)
    ref_level = t_interval(trend[trend["variant"] == ref]["value"])
    verdict = ("reproduces" if np.isfinite(diff[1]) and diff[1] > 0 else
               "does not reproduce" if np.isfinite(diff[2]) and diff[2] < 0 else
               f"no effect within +-{margin:.2g} nats" if _inside(diff, margin) else
               "not resolved")
    evidence = (f"mean token entropy over the second half of training, paired by scale and "
                f"seed: {clip} - {ref} = {_fmt(*diff)} nats ({ref}: {_fmt(*ref_level)}); "
                f"fraction of {ref}'s tokens clipped: {clip_frac:.2%}"
                + (" (the clip almost never binds, so moving its upper bound cannot act)"
                   if clip_frac < 0.01 else ""))
    return verdict, evidence


def claim3_verdict(verdicts: list[str]) -> str:
    """Claim 3 from the filter's design-choice verdicts (one per scale): "only B" everywhere
    reproduces; "moved A" anywhere does not; "no effect" everywhere reads "no effect" (neither A
    nor B moved beyond the margins)."""
    return ("reproduces" if verdicts and all(v == "only B" for v in verdicts) else
            "does not reproduce" if any(v.startswith("moved A") for v in verdicts) else
            "no effect (A within the margin, B within x1.25)"
            if verdicts and all(v == "no effect" for v in verdicts) else
            "not resolved" if all(v.startswith("not resolved") or v == "moved B, A not resolved"
                                  for v in verdicts) else
            "partly (" + "; ".join(verdicts) + ")")


def _claim(n: int, claim: str, verdict: str, evidence: str, budget: str = "") -> dict:
    return {"claim": n, "statement": claim, "verdict": verdict, "evidence": evidence,
            "would_resolve": budget}

