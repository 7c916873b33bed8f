"""group_filter: (scores (B,), group_size) -> (P,) bool, the groups that reach the loss.

`zero_variance` drops groups whose verifier scores are all equal (binary scores: keeps
0 < #correct < G). Their group-relative advantage is zero, so they only dilute the loss normaliser.
Alone (max_gen_rounds = 1) this is ScaleRL's zero-variance filtering (Khatri et al. 2025, arXiv
2510.13786): the batch simply shrinks; with max_gen_rounds > 1 the loop refills it (DAPO dynamic
sampling, Yu et al. 2025, arXiv 2503.14476, Sec. 3.2). The filter reads the verifier's raw score
(correctness), not the shaped reward: DAPO filters on accuracy, so an overlong penalty does not
make an all-correct group "informative". Property: drops (it can remove groups, so refilling
rounds make sense).

adv_batch_scope: (response_mask (B, T), rewards (B,), kept (B,) bool) -> (mask, rewards) of the rows a
batch-level advantage's statistics also count beyond the kept ones, or None. Property:
counts_dropped (the statistics see the dropped rows).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

GROUP_FILTERS = Registry("algo.group_filter", drops=False)


def informative_groups(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """(P,) bool: the group's scores are not all equal."""
    s = scores.view(-1, group_size)
    return (s != s[:, :1]).any(-1)


@GROUP_FILTERS.register("none")
def keep_every_group(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """Every sampled group is trained on (GRPO, Shao et al. 2024, arXiv 2402.03300)."""
    return torch.ones(len(scores) // group_size, dtype=torch.bool)


@GROUP_FILTERS.register("zero_variance", drops=True)
def keep_informative_groups(scores: torch.Tensor, group_size: int) -> torch.Tensor:
    """Drop groups whose verifier scores are all equal (ScaleRL zero-variance filtering, Khatri et
    al. 2025, arXiv 2510.13786; DAPO's dynamic-sampling filter): only groups with
    0 < #correct < G keep a non-zero advantage."""
    return informative_groups(scores, group_size)


ADV_BATCH_SCOPES = Registry("algo.adv_batch_scope", counts_dropped=False)


@ADV_BATCH_SCOPES.register("kept")
def scope_kept(response_mask: torch.Tensor, rewards: torch.Tensor, kept: torch.Tensor) -> None:
    """Batch statistics (batch std, whitening) over the groups the filter kept only: the filter
    runs before the advantage (ScaleRL's text, Khatri et al. 2025, arXiv 2510.13786, fixes no
    order; this is the default)."""
    return None


@ADV_BATCH_SCOPES.register("sampled", counts_dropped=True)
def scope_sampled(response_mask: torch.Tensor, rewards: torch.Tensor, kept: torch.Tensor) -> tuple:
    """Batch statistics over every sampled group (ScaleRL, Khatri et al. 2025, arXiv 2510.13786,
    read the other way): the dropped zero-variance groups count with
    their advantage 0 (the statistic is taken before the filter; it lowers the std). Returns the
    dropped rows' (response_mask, rewards)."""
    out = ~kept
    return response_mask[out], rewards[out]
