"""The offline arms learn (issue 17): from the default config's cached warm start, each offline
arm, 120 steps of 16 self-play pairs (1024 training prompts x 16 samples: ~616 pairs, built once
and shared by every arm: the session's cache), i.e. OXRL's 3 epochs over its data (Li 2026, arXiv
2603.19335), raises in-distribution pass@1 over the warm start by more than 3 paired standard
errors (items are the unit; the same fixed 1024 eval items x 8 samples before and after: Miller
2024, arXiv 2411.00640). Every arm at its preset (the papers' hyper-parameters) and the shared
lr 1e-4.

The warm start stops on a pass-rate threshold, so a CPU whose float rounding differs (another
EPYC generation, say) stops it at another step: R0 was 0.242 (session 8's machine), 0.323 (CI,
2026-12-01) and 0.308 (session 9's machine); on session 9's machine the warm start's own seed
(`warmup.seed` 1 and 2) gave R0 0.224 and 0.185. The gains below are each start's own (1024 x 8,
paired SE ~0.007-0.009; "-": not run):

| arm | R0 0.242 | R0 0.323 (CI) | R0 0.308 | R0 0.224 | R0 0.185 |
|---|---|---|---|---|---|
| sft | +0.127 | pass | +0.110 | +0.109 | +0.141 |
| sft_gold | +0.089 | pass | +0.086 | +0.087 | +0.105 |
| dpop | - | - | +0.049 (~8 SE) | +0.078 | +0.086 |
| ipo | +0.064 | pass | +0.023 (3.0 SE) | +0.026 (3.3 SE) | +0.019 (2.4 SE) |
| kto | +0.030 (4.3 SE) | +0.004 (0.5 SE) | -0.030 | +0.021 | - |
| dpo | +0.002 | xfail | -0.039 | +0.018 | +0.029 (3.6 SE) |
| simpo | +0.005 | xfail | -0.037 | +0.012 | - |

So dpo, simpo and kto do not robustly raise pass@1 at this scale, and ipo only barely; the sign
of their change depends on the warm start. Every one of them does optimise its own objective
(training pair accuracy ~0.54 -> 0.91, the log-ratio gap of chosen over rejected +0.04 -> +0.47
under dpo), but by lowering the chosen response's log-ratio too (dpo -0.11, kto -0.10; the
rejected one -0.57): the failure Pal et al. 2024 (Smaug / DPO-Positive, arXiv 2402.13228) prove
for pairs at a small edit distance, here one answer token ("2+2=4" vs "2+2=5" is their example),
and Azar et al. 2023 (arXiv 2310.12036, Sec. 4.2) predict for deterministic preferences. DPOP,
their fix (a penalty lambda * max(0, log-ratio drop of the chosen response) inside DPO's sigmoid),
learns from every warm start tried: the diagnosis holds. No other lever the pilots tried lifts
dpo/simpo/kto (LOG.md: lr 3e-5 / 5e-5 / 3e-4, 4x the self-play prompts, SimPO's beta 2-2.5).
Pairs further apart do not either: on three operands (chosen and rejected 2.5-2.8 tokens apart
against 1.26 here) dpo, simpo and kto fall by 3.7-8.4 SE from two warm starts while sft and dpop
gain (sweeps/pilot-offline-3terms.yaml, session 31).

What every arm must do (asserted): finish; lower its training loss (last 10 steps against the
first 10); a preference arm must separate its training pairs (the chosen-over-rejected gap rises by
> 0.1). The pass@1 claim (> 3 paired SE) is asserted for sft, sft_gold and dpop; for dpo, simpo,
kto and ipo it raises `BelowThreeSE`, an expected failure (`xfail(raises=BelowThreeSE)`): any
other failure of theirs still fails the test, and the mark is not strict because each passed on
some warm start. The file runs in ~3 min on one worker (warm start and self-play cached).
"""

from __future__ import annotations

import json
import math

import pytest

from harness.config import load_config
from harness.loop import train

pytestmark = pytest.mark.slow
STEPS = 120  # ~3.1 epochs over the ~616 pairs (OXRL: 3 epochs)
SHARED = ["offline.n_prompts=1024", "offline.samples=16", "rollout.prompts_per_step=16",
          f"train.steps={STEPS}", f"eval.every={STEPS}", f"train.checkpoint_every={STEPS}",
          "eval.in_dist.n_items=1024", "eval.in_dist.k=8", "eval.held_out.n_items=16",
          "eval.held_out.k=1", "run.threads=1",
          "run.sweep=learn-offline"]
NOT_LEARNING = {  # gains at 1024 x 8 from five warm starts: the table above
    "dpo": "-0.039 to +0.029: chosen and rejected log-ratios both fall (Pal et al. 2024)",
    "simpo": "-0.037 to +0.012 (beta 2.0, gamma 1.0)",
    "kto": "-0.030 to +0.030: the sign depends on the warm start",
    "ipo": "+0.019 to +0.064: 2.4 to 9 SE, below 3 SE from one warm start"}


class BelowThreeSE(AssertionError):
    """The in-distribution gain over the warm start is not beyond 3 paired standard errors."""


ARMS = [pytest.param(a, marks=pytest.mark.xfail(raises=BelowThreeSE, strict=False,
                                                reason=f"{a} does not learn at this scale: "
                                                f"{NOT_LEARNING[a]}"))
        if a in NOT_LEARNING else a for a in ("sft", "sft_gold", "dpo", "dpop", "ipo", "simpo", "kto")]


def _paired_gain(run_dir):
    items = [json.loads(l) for l in (run_dir / "eval_items.jsonl").read_text().splitlines()]
    before = next(r["correct"] for r in items if r["step"] == 0 and r["set"] == "in_dist")
    after = next(r["correct"] for r in items if r["step"] == STEPS and r["set"] == "in_dist")
    d = [a - b for a, b in zip(after, before)]
    n, mean = len(d), sum(d) / len(d)
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return sum(before) / n, sum(after) / n, mean, se


@pytest.mark.parametrize("arm", ARMS)
def test_offline_arm_raises_in_dist_pass_rate(arm, tmp_path_factory, cache_dir):
    root = tmp_path_factory.mktemp(f"learn-{arm}")
    loss = {"sft_gold": ["algo.paradigm=offline", "algo.offline_loss=sft_gold",
                         "offline.n_prompts=1024"]}.get(arm, [f"algo.preset={arm}"])
    over = SHARED + loss + [f"run.results_dir={root}", f"run.cache_dir={cache_dir}"]
    if arm == "sft_gold":  # no self-play: its samples key keeps its default
        over = [o for o in over if not o.startswith("offline.samples=")]
    cfg = load_config("configs/default.yaml", over)
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished"
    r0, final, gain, se = _paired_gain(cfg.run_dir())
    print(f"{arm}: in-dist pass@1 {r0:.3f} -> {final:.3f}, gain {gain:+.3f} (paired SE {se:.3f})")
    rows = [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("kind") == "train"]
    first, last = rows[:10], rows[-10:]
    loss = [_mean(first, "loss/offline"), _mean(last, "loss/offline")]
    assert loss[1] < loss[0], (arm, "training loss did not fall", loss)
    if "offline/margin" in rows[0] or "offline/rejected_log_ratio" in rows[0]:  # a preference loss
        gap = [_gap(first), _gap(last)]
        print(f"{arm}: loss {loss[0]:.3f} -> {loss[1]:.3f}, chosen-over-rejected gap "
              f"{gap[0]:+.3f} -> {gap[1]:+.3f}")
        assert gap[1] > gap[0] + 0.1, (arm, "training pairs not separated", gap)
    if not gain > 3 * se:
        raise BelowThreeSE(f"{arm}: gain {gain:+.4f} is not beyond 3 x SE {se:.4f} (R0 {r0:.3f})")


def _mean(rows, key):
    return sum(r[key] for r in rows) / len(rows)


def _gap(rows):
    """Chosen over rejected: the log-ratio difference where there is a reference, else the loss's
    own margin (SimPO's length-normalised log-probabilities have none)."""
    if "offline/rejected_log_ratio" in rows[0]:
        return _mean(rows, "offline/chosen_log_ratio") - _mean(rows, "offline/rejected_log_ratio")
    return _mean(rows, "offline/margin")
