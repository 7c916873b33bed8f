"""The seed claims' cells of the calibration (analysis.calibrate): claims 1 and 2 from simulated
per-step training series, claim 4 from simulated per-run gains, each decided by the report's own
verdict function (:func:`analysis.claims.claim1_verdict`, ``claim2_verdict``,
:func:`analysis.variance.claim4_verdict`) under its null and alternative truths. The noise model is
:class:`analysis.simulate.NoiseModel` (its ``len_*``, ``entropy_*``, ``spread*`` and
``gain_seed_sd`` fields).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.claims import (CLAIM1_MARGIN_FRAC, CLAIM2_MARGIN_FRAC, claim1_verdict,
                             claim2_verdict, claim4_verdict, paired_values)
from analysis.variance import CLAIM4_DECIDED

if TYPE_CHECKING:
    from analysis.simulate import NoiseModel


def _series(rng, n_runs, steps, level, growth, seed_sd_growth, step_sd, seed_sd_level=0.0):
    """Per-step values of n_runs runs: level + per-run offset + growth * step / steps + noise."""
    t = np.arange(1, steps + 1)
    g = growth + rng.normal(0, seed_sd_growth, n_runs)
    lv = level + rng.normal(0, seed_sd_level, n_runs)
    return lv[:, None] + g[:, None] * t[None, :] / steps + rng.normal(0, step_sd, (n_runs, steps))


def _shared(rng, sd: float, n: int):
    """Per-seed offsets both compared arms share (paired runs: the same seed gives both the same
    prompt stream); 0, drawing nothing, where ``sd`` is 0 (the stream as before it existed)."""
    return rng.normal(0, sd, n) if sd > 0 else 0.0


def _trend_frame(values: dict[str, np.ndarray], pairs: list[tuple[str, int]], how: str,
                 steps: int) -> pd.DataFrame:
    """The per-run trend table of simulated series, computed as
    :func:`analysis.claims.run_trend` does (``tests/test_calibrate.py`` checks they agree)."""
    n = steps
    q = max(n // 4, 1)
    rows = {"run_id": [], "variant": [], "scale": [], "seed": [], "value": []}
    for variant, v in values.items():
        vals = (v[:, -q:].mean(1) - v[:, :q].mean(1)) if how == "change" else v[:, n // 2:].mean(1)
        for j, (scale, seed) in enumerate(pairs):
            rows["run_id"].append(f"{variant}-{scale}-{seed}")
            rows["variant"].append(variant)
            rows["scale"].append(scale)
            rows["seed"].append(seed)
            rows["value"].append(float(vals[j]))
    return pd.DataFrame(rows)


def _looked(decide, look: list[int] | None, stops, early: list[bool]) -> str:
    """One simulated sweep's verdict under a seed look: ``decide(rows)`` on the ``look`` rows
    first; where ``stops`` that verdict, it stands (``early`` records it), else ``decide`` on
    every row. ``look`` None: one look at every row."""
    if look is not None:
        first = decide(look)
        early.append(bool(stops(first)))
        if early[-1]:
            return first
    return decide(None)


def _subset(vals: dict[str, np.ndarray], pairs: list, rows: list[int] | None):
    if rows is None:
        return vals, pairs
    return {k: v[rows] for k, v in vals.items()}, [pairs[j] for j in rows]


def claim12_series(rng, nz: NoiseModel, claim: str, n: int, steps: int,
                   truth: float) -> dict[str, np.ndarray]:
    """One simulated sweep's per-step series of the two compared arms (n runs each, paired by
    index): claim 1, incorrect-response lengths, GRPO growing ``len_growth`` and Dr. GRPO
    ``truth``; claim 2, entropies, clip-higher ``truth`` above GRPO. Per-seed offsets both arms
    share (``*_shared_sd``) come first from ``rng``, then each arm's own."""
    if claim == "claim 1":
        growth = nz.len_growth + _shared(rng, nz.len_shared_sd, n)
        return {"grpo": _series(rng, n, steps, nz.len_level, growth, nz.len_seed_sd,
                                nz.len_step_sd),
                "dr_grpo": _series(rng, n, steps, nz.len_level, growth - nz.len_growth + truth,
                                   nz.len_seed_sd, nz.len_step_sd)}
    level = nz.entropy_level + _shared(rng, nz.entropy_shared_sd, n)
    return {"grpo": _series(rng, n, steps, level, 0.0, 0.0, nz.entropy_step_sd,
                            nz.entropy_seed_sd),
            "clip": _series(rng, n, steps, level + truth, 0.0, 0.0, nz.entropy_step_sd,
                            nz.entropy_seed_sd)}


def claim12_cells(pairs: list[tuple[str, int]], steps: int, noise: NoiseModel, n_sweeps: int,
                  seed: int, claim: str = "claim 1", look_seeds: int | None = None
                  ) -> dict[str, list[str]]:
    """Claim 1 or 2 under its null and alternative, ``pairs`` = the (scale, seed) pairs both
    compared variants have, over ``steps`` common steps. Claim 1 null: both variants' incorrect
    responses grow by len_growth (Dr. GRPO stops nothing); alternative: Dr. GRPO's stay flat.
    Claim 2 null: equal entropy; alternative: clip-higher + entropy_effect.

    ``look_seeds``: a look at the pairs whose seed index is below it first; a verdict other than
    "not resolved" there stands, else the claim is read again on every pair (the seeds a
    report's budget names, added after it was read). The result's ``stopped`` holds, per truth,
    the share of sweeps the look decided."""
    rng = np.random.default_rng([seed, 1 if claim == "claim 1" else 2])
    n = len(pairs)
    out = {"null": [], "alt": []}
    early = {"null": [], "alt": []}
    look = None if look_seeds is None else [j for j, (_, s) in enumerate(pairs) if s < look_seeds]
    nz = noise

    def resolved(v: str) -> bool:
        return v != "not resolved"

    for _ in range(n_sweeps):
        if claim == "claim 1":
            for truth, dr_growth in (("null", nz.len_growth), ("alt", 0.0)):
                vals = claim12_series(rng, nz, "claim 1", n, steps, dr_growth)

                def decide(rows, vals=vals):
                    v, p = _subset(vals, pairs, rows)
                    return claim1_verdict(_trend_frame(v, p, "change", steps), "grpo",
                                          "dr_grpo", CLAIM1_MARGIN_FRAC * nz.len_level)[0]
                out[truth].append(_looked(decide, look, resolved, early[truth]))
        else:
            for truth, effect in (("null", 0.0), ("alt", nz.entropy_effect)):
                vals = claim12_series(rng, nz, "claim 2", n, steps, effect)

                def decide(rows, vals=vals):
                    v, p = _subset(vals, pairs, rows)
                    return claim2_verdict(_trend_frame(v, p, "late_mean", steps), "clip", "grpo",
                                          margin=CLAIM2_MARGIN_FRAC * nz.entropy_level)[0]
                out[truth].append(_looked(decide, look, resolved, early[truth]))
    if look is not None:
        out["stopped"] = {t: float(np.mean(e)) for t, e in early.items()}
    return out


def claim4_cells(presets: dict[str, list[str]], seeds: int, noise: NoiseModel, n_items: int,
                 k: int, n_sweeps: int, seed: int, look_seeds: int | None = None
                 ) -> dict[str, list[str]]:
    """Claim 4 under equal true spreads (null, both ``spread``), no differences at all (zero) and
    the alternative (held-out spread ``spread_alt_held_out``). ``presets``: scale -> the preset
    names at that scale. ``look_seeds``: each algorithm's first that many seeds are read first;
    *reproduces* or *does not reproduce* there stands, anything else is read again with all
    ``seeds`` (``stopped``: the share the look decided, per truth)."""
    rng = np.random.default_rng([seed, 4])
    nz = noise
    se_eval = {s: np.sqrt(max(p * (1 - p), 0.05) / (k * n_items)) for s, p in
               (("in_dist", nz.R0 + 0.07), ("held_out", nz.R0 / 2 + 0.04))}
    truths = {"null": (nz.spread, nz.spread), "zero": (0.0, 0.0),
              "alt": (nz.spread, nz.spread_alt_held_out)}
    cols = {"variant": [], "scale_value": [], "eval_set": []}
    seed_of, sizes = [], []
    for scale, names in presets.items():
        for es in ("in_dist", "held_out"):
            for name in names:
                for s in range(seeds):
                    seed_of.append(s)
                    cols["variant"].append(name)
                    cols["scale_value"].append(scale)
                    cols["eval_set"].append(es)
            sizes.append((es, len(names)))
    frame = pd.DataFrame(cols)
    look = None if look_seeds is None else np.flatnonzero(np.array(seed_of) < look_seeds)
    out = {t: [] for t in truths}
    early = {t: [] for t in truths}
    for _ in range(n_sweeps):
        for truth, (sp_in, sp_ho) in truths.items():
            finals, r0s = [], []
            for es, n_alg in sizes:
                # fixed effects: these algorithms' true gains have exactly this spread (sd)
                z = rng.normal(0, 1, n_alg)
                z = (z - z.mean()) / z.std(ddof=1)
                mu = (sp_in if es == "in_dist" else sp_ho) * z
                r0 = rng.normal(0, se_eval[es])  # one warm start: R0 shared by the scale
                whole = nz.gain_sd_in_dist if es == "in_dist" else nz.gain_sd_held_out
                noise_runs = (rng.normal(0, whole, (n_alg, seeds)) if whole > 0 else
                              rng.normal(0, nz.gain_seed_sd, (n_alg, seeds))
                              + rng.normal(0, se_eval[es], (n_alg, seeds)))
                finals.append((0.07 + mu[:, None] + noise_runs).ravel())
                r0s.append(np.full(n_alg * seeds, r0))
            fin = frame.assign(final=np.concatenate(finals), r0=np.concatenate(r0s))

            def decide(rows, fin=fin):
                return claim4_verdict(fin if rows is None else fin.iloc[rows], "in_dist",
                                      "held_out")[0]
            out[truth].append(_looked(decide, look, lambda v: v in CLAIM4_DECIDED,
                                      early[truth]))
    if look is not None:
        out["stopped"] = {t: float(np.mean(e)) for t, e in early.items()}
    return out



#: claim 1's per-run value is the change from the first quarter of the steps to the last: a
#: growth g spread evenly over the run shows as 0.75 g (1 - 1/4, exactly so for steps divisible
#: by 4)
CHANGE_SPAN = 0.75


def _pooled_sd(trend: pd.DataFrame, names) -> tuple[float, float]:
    """(sd of one run's value pooled over the arms ``names``, sd of the paired difference of the
    first two), nan where fewer than 2 values."""
    arms = [trend.loc[trend["variant"] == v, "value"].to_numpy(float) for v in names]
    var = [a.var(ddof=1) for a in arms if a.size >= 2]
    diffs = paired_values(trend, *names)
    return (float(np.sqrt(np.mean(var))) if var else float("nan"),
            float(np.std(diffs, ddof=1)) if len(diffs) >= 2 else float("nan"))


def _split(sd: float, sd_diff: float) -> tuple[float, float]:
    """(each arm's own sd, the sd both arms share) that give one run's value the sd ``sd`` and a
    paired difference the sd ``sd_diff``: own = sd_diff / sqrt 2, shared = sqrt(sd^2 - own^2)
    (0 where the pairs are noisier than independent runs would be)."""
    own = sd_diff / np.sqrt(2)
    return float(own), float(np.sqrt(max(sd ** 2 - own ** 2, 0.0)))


def measured_claim_noise(inputs: dict) -> dict:
    """The claims' noise as a study's own runs measured it, from its ``claim_inputs.json``
    (:func:`analysis.claims.claim_inputs`), as :class:`NoiseModel` field values; the stated
    alternatives scale with the measured level (twice each claim's equivalence margin):

    * claim 1: the reference's mean incorrect-response length; the per-run growth's sd split into
      each arm's own and the part paired runs share (:func:`_split`, in growth units: the
      value's sd / :data:`CHANGE_SPAN`), no per-step noise beyond it; GRPO's growth
      2 x CLAIM1_MARGIN_FRAC x the level.
    * claim 2: the reference's mean entropy; the per-run late entropy's sd split the same way;
      clip-higher's alternative gain 2 x CLAIM2_MARGIN_FRAC x the level.
    * claim 4: the in-distribution and held-out between-algorithm sds as the null's spread and the
      alternative's held-out spread, and each set's within-algorithm sd of a run's gain
      (variance components of :mod:`analysis.variance`, averaged over scales).

    A claim without the runs (or with fewer than 2 per arm) leaves its fields out."""
    from analysis.claims import trend_frame as frame
    from analysis.variance import scale_anovas
    out: dict = {}
    c = inputs.get("1")
    if c and np.isfinite(c["level"][0]) and c["level"][0] > 0:
        sd, sd_diff = _pooled_sd(frame(c["trend"]), (c["first"], c["second"]))
        if np.isfinite(sd) and np.isfinite(sd_diff):
            own, shared = _split(sd / CHANGE_SPAN, sd_diff / CHANGE_SPAN)
            out.update(len_level=float(c["level"][0]), len_seed_sd=own, len_shared_sd=shared,
                       len_step_sd=0.0, len_growth=2 * CLAIM1_MARGIN_FRAC * float(c["level"][0]))
    c = inputs.get("2")
    if c and np.isfinite(c["level"][0]) and c["level"][0] > 0:
        sd, sd_diff = _pooled_sd(frame(c["trend"]), (c["first"], c["second"]))
        if np.isfinite(sd) and np.isfinite(sd_diff):
            own, shared = _split(sd, sd_diff)
            out.update(entropy_level=float(c["level"][0]), entropy_seed_sd=own,
                       entropy_shared_sd=shared, entropy_step_sd=0.0,
                       entropy_effect=2 * CLAIM2_MARGIN_FRAC * float(c["level"][0]))
    c = inputs.get("4")
    if c:
        fin = pd.DataFrame(c["finals"], columns=["variant", "scale_value", "eval_set", "final",
                                                 "r0"])
        parts = [a for a in scale_anovas(fin, inputs["eval_set"], inputs["held_out"]).values()
                 if "ms_b" in a[0] and "ms_b" in a[1]]
        if parts:
            def mean(f):
                return float(np.mean([f(a) for a in parts]))
            v_in = mean(lambda a: max((a[0]["ms_b"] - a[0]["ms_w"]) / a[0]["n0"], 0.0))
            v_ho = mean(lambda a: max((a[1]["ms_b"] - a[1]["ms_w"]) / a[1]["n0"], 0.0))
            out.update(spread=float(np.sqrt(v_in)), spread_alt_held_out=float(np.sqrt(v_ho)),
                       gain_sd_in_dist=float(np.sqrt(mean(lambda a: a[0]["ms_w"]))),
                       gain_sd_held_out=float(np.sqrt(mean(lambda a: a[1]["ms_w"]))))
    return out


def read_claim_inputs(path: str) -> dict:
    """A ``claim_inputs.json`` that ``rlablate analyze`` wrote, checked to give claim noise;
    ValueError naming the file otherwise (for the CLI's one error line)."""
    import json
    try:
        with open(path) as fh:
            inputs = json.load(fh)
        if not {"eval_set", "held_out"} <= set(inputs):
            raise KeyError("no eval_set and held_out")
        measured_claim_noise(inputs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"--claim-noise-from {path}: not a claim_inputs.json that `rlablate "
                         f"analyze` wrote ({exc})") from None
    return inputs


def noise_from_file(path: str, base: NoiseModel) -> NoiseModel:
    """``base`` with the claims' noise a study's ``claim_inputs.json`` at ``path`` measured."""
    from dataclasses import replace
    return replace(base, **measured_claim_noise(read_claim_inputs(path)))
