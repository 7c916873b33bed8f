"""The run's parts, built once from the config and handed to every stage of the loop.

`Parts` holds what the stages share: the task and its eval sets, the tokenizer, the policy and its
optimizer, the engine that samples for eval (always the current policy) and the one that samples
the training rollouts (the same one, or a lagged copy's), and the optional parts a choice asks for:
a frozen reference (the KL entry `needs_reference`), a critic (the advantage entry `needs_critic`),
a lagged sampler (`algo.rollout_lag > 0`). Nothing here branches on a choice's name; a part that no
choice asks for is None.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import algos, distributed
from ..config import Config
from ..engines import ENGINES, make_engine
from ..models import (count_params, device_for, get_tokenizer, is_lora, load_policy_state,
                      policy_state, prepare_policy)
from ..tasks import Task, make_task
from ..models import ValueModel
from .data import TrainSet
from .metrics import ComputeMeter, Counters
from .selfplay import OfflineData, get_offline_data
from .warm_start import get_warm_start, load_warm_model


@dataclass
class Critic:
    """The value model of a critic-based advantage (gae) and its own optimizer."""
    model: ValueModel
    optimizer: torch.optim.Optimizer
    n_params: int


@dataclass
class LaggedSampler:
    """PipelineRL-style asynchrony, simulated in-process: rollouts come from the policy of
    `rollout_lag` optimizer updates ago, a second copy of the model loaded from `snapshots[0]`
    (the policy's state after each of the last lag + 1 updates)."""
    model: torch.nn.Module
    snapshots: deque

    @property
    def lag(self) -> int:
        """Updates the sampling policy is behind the current one (fewer in the first updates)."""
        return len(self.snapshots) - 1

    def load_behaviour_policy(self) -> None:
        load_policy_state(self.model, self.snapshots[0])

    def record(self, policy: torch.nn.Module) -> None:
        self.snapshots.append(policy_state(policy))


@dataclass
class Parts:
    cfg: Config
    dp: distributed.DistInfo
    device: torch.device
    task: Task
    tok: object
    warm_path: Path
    warm_info: dict
    policy: torch.nn.Module
    n_params: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    engine: object                     # samples with the current policy (eval; training unless lagged)
    sampler: object                    # samples the training rollouts
    eval_sets: dict
    counters: Counters = field(default_factory=Counters)
    reference: torch.nn.Module | None = None
    critic: Critic | None = None
    lagged: LaggedSampler | None = None
    train_set: TrainSet | None = None  # the training prompts (stream or finite set + history)
    offline: OfflineData | None = None  # the offline paradigm's data set (loop/selfplay.py)

    @property
    def meter(self) -> ComputeMeter:
        return ComputeMeter(self.counters)

    @property
    def lag(self) -> int:
        return self.lagged.lag if self.lagged is not None else 0

    def engines(self) -> list:
        """Each distinct engine once."""
        return list({id(self.engine): self.engine, id(self.sampler): self.sampler}.values())

    def sync_engines(self) -> None:
        """Push the policy's weights to every engine that holds its own copy (vLLM)."""
        if ENGINES.meta(self.cfg.rollout.engine).own_weights:
            for e in self.engines():
                e.sync_weights(self.policy)


# optim.schedule -> the LR factor after warm-up, as a function of the progress p in [0, 1]
SCHEDULES = {"constant": lambda p: 1.0,
             "cosine": lambda p: 0.5 * (1 + math.cos(math.pi * min(1.0, p)))}


def lr_lambda(cfg: Config, total_updates: int):
    """Linear warm-up over optim.warmup_steps, then constant or cosine to 0 at the last update."""
    o = cfg.optim
    after = SCHEDULES[o.schedule]

    def f(i: int) -> float:
        if o.warmup_steps and i < o.warmup_steps:
            return (i + 1) / o.warmup_steps
        return after((i - o.warmup_steps) / max(1, total_updates - o.warmup_steps))
    return f


def eval_set_cfg(cfg: Config, name: str):
    """n_items and k of an eval set: its own section, or eval.held_out's for an extra held-out set."""
    return getattr(cfg.eval, name) if name in ("in_dist", "held_out") else cfg.eval.held_out


def build_parts(cfg: Config, dp: distributed.DistInfo, progress: bool) -> Parts:
    """Everything a run needs, in a fixed order (model initialisations draw from torch's RNG)."""
    device = device_for(cfg, dp.local_rank if dp.world > 1 else None)
    ENGINES[cfg.rollout.engine]  # an optional extra (vLLM) missing: say so before any warm-up
    task = make_task(cfg)
    if not dp.is_main:  # data parallel: rank 0 builds (or finds) the cached warm start first
        distributed.barrier()  # (transformers' save_pretrained writes nothing on rank > 0)
    tok = get_tokenizer(cfg, task.corpus)
    warm_path, warm_info = get_warm_start(cfg, tok, task, progress=progress)
    if dp.is_main:
        distributed.barrier()
    if cfg.task.chat_template:
        task.use_chat_template(tok)
    a = cfg.algo

    def frozen_copy() -> torch.nn.Module:
        return prepare_policy(load_warm_model(warm_path, device), cfg).eval().requires_grad_(False)

    # dtype/autocast, fp32 head, gradient checkpointing, LoRA (models.prepare_policy)
    policy = prepare_policy(load_warm_model(warm_path, device), cfg)
    policy.train()
    reference = None  # the frozen warm start; with LoRA, the policy with its adapters disabled
    offline_loss = algos.OFFLINE_LOSSES.meta(a.offline_loss)
    if algos.KL_ESTIMATORS.meta(a.kl).needs_reference or offline_loss.needs_reference:
        reference = policy if is_lora(policy) else frozen_copy()
    critic = None
    if algos.ADVANTAGES.meta(a.advantage).needs_critic:
        vm = ValueModel(load_warm_model(warm_path, device)).to(device)
        critic = Critic(vm, torch.optim.AdamW(vm.parameters(), lr=a.critic_lr, weight_decay=0.0,
                                              betas=(cfg.optim.beta1, cfg.optim.beta2)),
                        count_params(vm))
    engine = make_engine(cfg.rollout.engine, policy, tok, model_path=warm_path, cfg=cfg)
    sampler, lagged = engine, None
    if a.rollout_lag > 0:
        lagged = LaggedSampler(frozen_copy(), deque([policy_state(policy)], maxlen=a.rollout_lag + 1))
        sampler = make_engine(cfg.rollout.engine, lagged.model, tok)
    eval_sets = {s: task.eval_set(s, eval_set_cfg(cfg, s).n_items)
                 for s in ("in_dist", "held_out", *cfg.eval.held_out_sets)}
    trainable = [p for p in policy.parameters() if p.requires_grad]  # LoRA: the adapters
    # fused: one kernel over all parameters (CPU and CUDA): 1.7 ms vs 4.4 ms per step on the
    # tiny model (LOG.md); the same update up to float rounding
    opt = torch.optim.AdamW(trainable, lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay,
                            betas=(cfg.optim.beta1, cfg.optim.beta2),
                            fused=device.type in ("cpu", "cuda") or None)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lr_lambda(cfg, cfg.train.steps * a.epochs * a.minibatches))
    parts = Parts(cfg=cfg, dp=dp, device=device, task=task, tok=tok, warm_path=warm_path,
                  warm_info=warm_info, policy=policy, n_params=count_params(policy), optimizer=opt,
                  scheduler=sched, engine=engine, sampler=sampler, eval_sets=eval_sets,
                  reference=reference, critic=critic, lagged=lagged,
                  train_set=TrainSet(task, cfg.task.train_items, cfg.run.seed, a.retire,
                                     a.retire_threshold))
    if algos.PARADIGMS.meta(a.paradigm).offline:  # the data set, built once and cached
        parts.offline = get_offline_data(cfg, tok, task, warm_path, device, offline_loss.selfplay)
        # its generation is compute this run spent (a resumed run restores its counters)
        parts.counters.flops += parts.offline.info["flops"]
        parts.counters.tokens += parts.offline.info["tokens"]
    return parts
