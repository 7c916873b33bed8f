"""Stage 1 of a step: sample the rollout.

Rounds of `prompts_per_step` fresh prompts x G samples each, scored by the task's verifier; the
group filter (`algo.group_filter`, a registered function) keeps the informative groups, and with
`algo.max_gen_rounds = N > 1` the stage keeps drawing rounds until the batch is full or N rounds
were generated: DAPO dynamic sampling (Yu et al. 2025, arXiv 2503.14476, Sec. 3.2). Surplus groups
are dropped (DAPO keeps the first ones). If the cap is hit first the step trains on the groups it
has (verl raises instead; a long sweep should not die on one hard batch, and
`rollout/kept_groups` records it). The reward is the verifier's score plus DAPO's overlong shaping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .. import algos
from ..batch import Rollout, cat_rollouts, group_rows, select_rows
from .parts import Parts


@dataclass
class Sampled:
    """One step's samples: every sampled row (kept or filtered) and which rows reach the loss."""
    rollout: Rollout           # every sampled row, rounds concatenated
    scores: torch.Tensor       # (B_all,) the verifier's scores
    rewards: torch.Tensor      # (B_all,) scores + reward shaping
    kept: torch.Tensor         # row indices of the kept groups (whole groups, in order)
    rounds: int

    def kept_rows(self) -> tuple[Rollout, torch.Tensor, torch.Tensor]:
        """(rollout, rewards, scores) of the kept rows."""
        return select_rows(self.rollout, self.kept), self.rewards[self.kept], self.scores[self.kept]


def collect_groups(generate: Callable, draw: Callable, score: Callable, *, n_groups: int,
                   group_size: int, group_filter: Callable, max_rounds: int, pad_id: int):
    """Generate rounds of `n_groups` prompts x `group_size` samples until `n_groups` groups pass
    `group_filter(scores, group_size) -> (P,) bool` (or `max_rounds`). Returns (every sampled row,
    their items, their scores (B_all,), the row indices kept for training (whole groups, in
    order), rounds generated).

    generate(prompts) -> Rollout; draw(n) -> n new items; score(text, item) -> float.
    """
    ros, items, scores, kept_groups = [], [], [], []
    rounds = 0
    while rounds < max_rounds and len(kept_groups) < n_groups:
        batch = draw(n_groups)
        group_items = [it for it in batch for _ in range(group_size)]
        ro = generate([it.prompt for it in group_items])
        s = torch.tensor([score(t, it) for t, it in zip(ro.texts, group_items)])
        keep = group_filter(s, group_size)
        offset = sum(len(x) for x in scores) // group_size
        kept_groups += [offset + g for g in keep.nonzero().flatten().tolist()]
        ros.append(ro)
        items += group_items
        scores.append(s)
        rounds += 1
    rows = group_rows(torch.tensor(kept_groups[:n_groups], dtype=torch.long), group_size)
    return cat_rollouts(ros, pad_id), items, torch.cat(scores), rows, rounds


def sample(p: Parts) -> Sampled:
    """One step's rollout from the sampling policy (the lagged one, under rollout_lag)."""
    dp, r, a, c = p.dp, p.cfg.rollout, p.cfg.algo, p.counters
    if p.lagged is not None:  # the policy of min(rollout_lag, updates so far) updates ago
        p.lagged.load_behaviour_policy()

    drawn: list[int] | None = []  # the finite set's item indices, in draw order

    def draw(n: int) -> list:  # data parallel: every rank draws all, keeps its share
        nonlocal drawn
        got, ids, c.cursor = p.train_set.take(c.cursor, n * dp.world)
        drawn = None if ids is None else drawn + ids[dp.rank::dp.world]
        return got[dp.rank::dp.world]

    interrupt = {} if not r.think_budget else {  # forced length interruptions (ScaleRL)
        "think_budget": r.think_budget, "interrupt": r.interrupt_phrase or p.task.interrupt_phrase}
    ro, _, scores, kept, rounds = collect_groups(
        lambda prompts: p.sampler.generate(prompts, max_new_tokens=r.max_new_tokens,
                                           temperature=r.temperature, top_p=r.top_p, **interrupt),
        draw, p.task.score, n_groups=r.prompts_per_step // dp.world, group_size=r.group_size,
        group_filter=algos.GROUP_FILTERS[a.group_filter], max_rounds=a.max_gen_rounds,
        pad_id=p.tok.pad_token_id)
    p.train_set.record(drawn, scores, r.group_size)  # per-item history (finite set only)
    p.meter.generated(p.n_params, ro)  # discarded generations cost compute too
    scores = scores.to(ro.lengths.device)  # the verifier's floats join the rollout's device
    rewards = scores + algos.overlong_penalty(ro.lengths, max_len=r.max_new_tokens,
                                              cache=a.overlong_cache)  # DAPO shaping
    return Sampled(ro, scores, rewards, kept, rounds)
