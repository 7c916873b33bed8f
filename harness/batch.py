"""The step's tensors and their padding: what a rollout engine returns (`Rollout`), what an update
consumes (`StepBatch`), and the row helpers both need.

Rows are grouped by prompt: a prompt's G samples are contiguous rows g*G .. g*G+G-1. Prompts are
left-padded (so the last prompt token sits at one column for every row), responses right-padded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Optional

import torch


@dataclass
class Rollout:
    prompt_ids: torch.Tensor     # (B, Tp) left-padded
    prompt_mask: torch.Tensor    # (B, Tp) 1 = real token
    response_ids: torch.Tensor   # (B, Tr) right-padded; includes the EOS token when one was emitted
    response_mask: torch.Tensor  # (B, Tr) 1 = a token the policy chose
    logprobs: torch.Tensor       # (B, Tr) log pi_sampler(token) at the sampling temperature; 0 on pad
    lengths: torch.Tensor        # (B,) response tokens (incl. EOS)
    truncated: torch.Tensor      # (B,) bool: hit max_new_tokens without EOS
    texts: list[str]             # decoded responses (EOS and pad removed)
    forced: Optional[torch.Tensor] = None  # (B, Tr) bool: tokens the engine wrote, not sampled
    #                              (a forced length interruption's phrase); None = none forced
    routing_prompt: Optional[torch.Tensor] = None  # (B, Tp, L, k) MoE experts the sampler chose
    routing_resp: Optional[torch.Tensor] = None    # (B, Tr, L, k) for each fed token; -1 = none

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())


def sampled_mask(ro: Rollout) -> torch.Tensor:
    """(B, Tr) float: the response tokens the policy sampled. A forced interruption phrase is part
    of the response (the context of what follows) but was not sampled, so it is not trained on as
    if it were: not in the loss, the ratio, the advantage's statistics or the mismatch."""
    mask = ro.response_mask.float()
    return mask if ro.forced is None else mask * (~ro.forced).float()


def encode_prompts(tok, prompts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """BOS + prompt, left-padded."""
    ids = [[tok.bos_token_id] + tok.encode(p, add_special_tokens=False) if tok.bos_token_id is not None
           else tok.encode(p, add_special_tokens=False) for p in prompts]
    width = max(len(x) for x in ids)
    out = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        out[i, width - len(x):] = torch.tensor(x)
        mask[i, width - len(x):] = 1
    return out.to(device), mask.to(device)


@dataclass
class StepBatch:
    """The training tensors of one RL step; rows grouped by prompt (G contiguous rows each)."""
    prompt_ids: torch.Tensor       # (B, Tp) left-padded
    prompt_mask: torch.Tensor      # (B, Tp)
    response_ids: torch.Tensor     # (B, T) right-padded
    response_mask: torch.Tensor    # (B, T) 1 = a sampled token
    loss_mask: torch.Tensor        # (B, T) float: tokens in the policy loss (overlong filtering)
    adv: torch.Tensor              # (B, T)
    logp_old: torch.Tensor         # (B, T) pi_old
    correct: torch.Tensor          # (B,) bool: the verifier accepted the response
    logp_ref: Optional[torch.Tensor] = None       # (B, T) frozen reference policy (KL on)
    value_targets: Optional[torch.Tensor] = None  # (B, T) critic regression targets (GAE)
    correction: Optional[torch.Tensor] = None     # (B, T) rollout/train mismatch weight (detached)
    logp_sampler: Optional[torch.Tensor] = None   # (B, T) the sampler's log-probs (a loss-time mask)
    routing_prompt: Optional[torch.Tensor] = None  # (B, Tp, L, k) MoE: the sampler's experts
    routing_resp: Optional[torch.Tensor] = None    # (B, T, L, k)

    def __len__(self) -> int:
        return self.prompt_ids.shape[0]

    def rows(self, idx: torch.Tensor) -> "StepBatch":
        return StepBatch(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[idx]
                            for f in dataclasses.fields(self)})


def select_rows(ro: Rollout, idx: torch.Tensor) -> Rollout:
    """The rows `idx` of a rollout (texts included)."""
    ids = idx.tolist()
    return Rollout(ro.prompt_ids[idx], ro.prompt_mask[idx], ro.response_ids[idx], ro.response_mask[idx],
                   ro.logprobs[idx], ro.lengths[idx], ro.truncated[idx], [ro.texts[i] for i in ids],
                   None if ro.forced is None else ro.forced[idx],
                   *(None if x is None else x[idx] for x in (ro.routing_prompt, ro.routing_resp)))


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
                   [t for r in ros for t in r.texts],
                   None if all(r.forced is None for r in ros) else torch.cat(
                       [right(torch.zeros_like(r.response_mask, dtype=torch.bool) if r.forced is None
                              else r.forced, tr, False) for r in ros]),
                   *_cat_routing(ros, tp, tr))


def _cat_routing(ros: list[Rollout], tp: int, tr: int) -> tuple:
    """The recorded MoE routing of concatenated rollouts (prompts left-, responses right-padded
    with -1), or (None, None)."""
    if ros[0].routing_prompt is None:
        return None, None
    pad = torch.nn.functional.pad
    return (torch.cat([pad(r.routing_prompt, (0, 0, 0, 0, tp - r.routing_prompt.shape[1], 0), value=-1)
                       for r in ros]),
            torch.cat([pad(r.routing_resp, (0, 0, 0, 0, 0, tr - r.routing_resp.shape[1]), value=-1)
                       for r in ros]))


def group_rows(groups: torch.Tensor, group_size: int) -> torch.Tensor:
    """Group (prompt) indices -> the indices of their G contiguous rows, in order."""
    return (groups.unsqueeze(-1) * group_size + torch.arange(group_size)).reshape(-1)


def minibatch_rows(n_groups: int, epochs: int, minibatches: int, group_size: int) -> Iterator[torch.Tensor]:
    """Row indices of each minibatch: `epochs` passes, each a fresh permutation of the groups split
    in `minibatches` (whole groups, so group statistics and prompt-level aggregation stay exact).
    No group, no minibatch (and no draw from the RNG)."""
    for _epoch in range(epochs if n_groups else 0):
        for groups in torch.randperm(n_groups).chunk(minibatches):
            yield group_rows(groups, group_size)


def loss_mask_of(ro: Rollout, mask_truncated: bool) -> torch.Tensor:
    """(B, T) float: the tokens in the policy loss. DAPO overlong filtering (Yu et al. 2025, arXiv
    2503.14476): truncated responses count in group statistics, not in the loss."""
    mask = sampled_mask(ro)
    return mask * (~ro.truncated).unsqueeze(-1) if mask_truncated else mask
