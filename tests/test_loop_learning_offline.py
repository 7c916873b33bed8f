"""The offline arms learn (issue 17): from the default config's cached warm start, each offline
arm, 120 steps of 16 self-play pairs (1024 training prompts x 16 samples: ~616 pairs, built once
and shared by every arm: the session's cache), i.e. OXRL's 3 epochs over its data (Li 2026, arXiv
2603.19335), raises in-distribution pass@1 over the warm start by more than 3 paired standard
errors (items are the unit; the same fixed 1024 eval items x 8 samples before and after: Miller
2024, arXiv 2411.00640). Every arm at its preset (the papers' hyper-parameters) and the shared
lr 1e-4.

Measured (LOG.md, session 8; seed 0, R0 0.242, 1024 x 8): sft +0.127 (paired SE 0.007), sft_gold
+0.089 (0.007), ipo +0.064 (0.007), kto +0.030 (0.007, 4.3 SE) pass; dpo +0.0016 (0.008) and simpo
+0.0054 (0.008) do not, and are marked `xfail(strict=True)` with those numbers. (Until session 8
the eval was 256 x 4, where kto's same gain, +0.029, was only 1.7 SE.) No lever the pilots tried
lifts dpo or simpo past 3 SE (LOG.md: lr 3e-5 / 5e-5 / 3e-4, 4x the self-play prompts, SimPO's
beta 2-2.5). Under dpo both the chosen and the rejected log-ratio fall, the failure Azar et al.
2023 (arXiv 2310.12036, Sec. 4.2) predict for deterministic preferences (a verifier's), so pass@1
does not rise. strict: if one of them starts to learn, the test says so (XPASS fails) and the mark
must go. The file runs in 3.5 min on one worker (the warm start and self-play data cached).
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
NOT_LEARNING = {  # measured gain (paired SE) at seed 0, 1024 x 8 eval: LOG.md, session 7
    "dpo": "+0.0016 (SE 0.008): chosen and rejected log-ratios both fall",
    "simpo": "+0.0054 (SE 0.008), beta 2.0, gamma 1.0"}
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
