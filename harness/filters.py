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

from .rollout import Rollout


def informative_groups(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """(P,) bool: the group's scores are not all equal."""
    s = scores.view(-1, group_size)
    return (s != s[:, :1]).any(-1)


def select_rows(ro: Rollout, idx: torch.Tensor) -> Rollout:
    """The rows `idx` of a rollout (texts included)."""
    ids = idx.tolist()
    return Rollout(ro.prompt_ids[idx], ro.prompt_mask[idx], ro.response_ids[idx], ro.response_mask[idx],
                   ro.logprobs[idx], ro.lengths[idx], ro.truncated[idx], [ro.texts[i] for i in ids])


def cat_rollouts(ros: list[Rollout], pad_id: int) -> Rollout:
    """Concatenate rollouts of different widths: prompts stay left-padded, responses right-padded."""
    if len(ros) == 1:
        return ros[0]
    tp = max(r.prompt_ids.shape[1] for r in ros)
    tr = max(r.response_ids.shape[1] for r in ros)

    def left(x, w, v):
        return torch.nn.functional.pad(x, (w - x.shape[1], 0), value=v)

    def right(x, w, v):
        return torch.nn.functional.pad(x, (0, w - x.shape[1]), value=v)

    return Rollout(torch.cat([left(r.prompt_ids, tp, pad_id) for r in ros]),
                   torch.cat([left(r.prompt_mask, tp, 0) for r in ros]),
                   torch.cat([right(r.response_ids, tr, pad_id) for r in ros]),
                   torch.cat([right(r.response_mask, tr, 0) for r in ros]),
                   torch.cat([right(r.logprobs, tr, 0.0) for r in ros]),
                   torch.cat([r.lengths for r in ros]), torch.cat([r.truncated for r in ros]),
                   [t for r in ros for t in r.texts])


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
