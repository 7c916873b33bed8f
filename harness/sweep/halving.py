"""Successive halving of a sweep: every run to a rung, stop the arms that cannot win, go on.

    rlablate sweep sweeps/x.yaml --halving 60,120     # rungs at steps 60 and 120, then the end

With ``--halving-rule resolved`` (``--halving-reference``, ``--halving-margin``) a variant stops
once its verdict against the reference is resolved and the reference goes on while any is open
(analysis/halving.py says why and what it costs in false positives).

At each rung every live run trains to that step and pauses (a checkpoint and status
`interrupted`, stop_reason `paused`: `train(pause_at=...)`); `analysis.halving.decide` fits each
arm on the evals so far and stops the arms whose A upper bound lies below the leader's lower
bound; the survivors go on (under the resolved rule each comparison left open also gets the dA
width the planner expects at the end, from each arm's own noise so far). The decisions, the
compute saved and the arms left are written to
<sweep>/halving.json. A stopped run is only paused, so `rlablate sweep SPEC` without --halving
finishes it (the full sweep, to check the halved ranking against). The executor must wait for its
runs (local, debug, or slurm with --wait).
"""
from __future__ import annotations

import json
import time
from typing import Callable

from .expand import Run, sweep_dir
from .launch import launch
from .spec import Spec, SpecError

#: simulated sweeps per open comparison when the resolved rule plans the end at a rung
#: (analysis.halving.plan_at_look; the report's planner default)
PLAN_SWEEPS = 40


def parse_rungs(text: str, runs: list[Run]) -> list[int]:
    """'60,120' -> [60, 120]: increasing, positive, below every run's train.steps."""
    try:
        rungs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(f"--halving = {text!r}: comma-separated steps, e.g. 60,120") from None
    shortest = min(r.cfg.train.steps for r in runs)
    if not rungs or rungs != sorted(set(rungs)) or rungs[0] < 1 or rungs[-1] >= shortest:
        raise SpecError(f"--halving = {text!r}: increasing steps in [1, {shortest - 1}] (the "
                        f"shortest run has train.steps = {shortest})")
    return rungs


def halving_rule(args, runs: list[Run]) -> dict:
    """The keyword arguments of :func:`successive_halving` for ``--halving-rule``,
    ``--halving-reference`` and ``--halving-margin``; a SpecError (one line, exit 2) when one is
    given without what it needs, or names a reference no run has."""
    given = [f for f, v in (("--halving-rule", args.halving_rule),
                            ("--halving-reference", args.halving_reference),
                            ("--halving-margin", args.halving_margin)) if v is not None]
    if given and not args.halving:
        raise SpecError(f"{given[0]}: has no effect without --halving STEP[,STEP...]")
    rule = args.halving_rule or "bound"
    if rule == "bound":
        if len(given) > (args.halving_rule is not None):
            raise SpecError(f"{given[-1]}: only with --halving-rule resolved")
        return {}
    reference = args.halving_reference or "grpo"
    presets = sorted({r.cfg.algo.preset for r in runs})
    if reference not in presets:
        raise SpecError(f"--halving-reference = {reference!r}: not an algo.preset of this sweep "
                        f"(allowed: {', '.join(presets)})")
    margin = 0.02 if args.halving_margin is None else args.halving_margin
    if not 0 < margin < 1:
        raise SpecError(f"--halving-margin = {margin}: must lie in (0, 1)")
    return {"rule": rule, "reference": reference, "margin": margin}


def successive_halving(spec: Spec, runs: list[Run], executor: str, rungs: list[int],
                       parallel: int = 0, out: Callable[[str], None] = print,
                       show_progress: bool = False, eval_set: str = "in_dist",
                       rule: str = "bound", reference: str = "grpo", margin: float = 0.02) -> dict:
    """Run the sweep rung by rung (see the module docstring); returns the halving record. With
    ``rule`` "resolved" a variant stops once its verdict against ``reference`` is resolved
    (analysis.halving.decide_resolved, the report's 1000 bootstrap replicates)."""
    from analysis.halving import compute_saved, decide_from_dir

    sdir = sweep_dir(runs)
    live, decisions, record = list(runs), [], []
    total = {r.run_id: r.cfg.train.steps for r in runs}
    t0 = time.time()
    for rung in rungs:
        launch(spec, live, executor, parallel=parallel, wait=True, out=out,
               show_progress=show_progress, pause_at=rung)
        table = decide_from_dir(sdir, rung, eval_set, [r.run_id for r in live],
                                n_boot=1000 if rule == "resolved" else 400, rule=rule,
                                reference=reference, margin=margin,
                                plan_sweeps=PLAN_SWEEPS if rule == "resolved" else 0)
        decisions.append((rung, table))
        stopped = {rid for ids in table.loc[table["decision"] == "stop", "run_ids"] for rid in ids}
        live = [r for r in live if r.run_id not in stopped]
        out(f"halving at step {rung}: " + "; ".join(
            f"{rec['arm']} @ {rec['scale']}: {rec['decision']} ({rec['reason']}"
            + (f"; planned dA width at the end {rec['planned_width']:.3f}"
               if rec["planned_width"] == rec["planned_width"] else "") + ")"
            for rec in table.to_dict("records")))
        record.append({"rung": rung, "decisions": table.to_dict("records")})
    res = launch(spec, live, executor, parallel=parallel, wait=True, out=out,
                 show_progress=show_progress)
    saved = compute_saved(decisions, total)
    summary = {"rungs": rungs, "eval_set": eval_set, "rule": rule, "steps": record,
               **({"reference": reference, "margin": margin} if rule == "resolved" else {}),
               "live_runs": [r.run_id for r in live], "train_steps_saved_frac": saved,
               "wall_s": time.time() - t0}
    (sdir / "halving.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    out(f"halving: {len(runs) - len(live)} of {len(runs)} runs stopped early; {saved:.1%} of the "
        f"sweep's train steps saved; record: {sdir / 'halving.json'}")
    res["halving"] = summary
    return res
