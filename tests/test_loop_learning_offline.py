"""The offline arms learn (issue 17): from the default config's cached warm start, each offline
arm, 60 steps of 16 self-play pairs (1024 training prompts x 16 samples, built once and shared by
every arm: the session's cache), raises in-distribution pass@1 over the warm start by more than 3
paired standard errors (items are the unit; the same fixed 256 eval items x 4 samples before and
after: Miller 2024, arXiv 2411.00640).

Measured (LOG.md, issue 17; seed 0, R0 0.238, load ~6, 563 s for the six): sft +0.077 (paired
SE 0.014), sft_gold +0.066 (0.016), ipo +0.056 (0.015) pass; dpo +0.012 (0.015), kto +0.032
(0.015) and simpo -0.021 (0.016) do not, and are marked `xfail(strict=True)` with those numbers:
under dpo both the chosen and the rejected log-ratio fall (the known DPO failure on reasoning
data, Pang et al. 2024, arXiv 2404.19733), so pass@1 does not rise. strict: if one of them starts
to learn, the test says so (XPASS fails) and the mark must go.
"""

from __future__ import annotations

import json
import math

import pytest

from harness.config import load_config
from harness.loop import train

pytestmark = pytest.mark.slow
STEPS = 60
SHARED = ["offline.n_prompts=1024", "offline.samples=16", "rollout.prompts_per_step=16",
          f"train.steps={STEPS}", f"eval.every={STEPS}", f"train.checkpoint_every={STEPS}",
          "eval.in_dist.n_items=256", "eval.held_out.n_items=16", "run.threads=1",
          "run.sweep=learn-offline"]
NOT_LEARNING = {  # measured gain (paired SE) at seed 0: LOG.md, issue 17
    "dpo": "+0.012 (SE 0.015): chosen and rejected log-ratios both fall",
    "kto": "+0.032 (SE 0.015): 2.1 SE",
    "simpo": "-0.021 (SE 0.016)"}
ARMS = [pytest.param(a, marks=pytest.mark.xfail(strict=True, reason=f"{a} does not learn at this "
                                                f"scale: {NOT_LEARNING[a]}"))
        if a in NOT_LEARNING else a for a in ("sft", "sft_gold", "dpo", "ipo", "simpo", "kto")]


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
    assert gain > 3 * se, (arm, r0, final, gain, se)
