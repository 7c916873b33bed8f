"""Successive halving on fitted curves: after a rung, stop the arms that cannot win.

A sweep run with ``rlablate sweep SPEC --halving 60,120`` trains every run to the first rung (60
steps), stops, and asks :func:`decide` which arms go on: every arm (a variant at a scale, pooled
over its seeds) is fitted with the ScaleRL curve on the evals up to the rung, with the report's
bootstrap; the *leader* is the arm whose A interval has the highest lower bound; an arm is stopped
when the upper bound of its A interval lies below the leader's lower bound. The survivors go on to
the next rung, and after the last one to the end of their runs: the budget the stopped arms did not
use is what halving saves. This is the confidence-bound elimination of successive halving /
Hyperband (Jamieson & Talwalkar 2016, arXiv 1502.07943; Li et al. 2017, arXiv 1603.06560) with the
fitted curve as the learning-curve model, which none of verl, TRL or OpenRLHF offers.

Honest by construction: an arm whose fit is not identified (analysis.fit: A would be an
extrapolation) is never stopped, and the leader must itself be identified; so early rungs on slow
curves stop nothing. A stopped run is only paused (checkpointed): ``rlablate sweep SPEC`` without
``--halving`` resumes it, which is how a full sweep is recovered to check a halved ranking
(:func:`ranking_agreement`, Kendall tau).

A second rule, ``resolved`` (``--halving-rule resolved``): a sequential design with interim looks.
At each rung every variant is compared with the reference arm as the report does
(:func:`analysis.effects.choice_effects`: paired bootstrap, the margin on A); a variant whose verdict
is already resolved (*moved A*, *only B*, *no effect*, *no effect on A*) stops, and its verdict is
the one read at the rung; an open one (*not resolved*, a fit not identified, *moved B, A not
resolved*) goes on, and the reference goes on while any comparison against it is open. This spends
steps where the curves have not bent yet, which more seeds would not fix (LOG session 24:
check-cispo-steps). Two looks are two chances to be wrong: ``rlablate calibrate --look-at STEP``
simulates the rule's false-positive rates (:func:`analysis.calibrate.two_look_cells`).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from analysis.fit import FitError, FitWindow
from analysis.groups import detect_axes, fit_all
from analysis.load import Results, load_results
from analysis.effects import RESOLVED

COLUMNS = ["scale", "arm", "n_runs", "A", "A_lo", "A_hi", "identified", "decision", "verdict",
           "dA_lo", "dA_hi", "planned_width", "reason", "run_ids"]
RULES = ("bound", "resolved")


def decide(fits, eval_set: str = "in_dist") -> pd.DataFrame:
    """One row per arm and scale: its A interval and ``continue`` or ``stop`` with the reason."""
    rows = []
    groups = [g for g in fits if g.level == "group" and g.eval_set == eval_set]
    for scale in sorted({g.scale for g in groups}):
        arms = [g for g in groups if g.scale == scale]
        info = {}
        for g in arms:
            ok = g.fit is not None and g.fit.identified and g.boot is not None
            lo, hi = g.boot.ci("A") if ok else (np.nan, np.nan)
            info[g.variant] = (g, ok and np.isfinite(lo), lo, hi)
        known = {v: x for v, x in info.items() if x[1]}
        leader = max(known, key=lambda v: known[v][2]) if known else None
        lead_lo = known[leader][2] if leader else np.nan
        for v, (g, ok, lo, hi) in sorted(info.items()):
            if not ok:
                decision, reason = "continue", ("fit not identified: " + (
                    g.fit.message if g.fit is not None else (g.error or "no fit")))
            elif v == leader:
                decision, reason = "continue", "leader (highest lower bound of A)"
            elif hi < lead_lo:
                decision, reason = "stop", (f"A upper bound {hi:.3f} < leader {leader}'s lower "
                                            f"bound {lead_lo:.3f}")
            else:
                decision, reason = "continue", (f"A interval reaches the leader's ({hi:.3f} >= "
                                                f"{lead_lo:.3f})")
            rows.append({"scale": scale, "arm": v, "n_runs": g.curve.n_runs,
                         "A": g.fit.A if g.fit is not None else np.nan, "A_lo": lo, "A_hi": hi,
                         "identified": bool(ok), "decision": decision, "verdict": "",
                         "dA_lo": np.nan, "dA_hi": np.nan, "planned_width": np.nan,
                         "reason": reason, "run_ids": list(g.run_ids)})
    return pd.DataFrame(rows, columns=COLUMNS)


def restrict(results: Results, run_ids: set[str] | None, max_step: int) -> Results:
    """The runs ``run_ids`` (all when None) and their eval and train rows at or before
    ``max_step``."""
    keep = results.runs["run_id"].isin(run_ids) if run_ids is not None else slice(None)
    runs = results.runs[keep].reset_index(drop=True)
    ev = results.evals
    ev = ev[ev["run_id"].isin(runs["run_id"]) & (ev["step"] <= max_step)].reset_index(drop=True)
    tr = results.train
    tr = tr[tr["run_id"].isin(runs["run_id"]) & (tr["step"] <= max_step)].reset_index(drop=True)
    return Results(evals=ev, runs=runs, issues=results.issues,
                   config_columns=results.config_columns, root=results.root, train=tr,
                   shared_settings=results.shared_settings)


def decide_from_dir(sweep_dir, rung: int, eval_set: str = "in_dist",
                    run_ids: list[str] | None = None, n_boot: int = 400, seed: int = 0,
                    by: list[str] | None = None, rule: str = "bound", reference: str = "grpo",
                    margin: float = 0.02, plan_sweeps: int = 0) -> pd.DataFrame:
    """:func:`decide_at` on a sweep directory's runs (``run_ids``), with their evals up to
    ``rung``; ``plan_sweeps``: plan the open comparisons' end (:func:`plan_at_look`) at each
    run's ``train.steps``."""
    results = load_results(sweep_dir)
    if results.runs.empty:
        raise FileNotFoundError(f"no runs of this sweep under {sweep_dir}")
    return decide_at(results, rung, set(run_ids) if run_ids else None, eval_set, n_boot, seed, by,
                     rule, reference, margin, plan_sweeps=plan_sweeps, total=_total_steps(results))


def _total_steps(results: Results, up_to_step: int | None = None) -> dict[str, int]:
    """run_id -> the step its run ends at: its ``train.steps`` (else its last eval), at most
    ``up_to_step``."""
    last = results.evals.groupby("run_id")["step"].max().to_dict()
    steps = (results.runs.set_index("run_id")["train.steps"].to_dict()
             if "train.steps" in results.runs.columns else last)
    return {rid: min(int(steps.get(rid, last.get(rid, 0))), up_to_step or np.inf)
            for rid in results.runs["run_id"]}


def decide_resolved(fits, runs: pd.DataFrame, eval_set: str = "in_dist",
                    reference: str = "grpo", margin: float = 0.02) -> pd.DataFrame:
    """The ``resolved`` rule (module docstring): one row per arm and scale, ``stop`` for a variant
    whose verdict against ``reference`` is in :data:`RESOLVED`, ``continue`` for an open one; the
    reference continues while any comparison against it at its scale is open. A variant's row
    carries its verdict against the reference in ``verdict`` (*not resolved* while no fit can be
    compared) and the dA interval in ``reason``; the reference's row and arms at a scale without
    the reference have no verdict ("") and go on."""
    from analysis.effects import choice_effects
    effects = choice_effects(fits, runs, eval_set, reference, margin)
    verdicts = {(r["variant"], r["scale"]): r for r in effects.to_dict("records")}
    groups = [g for g in fits if g.level == "group" and g.eval_set == eval_set]
    rows = []
    for scale in sorted({g.scale for g in groups}):
        arms = {g.variant: g for g in groups if g.scale == scale}
        open_ = [v for v in arms if v != reference and (
            (v, scale) not in verdicts or verdicts[(v, scale)]["verdict"] not in RESOLVED)]
        for v, g in sorted(arms.items()):
            ok = g.fit is not None and g.fit.identified and g.boot is not None
            lo, hi = g.boot.ci("A") if ok else (np.nan, np.nan)
            rec = verdicts.get((v, scale))
            verdict = ""
            if v == reference:
                decision = "continue" if open_ else "stop"
                reason = (f"reference: {len(open_)} comparison(s) still open ({', '.join(open_)})"
                          if open_ else "reference: every comparison against it is resolved")
            elif reference not in arms:
                decision, reason = "continue", f"no {reference} at this scale to compare with"
            elif rec is None:  # a fit refused (too few points, no gain yet): nothing to compare
                bad = g if g.fit is None else arms[reference]
                decision, verdict, reason = "continue", "not resolved", (f"not resolved vs {reference}: no fit of "
                                                f"{bad.variant} yet ({bad.error or 'no fit'})")
            else:
                verdict = rec["verdict"]
                decision = "stop" if verdict in RESOLVED else "continue"
                reason = (f"{rec['verdict']} vs {reference}: dA {rec['dA']:+.3f} "
                          f"[{rec['dA_lo']:+.3f}, {rec['dA_hi']:+.3f}]"
                          if np.isfinite(rec["dA_lo"]) else f"{rec['verdict']} vs {reference}")
            rows.append({"scale": scale, "arm": v, "n_runs": g.curve.n_runs,
                         "A": g.fit.A if g.fit is not None else np.nan, "A_lo": lo, "A_hi": hi,
                         "identified": bool(ok and np.isfinite(lo)), "decision": decision,
                         "verdict": verdict,
                         "dA_lo": rec["dA_lo"] if rec is not None else np.nan,
                         "dA_hi": rec["dA_hi"] if rec is not None else np.nan,
                         "planned_width": np.nan, "reason": reason, "run_ids": list(g.run_ids)})
    return pd.DataFrame(rows, columns=COLUMNS)


def decide_at(results: Results, rung: int, run_ids: set[str] | None, eval_set: str = "in_dist",
              n_boot: int = 400, seed: int = 0, by: list[str] | None = None,
              rule: str = "bound", reference: str = "grpo", margin: float = 0.02,
              window: FitWindow | None = None, plan_sweeps: int = 0,
              total: dict[str, int] | None = None) -> pd.DataFrame:
    """:func:`decide` (``rule`` "bound") or :func:`decide_resolved` ("resolved") on loaded
    ``results``: the runs ``run_ids`` (all when None), each arm fitted on its evals up to
    ``rung`` in ``window`` (the report's fit window; default :class:`FitWindow`). With the
    resolved rule and ``plan_sweeps`` > 0, :func:`plan_at_look` fills ``planned_width`` for the
    comparisons that go on (``total``: run_id -> the step its run ends at)."""
    if rule not in RULES:
        raise ValueError(f"halving rule {rule!r}: allowed {', '.join(RULES)}")
    sub = restrict(results, run_ids, rung)
    axes = detect_axes(sub, by)
    fits = fit_all(sub, axes, window=window or FitWindow(), n_boot=n_boot, seed=seed, per_run=False)
    if rule == "resolved":
        from analysis.groups import assign_groups
        runs = assign_groups(sub, axes)
        table = decide_resolved(fits, runs, eval_set, reference, margin)
        return (plan_at_look(sub, runs, table, total or {}, reference, eval_set, plan_sweeps,
                             seed, margin) if plan_sweeps > 0 else table)
    return decide(fits, eval_set)


def plan_at_look(sub: Results, runs: pd.DataFrame, table: pd.DataFrame, total: dict[str, int],
                 reference: str = "grpo", eval_set: str = "in_dist", n_sweeps: int = 40,
                 seed: int = 0, margin: float = 0.02) -> pd.DataFrame:
    """``table`` with ``planned_width`` filled for every comparison a look leaves open: the
    planner's median 95% dA width at the end of the runs (``total``: run_id -> its last step),
    simulated from what the look saw (``sub``: the runs cut at the rung; ``runs``: their
    ``assign_groups`` rows), each arm with its own seed and within-run noise so far
    (analysis.plan: ``pilot_from_results(per_variant=True)``, ``predict``); NaN where the
    reference has no fit yet. The report prints it beside the width the end achieved: at the
    look, the tool says what going on will resolve.
    Checked after the fact on study-m4-800 (LOG session 26): achieved / planned 0.84, 0.98 and
    0.41, against 4.6, 3.9 and 1.8 planned from a GRPO-alone pilot."""
    go_on = table[(table["decision"] == "continue") & (table["verdict"] != "")]
    if go_on.empty or n_sweeps <= 0:
        return table
    from dataclasses import replace

    from analysis.plan import pilot_from_results, predict
    from analysis.schedule import schedule_from_results
    want = {(str(a), str(s)) for a, s in zip(go_on["arm"], go_on["scale"])}
    want |= {(reference, str(s)) for s in go_on["scale"]}
    ends = {(str(v), str(s)): max(int(total.get(r, 0)) for r in g["run_id"])
            for (v, s), g in runs.groupby(["variant", "scale_value"])}
    groups = [replace(g, steps=max(ends.get((g.variant, g.scale), 0), g.steps))
              for g in schedule_from_results(runs, sub.evals, eval_set)
              if (g.variant, g.scale) in want]
    try:
        pilot = pilot_from_results(sub, reference, eval_set, per_variant=True)
    except (ValueError, FitError):  # no fitted reference yet (no gain to fit): nothing to plan
        return table
    pred = predict(groups, pilot, n_sweeps, seed, margin, reference)
    width = {(str(r["variant"]), str(r["scale"])): float(r["dA_width"])
             for r in pred.to_dict("records")}
    out = table.copy()
    out["planned_width"] = [width.get((str(a), str(s)), np.nan) if (str(a), str(s)) in want
                            and a != reference else np.nan
                            for a, s in zip(out["arm"], out["scale"])]
    return out


def compute_saved(decisions: list[tuple[int, pd.DataFrame]], total_steps: dict[str, int]) -> float:
    """Fraction of the full sweep's train steps the stopped runs did not use. ``decisions``:
    (rung, table) per rung; ``total_steps``: run_id -> its train.steps."""
    full = float(sum(total_steps.values()))
    saved = 0.0
    for rung, table in decisions:
        for rec in table[table["decision"] == "stop"].to_dict("records"):
            saved += sum(max(total_steps.get(r, rung) - rung, 0) for r in rec["run_ids"])
    return saved / full if full else float("nan")


def ranking_agreement(full: dict[str, float], halved: dict[str, float]) -> dict:
    """Kendall tau between the full sweep's ranking (arm -> A, or final pass rate) and the halved
    one's, over the arms both have; and whether both put the same arm first."""
    arms = sorted(set(full) & set(halved))
    if len(arms) < 2:
        return {"n_arms": len(arms), "kendall_tau": np.nan, "p": np.nan, "same_best": None}
    a = [full[x] for x in arms]
    b = [halved[x] for x in arms]
    tau, p = stats.kendalltau(a, b)
    return {"n_arms": len(arms), "kendall_tau": float(tau), "p": float(p),
            "same_best": max(full, key=full.get) == max(halved, key=halved.get)}


def _arm_values(results: Results, axes, eval_set: str, max_step: float = np.inf) -> dict:
    """(scale, arm) -> the arm's mean pass rate over its runs at each run's last eval at or
    before ``max_step`` (the quantity both rankings of :func:`replay` order arms by)."""
    from analysis.groups import assign_groups
    runs = assign_groups(results, axes)
    ev = results.evals[(results.evals["eval_set"] == eval_set) & (results.evals["step"] <= max_step)]
    ev = ev.merge(runs[["run_id", "variant", "scale_value"]], on="run_id")
    last = ev.sort_values("step").groupby("run_id").tail(1)
    return {(s, v): float(g["pass_rate"].mean())
            for (s, v), g in last.groupby(["scale_value", "variant"])}


def _verdicts(table: pd.DataFrame) -> dict:
    """(scale, arm) -> the verdict of each compared variant in a ``resolved`` decision table."""
    return {(r["scale"], r["arm"]): r["verdict"] for r in table.to_dict("records") if r["verdict"]}


def replay(sweep_dir, rungs: list[int], eval_set: str = "in_dist", n_boot: int = 400,
           seed: int = 0, by: list[str] | None = None, rule: str = "bound",
           reference: str = "grpo", margin: float = 0.02, window: FitWindow | None = None,
           up_to_step: int | None = None, plan_sweeps: int = 0) -> dict:
    """What ``--halving RUNGS`` would have decided on a *finished* sweep, and what it would have
    cost in ranking. A run paused at a rung and resumed is bit-identical to one never paused
    (tests/test_halving.py), so each rung's decision on the full runs' evals up to the rung is the
    decision a live halved sweep makes; the full sweep is then the check of its ranking.

    Returns the per-rung tables (as records), ``train_steps_saved_frac`` (:func:`compute_saved`),
    and per scale the Kendall tau between the full ranking (every arm by its final pass rate) and
    the halved one (the survivors by their final pass rate, above the arms stopped at the last
    rung, above those stopped earlier; a stopped arm ordered by its pass rate at its rung), with
    whether both put the same arm first. That ranking prices the bound rule, which stops losers;
    the resolved rule stops what is answered, winners included, so for it ``ranking_A`` ranks
    by A instead: every arm's A at the end against its A as the sequential design read it (at
    the rung where it stopped, else at the end; arms whose fit gives no A left out).

    With ``rule`` "resolved" it also returns ``verdicts``: per comparison, the verdict the
    sequential design reports (read at the rung where it stopped, else at the end) beside the
    verdict of the full sweep, and whether they agree; with ``plan_sweeps`` > 0 also the dA width
    each open comparison was planned to reach at the end (:func:`plan_at_look`, at the last rung
    it went on from) beside the width the end achieved. ``up_to_step``: the sweep as it stood at
    that step (``rlablate analyze --up-to-step``) is the full sweep; every run ends there."""
    results = load_results(sweep_dir, up_to_step=up_to_step)
    if results.runs.empty:
        raise FileNotFoundError(f"no runs of this sweep under {sweep_dir}")
    axes = detect_axes(results, by)
    total = _total_steps(results, up_to_step)
    live, decisions, stopped_at = set(total), [], {}
    for i, rung in enumerate(rungs):
        table = decide_at(results, rung, live, eval_set, n_boot, seed, by, rule, reference,
                          margin, window, plan_sweeps=plan_sweeps, total=total)
        decisions.append((rung, table))
        for rec in table[table["decision"] == "stop"].to_dict("records"):
            stopped_at[(rec["scale"], rec["arm"])] = (i, rung)
            live -= set(rec["run_ids"])
    full = _arm_values(results, axes, eval_set)
    at_rung = {r: _arm_values(results, axes, eval_set, r) for r in rungs}
    ranks = {}
    for scale in sorted({s for s, _ in full}):
        arms = {v: x for (s, v), x in full.items() if s == scale}
        halved = {}
        for v, final in arms.items():
            if (scale, v) in stopped_at:
                i, rung = stopped_at[(scale, v)]
                halved[v] = (i, at_rung[rung][(scale, v)])
            else:
                halved[v] = (len(rungs), final)
        order = sorted(halved, key=lambda v: halved[v])
        ranks[scale] = ranking_agreement(arms, {v: float(order.index(v)) for v in order})
    out = {"rungs": list(rungs), "eval_set": eval_set, "rule": rule,
           "steps": [{"rung": r, "decisions": t.to_dict("records")} for r, t in decisions],
           "stopped": {f"{v} @ {s}": r for (s, v), (_, r) in stopped_at.items()},
           "train_steps_saved_frac": compute_saved(decisions, total), "ranking": ranks}
    if rule == "resolved":
        end = decide_at(results, int(max(total.values())), None, eval_set, n_boot, seed, by,
                        rule, reference, margin, window)
        at_end = _verdicts(end)
        read = {k: v for rung, t in decisions for k, v in _verdicts(t).items()
                if k in stopped_at and stopped_at[k][1] == rung}
        end_rows = end.to_dict("records")
        width = {(r["scale"], r["arm"]): r["dA_hi"] - r["dA_lo"] for r in end_rows}
        planned = {(r["scale"], r["arm"]): (rung, r["planned_width"]) for rung, t in decisions
                   for r in t.to_dict("records") if np.isfinite(r["planned_width"])}
        a_end = {(r["scale"], r["arm"]): r["A"] for r in end_rows}
        a_read = dict(a_end) | {(r["scale"], r["arm"]): r["A"] for rung, t in decisions
                                for r in t.to_dict("records")
                                if stopped_at.get((r["scale"], r["arm"]), (0, None))[1] == rung}
        out["ranking_A"] = {
            scale: ranking_agreement(*({v: x for (s, v), x in a.items() if s == scale and x == x}
                                       for a in (a_end, a_read)))
            for scale in sorted({s for s, _ in a_end})}
        out["verdicts"] = [{"scale": s, "arm": v, "sequential": read.get((s, v), full),
                            "read_at": stopped_at[(s, v)][1] if (s, v) in read else "end",
                            "full": full, "agree": read.get((s, v), full) == full,
                            "width_at_end": width.get((s, v), np.nan),
                            "planned_at": planned.get((s, v), ("", np.nan))[0],
                            "planned_width": planned.get((s, v), ("", np.nan))[1],
                            "ratio": width.get((s, v), np.nan)
                            / planned.get((s, v), ("", np.nan))[1]}
                           for (s, v), full in sorted(at_end.items())]
    return out


def halving_table(root, opt, eval_set: str, say=lambda msg: None) -> pd.DataFrame:
    """The report's halving table: :func:`replay` when ``opt.halving_replay`` gives rungs (the
    ``resolved`` rule with the report's own bootstrap size, so its looks are the report's
    verdicts; ``bound`` at most 400 replicates; the report's fit window, ``--fit-start`` and
    ``--fit-start-step``), else the record of a live ``rlablate sweep
    --halving`` (``<root>/halving.json``) when there is one, else an empty frame."""
    if opt.halving_replay:
        say(f"replaying successive halving ({opt.halving_rule}) at steps {opt.halving_replay}")
        n_boot = opt.n_boot if opt.halving_rule == "resolved" else min(opt.n_boot, 400)
        window = FitWindow(start_fraction=opt.fit_start, start_step=opt.fit_start_step)
        return replay_frame(replay(root, opt.halving_replay, eval_set, n_boot, opt.seed, opt.by,
                                   opt.halving_rule, opt.reference, opt.margin, window,
                                   opt.up_to_step, plan_sweeps=opt.plan))
    path = Path(root) / "halving.json"
    if not path.is_file():
        return pd.DataFrame()
    record = json.loads(path.read_text())
    if record.get("rule") == "resolved":  # the verdict of record: read where each arm stopped
        last = {(d["scale"], d["arm"]): (step["rung"], d["verdict"], d["decision"] == "stop",
                                         d.get("planned_width"))
                for step in record["steps"] for d in step["decisions"] if d.get("verdict")}
        record["verdicts"] = [{"scale": s, "arm": a, "sequential": v if stop else "(at the end)",
                               "read_at": rung if stop else "end",
                               **({"planned_width": w} if w is not None and w == w else {})}
                              for (s, a), (rung, v, stop, w) in sorted(last.items())]
    return replay_frame(record, as_run=True)


def replay_frame(record: dict, as_run: bool = False) -> pd.DataFrame:
    """:func:`replay`'s decisions as one table (a row per rung, scale and arm); the saved
    fraction and the rankings ride in ``attrs``."""
    rows = [{"rung": step["rung"], **{k: v for k, v in d.items() if k != "run_ids"}}
            for step in record["steps"] for d in step["decisions"]]
    df = pd.DataFrame(rows, columns=["rung"] + [c for c in COLUMNS if c != "run_ids"])
    df.attrs.update(saved=record["train_steps_saved_frac"], ranking=record.get("ranking", {}),
                    ranking_A=record.get("ranking_A", {}),
                    rungs=record["rungs"], rule=record.get("rule", "bound"),
                    verdicts=record.get("verdicts", []), as_run=as_run)
    return df


def halving_section(r, table: pd.DataFrame) -> None:
    """The report's section on a replayed successive halving (``analyze --halving-replay``)."""
    resolved = table.attrs.get("rule") == "resolved"
    how = "as run (halving.json)" if table.attrs.get("as_run") else "replayed on this sweep"
    r.h(f"Sequential looks (stop what is resolved), {how}" if resolved
        else f"Successive halving, {how}")
    stops = table[table["decision"] == "stop"]
    rule = ("compared with the reference as the design-choice table does and stopped once its "
            "verdict is resolved (the reference goes on while a comparison is open; "
            "`rlablate sweep --halving-rule resolved`; two looks are two chances to err: "
            "`rlablate calibrate --look-at STEP` gives the rule's false-positive rates)"
            if resolved else "stopped when its A upper bound lies below the leader's lower bound")
    r.p(f"Rungs {', '.join(map(str, table.attrs['rungs']))}: at each rung every arm is fitted on "
        f"its evals up to the rung and {rule} (analysis/halving.py; a paused run resumes "
        f"bit-identical, so these are the decisions `rlablate sweep --halving` makes). "
        f"{len(stops)} arm(s) stopped; {table.attrs['saved']:.1%} of the sweep's train steps "
        f"saved.")
    verdicts = table.attrs.get("verdicts") or []
    if verdicts and table.attrs.get("as_run"):
        r.p("The verdict of record for an arm stopped at a rung is the one read there (below); the "
            "design-choice table above fits each arm on all its evals, so for a stopped arm it "
            "compares its rung with the reference's longer run, which is not what the rule "
            "decided on.")
        r.table(pd.DataFrame(verdicts))
    elif verdicts:
        agree = sum(v["agree"] for v in verdicts)
        r.p(f"The verdict each comparison gets (read at the rung where it stopped, else at the "
            f"end) against the full sweep's: {agree} of {len(verdicts)} agree.")
        planned = [v for v in verdicts if np.isfinite(v.get("planned_width", np.nan))]
        if planned:
            near = sum(1 / 1.5 <= v["ratio"] <= 1.5 for v in planned)
            r.p(f"`planned_width`: the 95% dA width the planner gave each comparison left open, at "
                f"the look it went on from, for the end of the runs: simulated from the runs as "
                f"they stood at the look, each arm with its own seed and within-run noise so far "
                f"(`rlablate plan --pilot-up-to-step --per-variant-noise`). `ratio` = the width "
                f"the end achieved / planned: {near} of {len(planned)} within a factor 1.5.")
        r.table(pd.DataFrame(verdicts))
    for scale, rk in table.attrs.get("ranking_A", {}).items():
        tau = rk["kendall_tau"]
        r.p(f"{scale}: ranking by A, every arm run to the end against the sequential design (each "
            f"arm's A read where its verdict was read): Kendall tau = {tau:.2f} over "
            f"{rk['n_arms']} arms; same best arm: {rk['same_best']}. (Ranking by final pass rate "
            f"would price stopping as losing, which this rule does not do.)"
            if tau == tau else f"{scale}: fewer than 2 arms with an A, no ranking to compare.")
    for scale, rk in ({} if resolved else table.attrs["ranking"]).items():
        tau = rk.get("kendall_tau")
        r.p(f"{scale}: Kendall tau between the full ranking (final pass rate) and the halved one "
            f"= {tau:.2f} over {rk['n_arms']} arms; same best arm: {rk['same_best']}."
            if tau == tau else f"{scale}: fewer than 2 arms, no ranking to compare.")
    r.table(table)
