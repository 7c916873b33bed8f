"""Calibration by simulation: how often each verdict of the report is wrong, for one sweep spec.

``rlablate calibrate sweeps/demo.yaml`` simulates many sweeps with the spec's own schedule (each
group's train.steps, eval.every, seeds and eval-set size) and the noise the project measures, under
null truths (nothing differs) and alternative truths (an effect of a stated size), runs every
simulated sweep through the *same* verdict functions the report uses
(:func:`analysis.effects.effect_verdict`, ``claim1_verdict`` ... ``claim4_verdict``, the fits of
:mod:`analysis.bootstrap`), and reports for every verdict its false-positive rate (a verdict given
when its truth does not hold) and its power (given when it does), each with a 95% Clopper-Pearson
interval. A false-positive rate is the largest over the truths where the verdict is false.

Noise model (:class:`analysis.simulate.NoiseModel`, every number a flag):

* eval: a fixed item set of ``n_items`` items (the spec's eval.<set>.n_items, default 256) with
  ``k`` samples each (default 4); item i's success probability moves from its own start to its
  own ceiling along the shared ScaleRL sigmoid (as :mod:`analysis.synth`), so pass rates carry
  the binomial noise of the harness's evals; the reported stderr is sd(per-item)/sqrt(N) as the
  harness logs it. The step-0 eval (R0) is shared by all runs of a scale (one warm start, a fixed
  eval seed).
* seeds: each run's ceiling is shifted by N(0, seed_sd_A) and its B scaled by
  exp(N(0, seed_sd_logB)); with ``runaway_p`` > 0 a run also runs away with that probability and
  its ceiling moves by ``runaway_dA`` (a bimodal seed effect, as length run-aways make one).
* compute is proportional to the step; C_mid = mid_frac x the reference group's train.steps.
* claims 1 and 2: per-step series with a per-run random level/growth (seed sd) and per-step
  noise; claim 4: per-run gains at matched training with a seed sd and the eval noise of a pass
  rate, algorithm effects drawn with a stated spread per eval set.

The spec is read here (``analysis`` never imports ``harness``): ``set``, ``grid`` (its
``algo.preset`` and ``model.scale``), ``zip``, ``exclude``, ``include`` and ``seeds``, plus the
base config's ``train.steps`` / ``eval.every`` / eval-set sizes when the base is a YAML file. That
is enough for the schedule; it is not the harness's expansion (no config validation).
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from analysis.bootstrap import CurveData, bootstrap_fit, fit_curve_data
from analysis.calibrate_claims import claim4_cells, claim12_cells
from analysis.claims import claim3_verdict
from analysis.effects import B_MARGIN, RESOLVED, UNIDENTIFIED, effect_intervals, effect_verdict
from analysis.compare import DEFAULT_MARGIN
from analysis.fit import FitError
from analysis.meta import pool_effect
from analysis.schedule import REFERENCE, Group, read_schedule, schedule_from_results  # noqa: F401
from analysis.simulate import NoiseModel, Simulator, ceiling_shift  # noqa: F401  (their home is analysis.simulate)


def _fit(curve: CurveData, n_boot: int, seed: int):
    try:
        fit = fit_curve_data(curve)
    except FitError:
        return None, None
    if not fit.identified:
        return fit, None
    try:
        return fit, bootstrap_fit(curve, n_boot, seed=seed, point=fit)
    except FitError:
        return fit, None


def _effect(ref, var, margin):
    (f_r, b_r), (f_v, b_v) = ref, var
    if f_r is None or f_v is None:
        return "not resolved (fit refused)"
    if not (f_r.identified and f_v.identified):
        return effect_verdict(0, (np.nan, np.nan), (np.nan, np.nan), False, margin)
    a_ci, b_ci = effect_intervals(b_v, b_r)
    return effect_verdict(f_v.A - f_r.A, a_ci, b_ci, True, margin)


# ------------------------------------------------------------------------------------------------
# Cells
# ------------------------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of a rate k / n."""
    a = (1 - level) / 2
    lo = stats.beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def _truths(noise: NoiseModel, margin: float) -> dict[str, tuple[float, float]]:
    """The simulated truths of a comparison, name -> (dA, B ratio): null (same curve), A (dA =
    effect_A), B (B x effect_B), edge (dA = margin, the boundary of "no effect")."""
    return {"null": (0.0, 1.0), "A": (noise.effect_A, 1.0), "B": (0.0, noise.effect_B),
            "edge": (margin, 1.0)}


def effect_cells(ref: Group, var: Group, noise: NoiseModel, n_sweeps: int, seed: int,
                 margin: float = DEFAULT_MARGIN, n_boot: int = 1000,
                 replications: tuple[int, ...] | None = None) -> dict[str, list[str]]:
    """Verdicts of ``var`` vs ``ref`` over ``n_sweeps`` simulated sweeps under each truth:
    null (same curve), A (dA = effect_A), B (B x effect_B), edge (dA = margin, the boundary of
    "no effect"). The reference group is simulated once per sweep and shared by the truths.

    ``replications`` (seeds of each, e.g. (4, 6, 6)): each simulated sweep is that many studies
    of the design instead of one, sharing the eval items and R0 (one warm start, one eval seed,
    as real replications do) with their own seeds, each analysed alone; the verdict is
    `rlablate combine`'s (:func:`analysis.meta.pool_effect` on their intervals)."""
    rng = np.random.default_rng([seed, ref.steps, var.steps, ref.every, var.every])
    sim = Simulator(noise, ref.n_items, ref.k, rng)
    c_mid = noise.mid_frac * ref.steps
    truths = _truths(noise, margin)
    studies = [(ref, var)] if replications is None else [
        (replace(ref, seeds=n), replace(var, seeds=n)) for n in replications]
    out = {t: [] for t in truths}
    for i in range(n_sweeps):
        r0_i, a_i = sim.items(noise.A, noise.R0)
        r0_obs = sim.r0(r0_i)
        fits = {t: [] for t in truths}  # per truth: (reference fit, variant fit) per study
        for j, (ref_j, var_j) in enumerate(studies):
            boot_seed = i if replications is None else i * len(studies) + j
            ref_fit = _fit(sim.group("ref", ref_j, r0_i, a_i, r0_obs, noise.B, c_mid), n_boot,
                           boot_seed)
            for name, (dA, b_ratio) in truths.items():
                if ref_fit[0] is None or not ref_fit[0].identified:
                    fits[name].append((ref_fit, ref_fit))  # decided by the reference
                    continue
                v = _fit(sim.group("var", var_j, r0_i, a_i, r0_obs, noise.B * b_ratio, c_mid,
                                   dA), n_boot, boot_seed)
                fits[name].append((ref_fit, v))
        for name in truths:
            out[name].append(_effect(*fits[name][0], margin) if replications is None
                             else _pooled_effect(fits[name], margin))
    return out


def _up_to(curve: CurveData, step: int | None, seeds: int | None = None) -> CurveData:
    """What a look sees of a group: its first ``seeds`` runs (all if None; the simulator draws
    seeds one after the other, so the first n runs are an n-seed group) with their evals at or
    before ``step`` (all if None)."""
    runs = curve.runs[:seeds] if seeds is not None else curve.runs
    if step is None:
        return CurveData(curve.label, list(runs))
    return CurveData(curve.label, [replace(r, steps=r.steps[r.steps <= step],
                                           compute=r.compute[r.steps <= step],
                                           y=r.y[r.steps <= step], stderr=r.stderr[r.steps <= step])
                                   for r in runs])


def two_look_cells(ref: Group, var: Group, noise: NoiseModel, look_at: int | None,
                   n_sweeps: int, seed: int, margin: float = DEFAULT_MARGIN, n_boot: int = 1000,
                   look_seeds: int | None = None
                   ) -> tuple[dict[str, list[str]], dict[str, float]]:
    """:func:`effect_cells` for the sequential rule (``rlablate sweep --halving-rule resolved``,
    analysis/halving.py): each simulated pair is first compared on its evals up to ``look_at``; a
    verdict in :data:`analysis.effects.RESOLVED` is the one reported, otherwise the pair goes on
    and its verdict is read at the end. Two chances to give a verdict are two chances to give a
    wrong one: the rows of :func:`effect_rows` on these cells are the rule's error rates.
    ``look_seeds``: the look sees only the first that many seeds of each arm (``look_at`` None:
    all their steps), the end all of them: a design that adds seeds to what a look leaves open
    (as a report's ``resolve_at`` suggests) looks twice too.

    The simulated runs are :func:`effect_cells`'s draw for draw (the same generator, consumed in
    the same order; a look only cuts the curves), so a pair not stopped at the look gets exactly
    the verdict :func:`effect_cells` gives it. Returns (verdicts per truth, the share of sweeps per
    truth stopped at the look)."""
    rng = np.random.default_rng([seed, ref.steps, var.steps, ref.every, var.every])
    sim = Simulator(noise, ref.n_items, ref.k, rng)
    c_mid = noise.mid_frac * ref.steps
    truths = _truths(noise, margin)
    out: dict[str, list[str]] = {t: [] for t in truths}
    early = {t: 0 for t in truths}
    for i in range(n_sweeps):
        r0_i, a_i = sim.items(noise.A, noise.R0)
        r0_obs = sim.r0(r0_i)
        ref_curve = sim.group("ref", ref, r0_i, a_i, r0_obs, noise.B, c_mid)
        ref_end = _fit(ref_curve, n_boot, i)
        ref_look = _fit(_up_to(ref_curve, look_at, look_seeds), n_boot, i)
        for name, (dA, b_ratio) in truths.items():
            if ref_end[0] is None or not ref_end[0].identified:  # as effect_cells: no variant drawn
                out[name].append(_effect(ref_end, ref_end, margin))
                continue
            v_curve = sim.group("var", var, r0_i, a_i, r0_obs, noise.B * b_ratio, c_mid, dA)
            first = _effect(ref_look, _fit(_up_to(v_curve, look_at, look_seeds), n_boot, i),
                            margin)
            if first in RESOLVED:
                early[name] += 1
                out[name].append(first)
            else:
                out[name].append(_effect(ref_end, _fit(v_curve, n_boot, i), margin))
    return out, {t: early[t] / n_sweeps for t in truths}


def _pooled_effect(fits, margin) -> str:
    """`rlablate combine`'s verdict on several studies' (reference, variant) fits."""
    rows = []
    for (f_r, b_r), (f_v, b_v) in fits:
        if f_r is None or f_v is None or not (f_r.identified and f_v.identified):
            return UNIDENTIFIED + " in some study"
        a_ci, b_ci = effect_intervals(b_v, b_r)
        if not np.all(np.isfinite([*a_ci, *b_ci])):
            return UNIDENTIFIED + " in some study"
        rows.append((f_v.A - f_r.A, *a_ci, f_v.B / f_r.B, *b_ci))
    return pool_effect(*np.array(rows).T, margin)["verdict"]


# ------------------------------------------------------------------------------------------------
# The table
# ------------------------------------------------------------------------------------------------
def _rate(verdicts: list[str], pred) -> tuple[int, int]:
    return sum(bool(pred(v)) for v in verdicts), len(verdicts)


def _row(verdict: str, setting: str, kind: str, truth: str, hits: int, n: int) -> dict:
    lo, hi = clopper_pearson(hits, n)
    return {"verdict": verdict, "setting": setting, "kind": kind, "truth": truth, "n_sweeps": n,
            "rate": hits / n if n else np.nan, "lo": lo, "hi": hi}


def _worst(verdict, setting, cells: dict[str, list[str]], false_truths, pred) -> dict:
    """The false-positive row: the truth (among ``false_truths``) with the highest rate."""
    rates = {t: _rate(cells[t], pred) for t in false_truths}
    t = max(rates, key=lambda x: rates[x][0])
    return _row(verdict, setting, "false positive", t, *rates[t])


def effect_rows(setting: str, cells: dict[str, list[str]]) -> list[dict]:
    def moved_a(v):
        return v.startswith("moved A")

    def only_b(v):
        return v == "only B"

    def no_effect(v):
        return v == "no effect"

    def no_effect_a(v):  # every verdict that says A did not move
        return v in ("no effect", "no effect on A", "only B")

    return [_worst("moved A", setting, cells, ("null", "B"), moved_a),
            _row("moved A", setting, "power", "A", *_rate(cells["A"], moved_a)),
            _worst("only B", setting, cells, ("null", "A", "edge"), only_b),
            _row("only B", setting, "power", "B", *_rate(cells["B"], only_b)),
            _worst("no effect", setting, cells, ("A", "B", "edge"), no_effect),
            _row("no effect", setting, "power", "null", *_rate(cells["null"], no_effect)),
            _worst("no effect on A", setting, cells, ("A", "edge"), no_effect_a),
            _row("no effect on A", setting, "power", "null", *_rate(cells["null"], no_effect_a))]


def calibrate(groups: list[Group], noise: NoiseModel | None = None, n_sweeps: int = 500,
              seed: int = 0, margin: float = DEFAULT_MARGIN, reference: str = REFERENCE,
              n_boot: int = 1000, progress=None,
              replications: tuple[int, ...] | None = None,
              look_at: int | None = None, look_seeds: int | None = None,
              effects: bool = True) -> pd.DataFrame:
    """The calibration table of a schedule (:func:`read_schedule`): one row per verdict, setting
    and kind (false positive / power) with the rate over ``n_sweeps`` simulated sweeps and its
    95% Clopper-Pearson interval. Settings are the distinct (reference, variant) schedules of the
    design-choice comparisons, then the claims.

    ``replications`` (seeds of each replication of the design, e.g. (4, 6, 6)) calibrates what
    `rlablate combine` says of them instead: the comparisons pooled by
    :func:`analysis.meta.pool_effect` (see :func:`effect_cells`), claim 3 from the pooled filter
    verdict, and claims 1, 2 and 4 over the union of the replications' runs (that is how combine
    decides them), i.e. with the replications' seeds added up.

    ``look_at`` (a step): the design-choice comparisons (and claim 3) under the sequential rule,
    a first look at that step and the end (:func:`two_look_cells`); the table's ``stopped_early``
    column gives the share of simulated pairs the look stopped, under the row's truth.
    ``look_seeds`` (a seed count): the look sees each arm's first that many seeds (at ``look_at``,
    or at the end); what is open there is read again with all the spec's seeds. ``effects``
    False: the seed claims 1, 2 and 4 only (``rlablate plan --claim-noise-from``)."""
    noise = noise or NoiseModel()
    looks = look_at is not None or look_seeds is not None
    if looks and replications is not None:
        raise ValueError("a look and replications: one at a time")
    if replications is not None:
        groups = [replace(g, seeds=sum(replications)) for g in groups]  # claims: the union
    by_scale: dict[str, dict[str, Group]] = {}
    for g in groups:
        by_scale.setdefault(g.scale, {})[g.variant] = g
    rows = []
    pairs: dict[tuple, list[str]] = {}
    filt: list[tuple] = []
    for scale, members in by_scale.items():
        ref = members.get(reference)
        if ref is None:
            continue
        for name, g in members.items():
            if name == reference:
                continue
            key = (ref.steps, ref.every, g.steps, g.every, ref.seeds, g.seeds, ref.n_items, ref.k)
            pairs.setdefault(key, []).append(f"{name} @ {scale}")
            if name.startswith(reference + "+group_filter"):
                filt.append(key)
    results = {}
    covered: dict[str, list[str]] = {}  # setting -> the comparisons ("variant @ scale") it covers
    for key, who in (pairs if effects else {}).items():
        r_steps, r_every, v_steps, v_every, r_seeds, v_seeds, n_items, k = key
        ref = Group(reference, "", r_steps, r_every, r_seeds, n_items, k)
        var = Group("variant", "", v_steps, v_every, v_seeds, n_items, k)
        t0 = time.perf_counter()
        early = None
        if looks:
            if look_at is not None and look_at >= min(r_steps, v_steps):
                raise ValueError(f"look_at {look_at}: not below {min(r_steps, v_steps)} steps")
            if look_seeds is not None and not 2 <= look_seeds < min(r_seeds, v_seeds):
                raise ValueError(f"look_seeds {look_seeds}: not in [2, {min(r_seeds, v_seeds)})")
            cells, early = two_look_cells(ref, var, noise, look_at, n_sweeps, seed, margin, n_boot,
                                          look_seeds)
        else:
            cells = effect_cells(ref, var, noise, n_sweeps, seed, margin, n_boot, replications)
        results[key] = cells
        seeds = (f"{r_seeds}+{v_seeds} seeds" if replications is None else
                 f"{len(replications)} replications pooled, seeds "
                 f"{'+'.join(map(str, replications))} an arm")
        setting = (f"{reference} {r_steps} steps/eval {r_every} vs {v_steps}/{v_every}, "
                   f"{seeds} ({len(who)} comparisons: "
                   f"{', '.join(who[:3])}{', ...' if len(who) > 3 else ''})")
        if early is not None:
            where = " with ".join(x for x in (look_at and f"step {look_at}",
                                              look_seeds and f"{look_seeds} seeds") if x)
            setting = f"looks at {where} and the end: {setting}"
        rows += [dict(r, stopped_early=early[r["truth"]]) if early is not None else r
                 for r in effect_rows(setting, cells)]
        covered[setting] = list(who)
        if progress:
            progress(f"effects {r_steps}/{r_every} vs {v_steps}/{v_every}: "
                     f"{time.perf_counter() - t0:.1f} s")
    # claim 3: the filter's verdicts (one per scale that has it, combined per sweep)
    if filt and effects:
        combined = {t: [claim3_verdict([results[key][t][i] for key in filt])
                        for i in range(n_sweeps)] for t in ("null", "A", "B", "edge")}
        s3 = "claim 3 (filter vs grpo: only B at every scale)"
        rows.append(_worst("claim 3 reproduces", s3, combined, ("null", "A", "edge"),
                           lambda v: v == "reproduces"))
        rows.append(_row("claim 3 reproduces", s3, "power", "B",
                         *_rate(combined["B"], lambda v: v == "reproduces")))
        # not "edge": there dA equals the margin, where "moved A" (|dA| >= margin), and with it
        # "does not reproduce", is true, as for the "moved A" rows
        rows.append(_worst("claim 3 does not reproduce", s3, combined, ("null", "B"),
                           lambda v: v == "does not reproduce"))
    rows += _claim_rows(by_scale, reference, noise, n_sweeps, seed, look_seeds, progress)
    table = pd.DataFrame(rows, columns=["verdict", "setting", "kind", "truth", "n_sweeps",
                                        "rate", "lo", "hi"]
                         + (["stopped_early"] if looks else []))
    fp = table["kind"] == "false positive"
    table["ok"] = np.where(fp, np.where(table["lo"] <= 0.05, "yes", "no"), "")
    table.attrs["members"] = covered
    return table


def _claim_rows(by_scale: dict[str, dict[str, Group]], reference: str, noise: NoiseModel,
                n_sweeps: int, seed: int, look_seeds: int | None, progress) -> list[dict]:
    """The calibration rows of seed claims 1, 2 and 4 (:func:`calibrate`)."""
    rows: list[dict] = []
    # claims 1 and 2: the (scale, seed) pairs of grpo and dr_grpo / clip-higher, common steps
    for claim, other in (("claim 1", "dr_grpo"), ("claim 2", reference + "+clip_high")):
        pairs12, steps = [], None
        for scale, members in by_scale.items():
            ref = members.get(reference)
            var = next((g for n, g in members.items() if n == other or n.startswith(other + "=")),
                       None)
            if ref and var:
                pairs12 += [(scale, s) for s in range(min(ref.seeds, var.seeds))]
                steps = min(steps or 10**9, ref.steps, var.steps)
        if not pairs12:
            continue
        t0 = time.perf_counter()
        claim_look = _claim_look(look_seeds, {s for _, s in pairs12}, claim)
        cells = claim12_cells(pairs12, steps, noise, n_sweeps, seed, claim, claim_look)
        s12 = _look_label(claim_look, f"{claim} ({len(pairs12)} paired runs, {steps} common steps)")
        rows += _with_stopped([
            _row(f"{claim} reproduces", s12, "false positive", "null",
                 *_rate(cells["null"], lambda v: v == "reproduces")),
            _row(f"{claim} reproduces", s12, "power", "alt",
                 *_rate(cells["alt"], lambda v: v == "reproduces")),
            _row(f"{claim} does not reproduce", s12, "false positive", "alt",
                 *_rate(cells["alt"], lambda v: v == "does not reproduce")),
            _row(f"{claim} no effect", s12, "false positive", "alt",
                 *_rate(cells["alt"], lambda v: v.startswith("no effect"))),
            _row(f"{claim} no effect", s12, "power", "null",
                 *_rate(cells["null"], lambda v: v.startswith("no effect")))], cells)
        if progress:
            progress(f"{claim}: {time.perf_counter() - t0:.1f} s")
    # claim 4: the presets (no ablations) at every scale
    presets = {scale: sorted(n for n in members if "+" not in n)
               for scale, members in by_scale.items()}
    presets = {s: p for s, p in presets.items() if len(p) > 2}
    if presets:
        g0 = next(iter(by_scale[next(iter(presets))].values()))
        t0 = time.perf_counter()
        claim_look = _claim_look(look_seeds, set(range(g0.seeds)), "claim 4")
        cells = claim4_cells(presets, g0.seeds, noise, g0.n_items, g0.k, n_sweeps, seed,
                             claim_look)
        n_alg = max(len(p) for p in presets.values())
        s4 = _look_label(claim_look,
                         f"claim 4 ({n_alg} presets x {len(presets)} scales x {g0.seeds} seeds)")
        rows += _with_stopped([
            _worst("claim 4 reproduces", s4, cells, ("null", "zero"),
                   lambda v: v == "reproduces"),
            _row("claim 4 reproduces", s4, "power", "alt",
                 *_rate(cells["alt"], lambda v: v == "reproduces")),
            _worst("claim 4 does not reproduce", s4, cells, ("null", "zero", "alt"),
                   lambda v: v == "does not reproduce")], cells)
        if progress:
            progress(f"claim 4: {time.perf_counter() - t0:.1f} s")
    return rows


def _claim_look(look_seeds: int | None, seeds: set[int], claim: str) -> int | None:
    """The seed look a claim's cells take: ``look_seeds`` where the claim's runs have more seeds
    than that, None (one look) where they have no more (a claim cannot look at seeds it lacks)."""
    if look_seeds is None or len(seeds) <= look_seeds:
        return None
    if look_seeds < 2:
        raise ValueError(f"look_seeds {look_seeds}: {claim} needs at least 2 seeds at its look")
    return look_seeds


def _look_label(look_seeds: int | None, setting: str) -> str:
    return setting if look_seeds is None else f"looks at {look_seeds} seeds and all: {setting}"


def _with_stopped(rows: list[dict], cells: dict) -> list[dict]:
    """Claim rows with the share of simulated sweeps a seed look decided under each row's
    truth (``stopped_early``), where the cells took one."""
    stopped = cells.get("stopped")
    return rows if stopped is None else [dict(r, stopped_early=stopped[r["truth"]]) for r in rows]


TRUTHS = {
    "null": "nothing differs", "A": "dA = effect_A", "B": "B x effect_B",
    "edge": "dA = margin (the edge of 'no effect')", "alt": "the claim holds",
    "zero": "no algorithm differs",
}


def describe(noise: NoiseModel, margin: float) -> str:
    """One paragraph of the truths and noise behind a calibration table."""
    return (f"Simulated with R0 {noise.R0:.3f}, A {noise.A}, B {noise.B}, C_mid at "
            f"{noise.mid_frac:g} x the reference's steps; seed sd of A {noise.seed_sd_A:.4g}, "
            f"of log B {noise.seed_sd_logB:.4g}; binomial item noise (item spread {noise.item_spread:.4g}); "
            + (f"within-run wobble sd {noise.wobble_sd:.4f} (AR(1), correlation "
               f"{noise.wobble_rho_step:.3f} per step). " if noise.wobble_sd > 0
               else "no within-run wobble. ")
            + (f"Run-aways: a run runs away with probability {noise.runaway_p:g}, moving its "
               f"ceiling by {noise.runaway_dA:+g} (in every arm alike). " if noise.runaway_p > 0
               else "")
            + f"Alternatives: dA = {noise.effect_A}, B ratio {noise.effect_B}, 'no effect' edge "
            f"dA = {margin} (equivalence margins +-{margin} on A, x{B_MARGIN} on B); claim 1: "
            f"incorrect responses of {noise.len_level:.3g} tokens, GRPO grows "
            f"{noise.len_growth:.3g}, Dr. GRPO 0 (null: both grow), per-run sd of the growth "
            f"{noise.len_seed_sd:.3g} each arm + {noise.len_shared_sd:.3g} shared by paired runs, "
            f"per-step sd {noise.len_step_sd:.3g}; claim 2: entropy {noise.entropy_level:.3g} "
            f"nats, clip-higher +{noise.entropy_effect:.3g} (null: +0), per-run sd "
            f"{noise.entropy_seed_sd:.3g} each arm + {noise.entropy_shared_sd:.3g} shared, "
            f"per-step sd {noise.entropy_step_sd:.3g}; claim 4: spreads {noise.spread:.3g}/"
            f"{noise.spread:.3g} (null) and {noise.spread:.3g}/{noise.spread_alt_held_out:.3g} "
            "(alternative), a run's gain around its algorithm's "
            + (f"sd {noise.gain_sd_in_dist:.3g} in-distribution and {noise.gain_sd_held_out:.3g} "
               "held out (measured)" if noise.gain_sd_in_dist > 0 and noise.gain_sd_held_out > 0
               else f"sd {noise.gain_seed_sd:.3g} plus binomial eval noise")
            + ". A false "
            "positive row gives the truth (where the verdict is false) with the highest rate; "
            "ok = the rate's 95% interval reaches down to 5% or below.")


def with_overrides(noise: NoiseModel, **kw) -> NoiseModel:
    return replace(noise, **{k: v for k, v in kw.items() if v is not None})
