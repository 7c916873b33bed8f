"""Design-choice effects and the seed claims, decided from the runs with their uncertainty.

Two sections of the report live here, both computed from what the runs logged:

* :func:`choice_effects` -- every variant against a reference algorithm (GRPO by default) at each
  scale: which ``algo.*`` choices differ, the change in asymptote ``dA`` and in efficiency ``dB``
  with bootstrap CIs (replicates of two independently resampled groups, subtracted), and the
  verdict: *moved A* (the dA interval excludes 0 and |dA| >= the margin), *only B* (A not moved,
  the dB interval excludes 0), or *not resolved*.
* :func:`seed_claims` -- the four claims the project was started to check, each with its numbers
  and one of: reproduces / does not reproduce / not resolved at this scale / not tested (the runs
  needed are missing). A claim is never tuned until it reproduces; the verdict is what the data
  says.

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

REFERENCE = "grpo"
#: config keys that describe the algorithm (the design space); compared between variants
CHOICE_PREFIX = "algo."
IGNORED_CHOICES = {"algo.preset", "algo.deviates_from_preset"}


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
    quarter; ``late_mean`` = mean over the second half."""
    rows = []
    for run_id, g in series.groupby("run_id"):
        g = g.sort_values("step")
        v = g[key].to_numpy(float)
        n = len(v)
        if n < 4 or not np.isfinite(v).any():
            continue
        q = max(n // 4, 1)
        value = (np.nanmean(v[-q:]) - np.nanmean(v[:q])) if how == "change" else np.nanmean(v[n // 2:])
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
    a = trend[trend["variant"] == first].set_index(["scale", "seed"])["value"]
    b = trend[trend["variant"] == second].set_index(["scale", "seed"])["value"]
    both = a.index.intersection(b.index)
    return t_interval((a[both] - b[both]).to_numpy())


# ------------------------------------------------------------------------------------------------
# Design-choice effects: dA and dB against a reference
# ------------------------------------------------------------------------------------------------
def _differences(runs: pd.DataFrame, variant: str, reference: str) -> str:
    cols = [c for c in runs.columns if c.startswith(CHOICE_PREFIX) and c not in IGNORED_CHOICES]
    a = runs[runs["variant"] == variant]
    b = runs[runs["variant"] == reference]
    if a.empty or b.empty:
        return ""
    ra, rb = a.iloc[0], b.iloc[0]
    out = []
    for c in cols:
        va, vb = ra.get(c), rb.get(c)
        if (pd.isna(va) and pd.isna(vb)) or str(va) == str(vb):
            continue
        out.append(f"{c[len(CHOICE_PREFIX):]}={va}")
    return ", ".join(out)


def _diff_ci(x: np.ndarray, y: np.ndarray, inflation: float, log: bool) -> tuple[float, float, float]:
    """Point estimate and widened percentile CI of x - y (or log x - log y) over replicates."""
    n = min(x.size, y.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    x, y = x[:n], y[:n]
    ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) & (y > 0) if log else True)
    if ok.sum() < 10:
        return float("nan"), float("nan"), float("nan")
    d = (np.log(x[ok]) - np.log(y[ok])) if log else (x[ok] - y[ok])
    lo, mid, hi = np.quantile(d, [0.025, 0.5, 0.975])
    return float(mid), float(mid + inflation * (lo - mid)), float(mid + inflation * (hi - mid))


def choice_effects(fits, runs: pd.DataFrame, eval_set: str, reference: str = REFERENCE,
                   margin: float = 0.02) -> pd.DataFrame:
    """Each variant vs ``reference`` per scale: differing choices, dA and B ratio with CIs, verdict.

    dA = A(variant) - A(reference); B is compared as a ratio (B is an exponent: log-space CI).
    Verdicts: "moved A" when the dA interval excludes 0 and |dA| >= margin; "only B" when A is
    not moved and the B-ratio interval excludes 1; "not resolved" otherwise, and always when
    either fit did not converge (a parameter at its bound: A is then an extrapolation)."""
    groups = {(g.variant, g.scale): g for g in fits
              if g.level == "group" and g.eval_set == eval_set and g.fit is not None}
    rows = []
    for (variant, scale), g in sorted(groups.items()):
        ref = groups.get((reference, scale))
        if variant == reference or ref is None:
            continue
        rec = {"scale": scale, "variant": variant, "vs": reference,
               "choices": _differences(runs, variant, reference),
               "dA": g.fit.A - ref.fit.A, "dA_lo": np.nan, "dA_hi": np.nan,
               "B_ratio": g.fit.B / ref.fit.B if ref.fit.B else np.nan,
               "B_ratio_lo": np.nan, "B_ratio_hi": np.nan}
        if g.boot is not None and ref.boot is not None:
            f = max(g.boot.inflation(), ref.boot.inflation())
            _, rec["dA_lo"], rec["dA_hi"] = _diff_ci(g.boot.A, ref.boot.A, f, log=False)
            _, lo, hi = _diff_ci(g.boot.B, ref.boot.B, f, log=True)
            rec["B_ratio_lo"], rec["B_ratio_hi"] = np.exp(lo), np.exp(hi)
        a_moved = (np.isfinite(rec["dA_lo"]) and (rec["dA_lo"] > 0 or rec["dA_hi"] < 0)
                   and abs(rec["dA"]) >= margin)
        b_moved = np.isfinite(rec["B_ratio_lo"]) and (rec["B_ratio_lo"] > 1 or rec["B_ratio_hi"] < 1)
        if not (g.fit.converged and ref.fit.converged):
            # a parameter at its bound (C_mid past the data): A is an extrapolation, its replicates
            # pile up on the bound and a "CI" from them means nothing
            rec["verdict"] = "not resolved (fit not converged)"
        else:
            rec["verdict"] = ("moved A" + (" and B" if b_moved else "") if a_moved
                              else "only B" if b_moved else "not resolved")
        rows.append(rec)
    return pd.DataFrame(rows, columns=["scale", "variant", "vs", "choices", "dA", "dA_lo", "dA_hi",
                                       "B_ratio", "B_ratio_lo", "B_ratio_hi", "verdict"])


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


def seed_claims(runs: pd.DataFrame, train: pd.DataFrame, fits, finals: pd.DataFrame,
                effects: pd.DataFrame, eval_set: str, held_out: str = "held_out",
                seed_col: str | None = "run.seed") -> pd.DataFrame:
    """The four claims with evidence and verdict (see the module docstring). ``train`` is
    ``Results.train``."""
    variants = set(runs["variant"].dropna())
    series = train_series(runs, train, list(TRAIN_KEYS), seed_col)
    out = []

    # 1. incorrect-response length: GRPO grows, Dr. GRPO does not
    grpo, dr = _find(variants, "grpo"), _find(variants, "dr_grpo")
    if grpo and dr:
        trend = run_trend(matched(series, (grpo, dr)), "rollout/response_len_incorrect", "change")
        g = t_interval(trend[trend["variant"] == grpo]["value"])
        d = t_interval(trend[trend["variant"] == dr]["value"])
        diff = paired(trend, grpo, dr)
        grows = np.isfinite(g[1]) and g[1] > 0
        stops = grows and np.isfinite(diff[1]) and diff[1] > 0
        dr_grows = np.isfinite(d[1]) and d[1] > 0 and not stops
        verdict = ("reproduces" if stops else
                   "does not reproduce" if (np.isfinite(g[2]) and g[2] <= 0) or dr_grows
                   else "not resolved")
        evidence = (f"change in mean incorrect-response length (tokens, last quarter of steps - "
                    f"first quarter), per run: {grpo} {_fmt(*g)}, {dr} {_fmt(*d)}; "
                    f"paired {grpo} - {dr}: {_fmt(*diff)}. "
                    + ("GRPO's incorrect responses show no resolvable growth here, so there is "
                       "nothing for Dr. GRPO to stop." if not grows else ""))
        out.append(_claim(1, "Dr. GRPO stops the growth of incorrect-response length seen with "
                          "GRPO", verdict, evidence))
    else:
        out.append(_claim(1, "Dr. GRPO stops the growth of incorrect-response length seen with "
                          "GRPO", "not tested", "needs variants grpo and dr_grpo"))

    # 2. entropy: clip-higher vs symmetric clip
    text2 = "Clip-higher keeps policy entropy higher than symmetric clipping"
    ch = _pick(variants, "grpo", "clip_high") if grpo else None
    pair = (ch, grpo) if ch else ((_find(variants, "dapo"), grpo) if grpo else (None, None))
    if all(pair):
        both = matched(series, pair)
        trend = run_trend(both, "policy/entropy", "late_mean")
        diff = paired(trend, *pair)
        ref_level = t_interval(trend[trend["variant"] == pair[1]]["value"])
        clip = both[both["variant"] == pair[1]]["policy/clip_frac"]
        clip_frac = float(clip.mean()) if clip.notna().any() else float("nan")
        verdict = ("reproduces" if np.isfinite(diff[1]) and diff[1] > 0 else
                   "does not reproduce" if np.isfinite(diff[2]) and diff[2] < 0 else
                   "not resolved")
        evidence = (f"mean token entropy over the second half of training, paired by scale and "
                    f"seed: {pair[0]} - {pair[1]} = {_fmt(*diff)} nats ({pair[1]}: "
                    f"{_fmt(*ref_level)}); fraction of {pair[1]}'s tokens clipped: "
                    f"{clip_frac:.2%}"
                    + (" (the clip almost never binds, so moving its upper bound cannot act)"
                       if clip_frac < 0.01 else "")
                    + ("" if ch else "; dapo differs from grpo in more than the clip, so this "
                       "is confounded"))
        out.append(_claim(2, text2, verdict, evidence))
    else:
        out.append(_claim(2, text2, "not tested", "needs grpo and grpo+clip_high=... (or dapo)"))

    # 3. zero-variance filtering / dynamic sampling: B more than A
    text3 = "Zero-variance filtering / dynamic sampling changes efficiency more than the asymptote"
    flt = _pick(variants, "grpo", "group_filter") if grpo else None
    sub = effects[effects["variant"] == flt] if flt is not None and len(effects) else pd.DataFrame()
    if len(sub):
        parts, verdicts = [], []
        for rec in sub.to_dict("records"):
            parts.append(f"{rec['scale']}: dA = {rec['dA']:+.3f} [{rec['dA_lo']:+.3f}, "
                         f"{rec['dA_hi']:+.3f}], B ratio = {rec['B_ratio']:.2f} "
                         f"[{rec['B_ratio_lo']:.2f}, {rec['B_ratio_hi']:.2f}] -> {rec['verdict']}")
            verdicts.append(rec["verdict"])
        verdict = ("reproduces" if all(v == "only B" for v in verdicts) else
                   "does not reproduce" if any(v.startswith("moved A") for v in verdicts) else
                   "not resolved" if all(v.startswith("not resolved") for v in verdicts) else
                   "partly (" + "; ".join(verdicts) + ")")
        out.append(_claim(3, text3, verdict, f"{flt} vs {grpo}, " + "; ".join(parts)))
    else:
        out.append(_claim(3, text3, "not tested",
                          "needs grpo and a fitted grpo+group_filter=... ablation"))

    # 4. differences between algorithms: in-distribution vs held-out (one-way ANOVA over runs)
    text4 = "Algorithm differences are larger in-distribution than held-out"
    presets = sorted(v for v in variants if "+" not in v)
    fin = finals[finals["variant"].isin(presets)] if finals is not None else pd.DataFrame()
    if len(fin) and {eval_set, held_out} <= set(fin["eval_set"]) and len(presets) > 2:
        parts, calls = [], []
        outliers = set()
        for scale, s in fin.groupby("scale_value"):
            res = {es: between_variants(s[s["eval_set"] == es]) for es in (eval_set, held_out)}
            (vi, pi, ri), (vh, ph, rh) = res[eval_set], res[held_out]
            call = ("larger" if pi < 0.05 and vi > vh else
                    "smaller" if ph < 0.05 and vh > vi else "unresolved")
            # robustness: does one algorithm carry the whole difference? drop the one whose mean
            # in-distribution gain is furthest from the others' and test again
            ind = s[s["eval_set"] == eval_set].assign(gain=lambda d: d["final"] - d["r0"])
            means = ind.groupby("variant")["gain"].mean()
            far = (means - means.median()).abs().idxmax()
            _, p_wo, _ = between_variants(s[(s["eval_set"] == eval_set) & (s["variant"] != far)])
            if call == "larger" and p_wo >= 0.05:
                call = "one algorithm"
                outliers.add(far)
            calls.append(call)
            parts.append(f"{scale}: between-algorithm sd of the gain {eval_set} {np.sqrt(vi):.3f} "
                         f"(F-test p = {pi:.3g}, range {ri:.3f}; without {far}: p = "
                         f"{p_wo:.3g}) vs {held_out} {np.sqrt(vh):.3f} (p = {ph:.3g}, range "
                         f"{rh:.3f})")
        verdict = ("reproduces" if all(c == "larger" for c in calls) else
                   f"only through {', '.join(sorted(outliers))}: the other algorithms do not "
                   "differ resolvably in either set" if all(c == "one algorithm" for c in calls)
                   else
                   "does not reproduce" if any(c == "smaller" for c in calls) else
                   "not resolved" if all(c == "unresolved" for c in calls) else
                   "partly (" + ", ".join(calls) + ")")
        out.append(_claim(4, text4, verdict, f"{len(presets)} algorithms, gain = final - R0 per "
                          "run; the between-algorithm sd is what remains after the seed-to-seed "
                          "(and eval) noise within an algorithm is taken out, and the F-test "
                          "asks whether the algorithms differ at all. " + "; ".join(parts)))
    else:
        out.append(_claim(4, text4, "not tested", f"needs >2 algorithms evaluated on {eval_set} "
                          f"and {held_out}"))
    return pd.DataFrame(out)


def between_variants(finals: pd.DataFrame) -> tuple[float, float, float]:
    """One-way ANOVA of per-run gains (final - r0) by variant: (between-variant variance
    component, F-test p-value, range of the variant means). The variance component is
    (MS_between - MS_within) / n (n = runs per variant, harmonic mean), floored at 0: the spread
    of the algorithms' true gains once seed and eval noise are taken out."""
    g = finals.assign(gain=finals["final"] - finals["r0"]).dropna(subset=["gain"])
    groups = [x["gain"].to_numpy(float) for _, x in g.groupby("variant")]
    groups = [x for x in groups if x.size]
    k, n_total = len(groups), sum(x.size for x in groups)
    means = np.array([x.mean() for x in groups]) if groups else np.array([])
    if k < 2 or n_total <= k:
        return float("nan"), float("nan"), float(np.ptp(means)) if means.size else float("nan")
    grand = np.concatenate(groups).mean()
    ms_b = sum(x.size * (x.mean() - grand) ** 2 for x in groups) / (k - 1)
    ms_w = sum(((x - x.mean()) ** 2).sum() for x in groups) / (n_total - k)
    n0 = k / sum(1.0 / x.size for x in groups)
    p = float(stats.f.sf(ms_b / ms_w, k - 1, n_total - k)) if ms_w > 0 else 0.0
    return max((ms_b - ms_w) / n0, 0.0), p, float(np.ptp(means))


def _claim(n: int, claim: str, verdict: str, evidence: str) -> dict:
    return {"claim": n, "statement": claim, "verdict": verdict, "evidence": evidence}

