"""What a sweep's design can decide of the seed claims, before it runs (issue 16: "say in advance
what a design can resolve"). The planner (analysis.plan) predicts the design-choice intervals;
this does the same for claims 1, 2 and 4: their verdicts simulated at the spec's seeds and steps
(analysis.calibrate, the claims only) with the noise a pilot's claims measured
(:func:`analysis.calibrate_claims.measured_claim_noise` on its ``claim_inputs.json``), and, for
claim 4, the share of simulated studies that decide it when the truth is the pilot's own
estimates (:func:`analysis.resolve.claim4_share`: these algorithms, not a random set of them).

Measured on check-claim4-11s's pre-registration (LOG, session 28): the plug-in budget had named
11 seeds for claim 4; at 11 seeds the pilot's estimates decide it in 25% of simulated studies
and a random pattern of five algorithms with the same spread in 10%.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from analysis.calibrate import NoiseModel, calibrate, clopper_pearson
from analysis.calibrate_claims import measured_claim_noise
from analysis.resolve import claim4_share
from analysis.schedule import REFERENCE, Group


def claim_plan(groups: list[Group], inputs: dict, n_sweeps: int = 200, seed: int = 0,
               reference: str = REFERENCE) -> pd.DataFrame:
    """The claims' rows of the calibration table for the design ``groups`` (the spec's schedule)
    at the noise the pilot's ``inputs`` (its ``claim_inputs.json``) measured, plus claim 4 at the
    pilot's estimates (truth "pilot"). Empty where the spec compares no claim's arms."""
    noise = replace(NoiseModel(), **measured_claim_noise(inputs))
    table = calibrate(groups, noise, n_sweeps, seed, reference=reference, effects=False)
    presets = {}
    for g in groups:
        if "+" not in g.variant:
            presets.setdefault(g.scale, []).append(g)
    seeds = min((g.seeds for gs in presets.values() for g in gs), default=0)
    if "4" in inputs and any(len(gs) > 2 for gs in presets.values()) and seeds >= 2:
        fin = pd.DataFrame(inputs["4"]["finals"],
                           columns=["variant", "scale_value", "eval_set", "final", "r0"])
        share = claim4_share(fin, inputs["eval_set"], inputs["held_out"], seeds, n_sweeps, seed)
        rows = []
        for verdict in ("reproduces", "does not reproduce"):
            hits = round(share[verdict] * n_sweeps)
            lo, hi = clopper_pearson(hits, n_sweeps)
            n_alg = len(inputs["4"]["presets"])
            rows.append({"verdict": f"claim 4 {verdict}",
                         "setting": f"claim 4 ({n_alg} presets x {seeds} seeds), the pilot's "
                                    "estimates as the truth",
                         "kind": "share", "truth": "pilot", "n_sweeps": n_sweeps,
                         "rate": hits / n_sweeps, "lo": lo, "hi": hi, "ok": ""})
        table = pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
    return table
