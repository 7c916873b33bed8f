"""Data parallel training over several processes (GPUs), with torch.distributed.

    torchrun --nproc_per_node=4 -m harness.cli train configs/gpu_qwen2.5-7b.yaml

(or SLURM/submitit with one task per GPU: the SLURM variables are mapped by submitit's
`TorchDistributedEnvironment`). One process per device; every process holds the whole policy.

Per step, rank r of W samples groups r, r+W, r+2W, ... of the step's prompts (each rank draws the
same prompts and keeps its share, so the data cursor stays identical everywhere), scores them and
computes their advantages (group-local estimators only). In every optimizer update the token
weights of the loss are computed from the *all-gathered* minibatch loss masks, so every normaliser
(token count, sequence count, prompt count) is global, exactly as in one process; each rank then
back-propagates its own rows and the gradients are summed across ranks (not averaged: the weights
are already globally normalised). The update is therefore the single-process update of the
combined minibatch (tested with gloo on CPU). Rank 0 alone logs, evaluates and checkpoints.

The offline paradigm (loop/offline.py) splits each minibatch of preference pairs over the ranks
the same way: every rank reads the same pairs, keeps rows r, r+W, ... of each minibatch, and
computes the loss of the whole minibatch from the all-gathered per-pair log-probabilities
(`gather_rows`), so the summed gradients equal the single-process update (tested).

Outside torchrun (WORLD_SIZE unset or 1) every function here is the identity.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device_type: str) -> DistInfo:
    """Join the process group when launched with several processes (torchrun sets RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT; under SLURM with several tasks submitit's helper
    exports them). nccl on CUDA, gloo on CPU."""
    if "RANK" not in os.environ and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        from submitit.helpers import TorchDistributedEnvironment
        TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return info


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def global_weights(weight_fn, mask: torch.Tensor) -> torch.Tensor:
    """`weight_fn(mask)` computed over the minibatch of ALL ranks; returns this rank's rows.
    Masks are padded to the widest rank's width before gathering (pad columns weigh 0)."""
    if not active():
        return weight_fn(mask)
    width = torch.tensor([mask.shape[1]], device=mask.device)
    dist.all_reduce(width, op=dist.ReduceOp.MAX)
    W = int(width.item())
    padded = torch.nn.functional.pad(mask, (0, W - mask.shape[1]))
    sizes = [torch.zeros(1, dtype=torch.long, device=mask.device) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([mask.shape[0]], device=mask.device))
    sizes = [int(s.item()) for s in sizes]
    bufs = [torch.zeros(n, W, dtype=mask.dtype, device=mask.device) for n in sizes]
    if max(sizes) == min(sizes):
        dist.all_gather(bufs, padded.contiguous())
    else:  # all_gather needs equal shapes: pad rows too, then cut
        big = [torch.zeros(max(sizes), W, dtype=mask.dtype, device=mask.device) for _ in sizes]
        dist.all_gather(big, torch.nn.functional.pad(padded, (0, 0, 0, max(sizes) - mask.shape[0])))
        bufs = [b[:n] for b, n in zip(big, sizes)]
    w = weight_fn(torch.cat(bufs))
    start = sum(sizes[:dist.get_rank()])
    return w[start:start + mask.shape[0], :mask.shape[1]]


def gather_rows(t: torch.Tensor) -> torch.Tensor:
    """(n_r,) on each rank -> every rank's rows concatenated in rank order. This rank's own rows
    keep their autograd graph, the others are detached values: a loss of the whole (combined)
    minibatch then back-propagates into this rank's rows only, and the gradients summed over
    ranks are the single-process gradient of that loss, whatever its normalisers (the offline
    losses' means, SFT's token count, KTO's reference point). Ranks may hold different n_r."""
    if not active():
        return t
    sizes = [torch.zeros(1, dtype=torch.long, device=_dev()) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, torch.tensor([t.shape[0]], device=_dev()))
    sizes = [int(s.item()) for s in sizes]
    pad = torch.nn.functional.pad(t.detach(), (0, max(sizes) - t.shape[0])).to(_dev())
    big = [torch.zeros_like(pad) for _ in sizes]
    dist.all_gather(big, pad.contiguous())
    parts = [b[:n].to(t.device) for b, n in zip(big, sizes)]
    parts[dist.get_rank()] = t
    return torch.cat(parts)


def _dev() -> torch.device:
    """Where collective tensors must live: the current GPU under nccl, else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" \
        else torch.device("cpu")


def sum_gradients(model: torch.nn.Module) -> None:
    """Sum every trainable parameter's gradient across ranks (one flat buffer per dtype/device)."""
    if not active():
        return
    groups: dict = {}
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            groups.setdefault((p.grad.dtype, p.grad.device), []).append(p.grad)
    for grads in groups.values():
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        i = 0
        for g in grads:
            g.copy_(flat[i:i + g.numel()].view_as(g))
            i += g.numel()


def sum_stats(st: dict) -> dict:
    """policy_backward's per-rank sums -> global sums (`max_*` keys: the maximum)."""
    if not active():
        return st
    keys = sorted(st)
    sums = torch.tensor([0.0 if k.startswith("max_") else float(st[k]) for k in keys],
                        dtype=torch.float64, device=_dev())
    maxs = torch.tensor([float(st[k]) if k.startswith("max_") else 0.0 for k in keys],
                        dtype=torch.float64, device=_dev())
    dist.all_reduce(sums)
    dist.all_reduce(maxs, op=dist.ReduceOp.MAX)
    return {k: (maxs[i] if k.startswith("max_") else sums[i]).item() for i, k in enumerate(keys)}


def barrier() -> None:
    if active():
        dist.barrier()


def any_rank(flag: bool) -> bool:
    """True on every rank if it is True on any (e.g. a wall-clock stop decided by one clock)."""
    if not active():
        return flag
    t = torch.tensor([1 if flag else 0], device=_dev())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def check(cfg, world: int) -> None:
    """What data parallel supports, checked at start-up (one line each)."""
    from . import algos
    a, r = cfg.algo, cfg.rollout
    if world <= 1:
        return
    if r.prompts_per_step % world:
        raise ValueError(f"rollout.prompts_per_step = {r.prompts_per_step}: must be divisible by the "
                         f"{world} data-parallel processes")
    if a.minibatches > r.prompts_per_step // world:
        raise ValueError(f"algo.minibatches = {a.minibatches}: must be <= the prompts per process "
                         f"({r.prompts_per_step // world}) so every process makes the same updates")
    if algos.RETIREMENTS.meta(a.retire).active:
        raise ValueError(f"algo.retire = {a.retire!r}: not supported with data parallel yet (each "
                         f"process sees only its share of the scores)")
    if algos.GROUP_FILTERS.meta(a.group_filter).drops:
        raise ValueError(f"algo.group_filter = {a.group_filter!r}: not supported with data parallel "
                         f"yet (processes would keep different numbers of groups)")
    if not algos.ADVANTAGES.meta(a.advantage).group_local:
        raise ValueError(f"algo.advantage = {a.advantage!r}: batch-level statistics are not "
                         f"all-reduced yet; use a group-local estimator with data parallel")
