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
    rows = zip(trend["variant"].tolist(), trend["scale"].tolist(), trend["seed"].tolist(),
               trend["value"].tolist())
    a, b = {}, {}
    for variant, scale, seed, value in rows:
        if variant == first:
            a[(scale, seed)] = value
        elif variant == second:
            b[(scale, seed)] = value
    return t_interval([a[k] - b[k] for k in a if k in b])


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


#: equivalence margin on B for "no effect": B ratio CI inside (1/B_MARGIN, B_MARGIN)
B_MARGIN = 1.25


def effect_verdict(dA: float, dA_ci: tuple[float, float], B_ratio_ci: tuple[float, float],
                   identified: bool, margin: float = 0.02, b_margin: float = B_MARGIN) -> str:
    """The verdict of one design-choice comparison (shared by the report and ``calibrate``).

    * "not resolved (fit not identified)": either fit is not identified (A is an extrapolation;
      its replicates pile up on a bound and an interval from them means nothing).
    * "moved A" (+ " and B"): the dA interval excludes 0 and |dA| >= margin.
    * "only B": the B-ratio interval excludes 1 *and* the dA interval lies inside
      (-margin, +margin) (A shown not to move, an equivalence test).
    * "moved B, A not resolved": B moved, A neither moved nor shown equal.
    * "no effect": dA inside (-margin, margin) and B ratio inside (1/b_margin, b_margin).
    * "not resolved": otherwise (the runs cannot tell)."""
    if not identified:
        return "not resolved (fit not identified)"
    lo, hi = dA_ci
    b_lo, b_hi = B_ratio_ci
    a_moved = bool(np.isfinite(lo) and (lo > 0 or hi < 0) and abs(dA) >= margin)
    a_equal = bool(np.isfinite(lo) and -margin < lo and hi < margin)
    b_moved = bool(np.isfinite(b_lo) and (b_lo > 1 or b_hi < 1))
    b_equal = bool(np.isfinite(b_lo) and 1 / b_margin < b_lo and b_hi < b_margin)
    if a_moved:
        return "moved A and B" if b_moved else "moved A"
    if b_moved:
        return "only B" if a_equal else "moved B, A not resolved"
    if a_equal and b_equal:
        return "no effect"
    return "not resolved"


def effect_intervals(g_boot, ref_boot) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% intervals of dA and of the B ratio from two groups' bootstrap replicates (resampled
    independently, subtracted; widened by the larger small-sample factor)."""
    if g_boot is None or ref_boot is None:
        return (np.nan, np.nan), (np.nan, np.nan)
    f = max(g_boot.inflation(), ref_boot.inflation())
    _, a_lo, a_hi = _diff_ci(g_boot.A, ref_boot.A, f, log=False)
    _, lo, hi = _diff_ci(g_boot.B, ref_boot.B, f, log=True)
    return (a_lo, a_hi), (float(np.exp(lo)), float(np.exp(hi)))


def choice_effects(fits, runs: pd.DataFrame, eval_set: str, reference: str = REFERENCE,
                   margin: float = 0.02) -> pd.DataFrame:
    """Each variant vs ``reference`` per scale: differing choices, dA and B ratio with CIs, verdict.

    dA = A(variant) - A(reference); B is compared as a ratio (B is an exponent: log-space CI).
    Verdicts: :func:`effect_verdict`."""
    groups = {(g.variant, g.scale): g for g in fits
              if g.level == "group" and g.eval_set == eval_set and g.fit is not None}
    rows = []
    for (variant, scale), g in sorted(groups.items()):
        ref = groups.get((reference, scale))
        if variant == reference or ref is None:
            continue
        (a_lo, a_hi), (b_lo, b_hi) = effect_intervals(g.boot, ref.boot)
        rec = {"scale": scale, "variant": variant, "vs": reference,
               "choices": _differences(runs, variant, reference),
               "dA": g.fit.A - ref.fit.A, "dA_lo": a_lo, "dA_hi": a_hi,
               "B_ratio": g.fit.B / ref.fit.B if ref.fit.B else np.nan,
               "B_ratio_lo": b_lo, "B_ratio_hi": b_hi}
        rec["verdict"] = effect_verdict(rec["dA"], (a_lo, a_hi), (b_lo, b_hi),
                                        g.fit.identified and ref.fit.identified, margin)
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
    ``Results.train``. Each verdict comes from one ``claimN_verdict`` function, the same ones
    :mod:`analysis.calibrate` measures."""
    variants = set(runs["variant"].dropna())
    series = train_series(runs, train, list(TRAIN_KEYS), seed_col)
    out = []

    # 1. incorrect-response length: GRPO grows, Dr. GRPO does not
    text1 = "Dr. GRPO stops the growth of incorrect-response length seen with GRPO"
    grpo, dr = _find(variants, "grpo"), _find(variants, "dr_grpo")
    if grpo and dr:
        trend = run_trend(matched(series, (grpo, dr)), "rollout/response_len_incorrect", "change")
        out.append(_claim(1, text1, *claim1_verdict(trend, grpo, dr)))
    else:
        out.append(_claim(1, text1, "not tested", "needs variants grpo and dr_grpo"))

    # 2. entropy: clip-higher vs symmetric clip
    text2 = "Clip-higher keeps policy entropy higher than symmetric clipping"
    ch = _pick(variants, "grpo", "clip_high") if grpo else None
    pair = (ch, grpo) if ch else ((_find(variants, "dapo"), grpo) if grpo else (None, None))
    if all(pair):
        both = matched(series, pair)
        trend = run_trend(both, "policy/entropy", "late_mean")
        clip = both[both["variant"] == pair[1]]["policy/clip_frac"]
        clip_frac = float(clip.mean()) if clip.notna().any() else float("nan")
        verdict, evidence = claim2_verdict(trend, *pair, clip_frac=clip_frac)
        if not ch:
            evidence += "; dapo differs from grpo in more than the clip, so this is confounded"
        out.append(_claim(2, text2, verdict, evidence))
    else:
        out.append(_claim(2, text2, "not tested", "needs grpo and grpo+clip_high=... (or dapo)"))

    # 3. zero-variance filtering / dynamic sampling: B more than A
    text3 = "Zero-variance filtering / dynamic sampling changes efficiency more than the asymptote"
    flt = _pick(variants, "grpo", "group_filter") if grpo else None
    sub = effects[effects["variant"] == flt] if flt is not None and len(effects) else pd.DataFrame()
    if len(sub):
        parts = [f"{rec['scale']}: dA = {rec['dA']:+.3f} [{rec['dA_lo']:+.3f}, "
                 f"{rec['dA_hi']:+.3f}], B ratio = {rec['B_ratio']:.2f} "
                 f"[{rec['B_ratio_lo']:.2f}, {rec['B_ratio_hi']:.2f}] -> {rec['verdict']}"
                 for rec in sub.to_dict("records")]
        out.append(_claim(3, text3, claim3_verdict(list(sub["verdict"])),
                          f"{flt} vs {grpo}, " + "; ".join(parts)))
    else:
        out.append(_claim(3, text3, "not tested",
                          "needs grpo and a fitted grpo+group_filter=... ablation"))

    # 4. differences between algorithms: in-distribution vs held-out
    text4 = "Algorithm differences are larger in-distribution than held-out"
    presets = sorted(v for v in variants if "+" not in v)
    fin = finals[finals["variant"].isin(presets)] if finals is not None else pd.DataFrame()
    if len(fin) and {eval_set, held_out} <= set(fin["eval_set"]) and len(presets) > 2:
        verdict, parts = claim4_verdict(fin, eval_set, held_out)
        out.append(_claim(4, text4, verdict, f"{len(presets)} algorithms, gain = final - R0 per "
                          "run; the between-algorithm sd is what remains after the seed-to-seed "
                          "(and eval) noise within an algorithm is taken out; the F-test asks "
                          "whether the algorithms differ at all, z whether the in-distribution "
                          "variance component exceeds the held-out one (one-sided, 2.5%). "
                          + "; ".join(parts)))
    else:
        out.append(_claim(4, text4, "not tested", f"needs >2 algorithms evaluated on {eval_set} "
                          f"and {held_out}"))
    return pd.DataFrame(out)


def claim1_verdict(trend: pd.DataFrame, grpo: str, dr: str) -> tuple[str, str]:
    """Claim 1 from per-run length changes (:func:`run_trend`): reproduces when GRPO's growth
    interval is above 0 and the paired GRPO - Dr. GRPO interval is above 0; does not reproduce
    when GRPO's interval is <= 0 or Dr. GRPO grows resolvably without being outgrown."""
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
    return verdict, evidence


def claim2_verdict(trend: pd.DataFrame, clip: str, ref: str,
                   clip_frac: float = float("nan")) -> tuple[str, str]:
    """Claim 2 from per-run late entropy: the paired clip-higher - reference interval above 0
    reproduces, below 0 does not."""
    diff = paired(trend, clip, ref)
    ref_level = t_interval(trend[trend["variant"] == ref]["value"])
    verdict = ("reproduces" if np.isfinite(diff[1]) and diff[1] > 0 else
               "does not reproduce" if np.isfinite(diff[2]) and diff[2] < 0 else
               "not resolved")
    evidence = (f"mean token entropy over the second half of training, paired by scale and "
                f"seed: {clip} - {ref} = {_fmt(*diff)} nats ({ref}: {_fmt(*ref_level)}); "
                f"fraction of {ref}'s tokens clipped: {clip_frac:.2%}"
                + (" (the clip almost never binds, so moving its upper bound cannot act)"
                   if clip_frac < 0.01 else ""))
    return verdict, evidence


def claim3_verdict(verdicts: list[str]) -> str:
    """Claim 3 from the filter's design-choice verdicts (one per scale)."""
    return ("reproduces" if verdicts and all(v == "only B" for v in verdicts) else
            "does not reproduce" if any(v.startswith("moved A") for v in verdicts) else
            "not resolved" if all(v.startswith("not resolved") or v == "moved B, A not resolved"
                                  for v in verdicts) else
            "partly (" + "; ".join(verdicts) + ")")


def claim4_verdict(fin: pd.DataFrame, eval_set: str, held_out: str,
                   alpha: float = 0.05) -> tuple[str, list[str]]:
    """Claim 4 from per-run finals of the presets (columns variant, scale_value, eval_set,
    final, r0). Per scale: "larger" when the in-distribution variance component exceeds the
    held-out one (:func:`spread_difference`, one-sided at alpha/2) and the algorithms differ
    in-distribution at all (F-test p < alpha); "smaller" the other way round (at alpha/2 divided
    by the number of scales: one scale suffices for "does not reproduce"); "one algorithm"
    when "larger" does not survive dropping the algorithm whose in-distribution gain is
    furthest from the median; else "unresolved".

    (The earlier rule, "in-dist F-test p < 0.05 and the in-dist point estimate above the
    held-out one", read *reproduces* in 43.5% of simulated sweeps with equal true spreads.)"""
    scales = sorted(set(fin["scale_value"].astype(str)))
    z_crit = stats.norm.ppf(1 - alpha / 2)
    # "does not reproduce" needs only one scale to go the other way: Bonferroni over scales
    z_crit_any = stats.norm.ppf(1 - alpha / 2 / max(len(scales), 1))
    cols = {c: fin[c].to_numpy() for c in ("variant", "eval_set")}
    scale_col = fin["scale_value"].astype(str).to_numpy()
    gain = fin["final"].to_numpy(float) - fin["r0"].to_numpy(float)
    parts, calls, outliers = [], [], set()
    for scale in scales:
        at = scale_col == scale
        m_in, m_ho = at & (cols["eval_set"] == eval_set), at & (cols["eval_set"] == held_out)
        a_in = _anova_arrays(cols["variant"][m_in], gain[m_in])
        a_ho = _anova_arrays(cols["variant"][m_ho], gain[m_ho])
        (vi, pi, ri), (vh, ph, rh) = _components(a_in), _components(a_ho)
        z = _spread_z(a_in, a_ho)
        call = ("larger" if z >= z_crit and pi < alpha else
                "smaller" if z <= -z_crit_any and ph < alpha else "unresolved")
        names, codes = np.unique(cols["variant"][m_in], return_inverse=True)
        means = np.bincount(codes, gain[m_in]) / np.bincount(codes)
        far = str(names[np.argmax(np.abs(means - np.median(means)))]) if names.size else ""
        keep_in, keep_ho = m_in & (cols["variant"] != far), m_ho & (cols["variant"] != far)
        w_in = _anova_arrays(cols["variant"][keep_in], gain[keep_in])
        w_ho = _anova_arrays(cols["variant"][keep_ho], gain[keep_ho])
        p_wo, z_wo = _components(w_in)[1], _spread_z(w_in, w_ho)
        if call == "larger" and (p_wo >= alpha or z_wo < z_crit):
            call = "one algorithm"
            outliers.add(far)
        calls.append(call)
        parts.append(f"{scale}: between-algorithm sd of the gain {eval_set} {np.sqrt(vi):.3f} "
                     f"(F-test p = {pi:.3g}, range {ri:.3f}) vs {held_out} {np.sqrt(vh):.3f} "
                     f"(p = {ph:.3g}, range {rh:.3f}); difference of the variance components "
                     f"z = {z:+.2f}; without {far}: p = {p_wo:.3g}, z = {z_wo:+.2f}")
    verdict = ("reproduces" if all(c == "larger" for c in calls) else
               f"only through {', '.join(sorted(outliers))}: without it the in-distribution "
               "difference is not resolvably larger" if all(c == "one algorithm" for c in calls)
               else "does not reproduce" if any(c == "smaller" for c in calls) else
               "not resolved" if all(c == "unresolved" for c in calls) else
               "partly (" + ", ".join(calls) + ")")
    return verdict, parts


def _anova(finals: pd.DataFrame) -> dict:
    return _anova_arrays(finals["variant"].to_numpy(),
                         finals["final"].to_numpy(float) - finals["r0"].to_numpy(float))


def _anova_arrays(variant: np.ndarray, gain: np.ndarray) -> dict:
    """Mean squares of per-run gains by variant (numpy; ``calibrate`` calls it ~10^4 times)."""
    ok = np.isfinite(gain)
    codes, _ = pd.factorize(np.asarray(variant)[ok])  # 0..k-1, every code present
    gain = gain[ok]
    k, n_total = (int(codes.max()) + 1 if codes.size else 0), int(gain.size)
    sizes = np.bincount(codes, minlength=k).astype(float)
    means = np.bincount(codes, gain, minlength=k) / np.maximum(sizes, 1)
    out = {"k": k, "n": n_total, "range": float(np.ptp(means)) if means.size else float("nan")}
    if k < 2 or n_total <= k:
        return out
    grand = gain.mean()
    out["ms_b"] = float((sizes * (means - grand) ** 2).sum() / (k - 1))
    out["ms_w"] = float(((gain - means[codes]) ** 2).sum() / (n_total - k))
    out["n0"] = float(k / (1.0 / sizes).sum())
    return out


def _components(a: dict) -> tuple[float, float, float]:
    if "ms_b" not in a:
        return float("nan"), float("nan"), a["range"]
    ms_b, ms_w = a["ms_b"], a["ms_w"]
    p = float(stats.f.sf(ms_b / ms_w, a["k"] - 1, a["n"] - a["k"])) if ms_w > 0 else 0.0
    return max((ms_b - ms_w) / a["n0"], 0.0), p, a["range"]


def between_variants(finals: pd.DataFrame) -> tuple[float, float, float]:
    """One-way ANOVA of per-run gains (final - r0) by variant: (between-variant variance
    component, F-test p-value, range of the variant means). The variance component is
    (MS_between - MS_within) / n (n = runs per variant, harmonic mean), floored at 0: the spread
    of the algorithms' true gains once seed and eval noise are taken out."""
    return _components(_anova(finals))


def spread_difference(first: pd.DataFrame, second: pd.DataFrame) -> float:
    """z statistic of V(first) - V(second), V the variance component of :func:`between_variants`
    (unfloored): the spread of *these* algorithms' true gains (fixed effects), estimated as
    S^2 - tau^2 with S^2 the variance of the algorithm means and tau^2 = MS_within / n0 the
    noise variance of one mean. Its variance (normal noise): Var(S^2) = (2 tau^4 + 4 tau^2 V) /
    (k - 1) plus Var(tau^2) = 2 tau^4 / (N - k), with V floored at 0. The two sets are treated as
    independent (the same runs are scored on both: a positive correlation only makes this
    conservative). nan when either set lacks replicate runs."""
    return _spread_z(_anova(first), _anova(second))


def _spread_z(a: dict, b: dict) -> float:
    if "ms_b" not in a or "ms_b" not in b:
        return float("nan")

    def comp(x):
        tau2 = x["ms_w"] / x["n0"]
        v = x["ms_b"] / x["n0"] - tau2
        var = (2 * tau2 ** 2 + 4 * tau2 * max(v, 0.0)) / (x["k"] - 1) \
            + 2 * tau2 ** 2 / (x["n"] - x["k"])
        return v, var

    (va, wa), (vb, wb) = comp(a), comp(b)
    if wa + wb <= 0:
        return float("inf") if va > vb else float("-inf") if va < vb else float("nan")
    return float((va - vb) / np.sqrt(wa + wb))


def _claim(n: int, claim: str, verdict: str, evidence: str) -> dict:
    return {"claim": n, "statement": claim, "verdict": verdict, "evidence": evidence}

