"""Which sampled groups reach the loss, and how a step's rollout is assembled from rounds.

- `group_filter = zero_variance` drops groups whose verifier scores are all equal (binary scores:
  keeps 0 < #correct < G). Their group-relative advantage is zero, so they only dilute the loss
  normaliser. Alone (max_gen_rounds = 1) this is ScaleRL's zero-variance filtering (Khatri et al.
  2025, arXiv 2510.13786): the batch simply shrinks.
- `max_gen_rounds = N > 1` adds DAPO dynamic sampling (Yu et al. 2025, arXiv 2503.14476, Sec. 3.2):
  keep drawing fresh batches of prompts until the batch holds `prompts_per_step` informative groups
  or N rounds were generated; surplus groups are dropped (DAPO keeps the first ones). If the cap is
  hit first, the step trains on the groups it has (verl raises instead; a long sweep should not
  die on one hard batch, and `rollout/kept_groups` records it).

The filter reads the verifier's raw score (correctness), not the shaped reward: DAPO filters on
accuracy, so an overlong penalty does not make an all-correct group "informative".
"""

from __future__ import annotations

from typing import Callable

import torch

from .batch import cat_rollouts


def collect_groups(generate: Callable, draw: Callable, score: Callable, *, n_groups: int,
                   group_size: int, group_filter: Callable, max_rounds: int, pad_id: int):
    """Generate rounds of `n_groups` prompts x `group_size` samples until `n_groups` groups pass the
    filter (or `max_rounds`). Returns (every sampled row, their items, their scores (B_all,), the
    row indices kept for training (whole groups, in order), rounds generated).

    generate(prompts) -> Rollout; draw(n) -> n new items; score(text, item) -> float.
    """
    ros, items, scores, kept = [], [], [], []
    rounds = 0
    while rounds < max_rounds and len(kept) < n_groups:
        batch = draw(n_groups)
        group_items = [it for it in batch for _ in range(group_size)]
        ro = generate([it.prompt for it in group_items])
        s = torch.tensor([score(t, it) for t, it in zip(ro.texts, group_items)])
        keep = group_filter(s, group_size)
        offset = sum(len(x) for x in scores) // group_size
        kept += [offset + g for g in keep.nonzero().flatten().tolist()]
        ros.append(ro)
        items += group_items
        scores.append(s)
        rounds += 1
    kept = kept[:n_groups]
    rows = (torch.tensor(kept, dtype=torch.long).unsqueeze(-1) * group_size
            + torch.arange(group_size)).reshape(-1)
    return cat_rollouts(ros, pad_id), items, torch.cat(scores), rows, rounds
