"""The critic of `advantage = gae`: a value model V(s_t) for PPO / VAPO (`models.ValueModel`),
its targets, its updates and VAPO's value pretraining.

A separate network (not a head on the policy's trunk, so the value loss never moves the policy): a
copy of the warm-start transformer body with a scalar head, zero-initialised so V = 0 before value
pretraining. VAPO (Yue et al. 2025, arXiv 2504.05118) initialises its value model from a reward
model and pretrains it on Monte Carlo returns of the fixed initial policy (`value_pretrain_steps`);
with no reward model here, it starts from the warm-start LM.

V(s_t) for response token t is read at the position that predicts token t (the state is the prompt
plus y_<t), the same alignment as the policy's log-probs, so values, rewards and masks are all
(B, T) over response tokens.
"""

from __future__ import annotations

import torch

from .. import algos
from ..batch import Rollout, StepBatch, loss_mask_of, minibatch_rows
from ..models import ValueModel
from .parts import Parts
from .sample import sample


def critic_targets(p: Parts, ro: Rollout, rewards: torch.Tensor, mask: torch.Tensor,
                   token_rewards) -> tuple[torch.Tensor, torch.Tensor]:
    """Values of the critic (no grad) and its lambda_critic-return targets."""
    a = p.cfg.algo
    with torch.no_grad():
        values = p.critic.model(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
    p.meter.forward(p.critic.n_params, ro)
    return values, algos.compute_value_targets(rewards, mask, values, token_rewards=token_rewards,
                                               gamma=a.gamma, lam=a.lam_critic)


def critic_step(p: Parts, mb: StepBatch, losses: list) -> None:
    """One critic update on a minibatch (0.5 * token-mean squared error to its targets)."""
    c = p.critic
    c.optimizer.zero_grad(set_to_none=True)
    losses.append(value_backward(c.model, mb, p.cfg.algo.micro_batches)["value_loss"])
    torch.nn.utils.clip_grad_norm_(c.model.parameters(), p.cfg.optim.grad_clip
                                   if p.cfg.optim.grad_clip > 0 else float("inf"))
    c.optimizer.step()
    p.meter.trained(c.n_params, mb)


def value_backward(critic: ValueModel, b: StepBatch, micro_batches: int) -> dict:
    """Accumulate the gradient of the value loss 0.5 * token-mean (V - target)^2 over the loss tokens
    of the minibatch (normaliser over the whole minibatch: micro-batch invariant)."""
    w = b.loss_mask / b.loss_mask.sum().clamp(min=1)
    total = 0.0
    for j in torch.arange(len(b)).chunk(micro_batches):
        mb = b.rows(j)
        v = critic(mb.prompt_ids, mb.prompt_mask, mb.response_ids, mb.response_mask)
        loss = 0.5 * (((v - mb.value_targets) ** 2) * w[j]).sum()
        loss.backward()
        total += loss.item()
    return {"value_loss": total}


def explained_variance(values: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> float | None:
    """1 - Var(target - V) / Var(target) over the masked tokens (1 = perfect, 0 = a constant)."""
    n = mask.sum()
    if n < 2:
        return None
    def var(x):
        mean = (x * mask).sum() / n
        return (((x - mean) * mask) ** 2).sum() / (n - 1)
    vt = var(targets)
    return None if vt == 0 else (1 - var(targets - values) / vt).item()


def pretrain(p: Parts, step_seed) -> list[float]:
    """VAPO value pretraining (Yue et al. 2025, arXiv 2504.05118): `algo.value_pretrain_steps`
    rollout batches of the fixed warm start train the critic alone, before step 1. Each batch
    goes through the step's own stages (sample, kept rows, loss mask, minibatches, critic update)
    with its Monte Carlo targets; the policy is not touched. Returns each batch's mean value loss.
    Resumable: `counters.value_pretrained` counts the batches done."""
    a, c = p.cfg.algo, p.counters
    losses_per_batch: list = []
    while c.value_pretrained < a.value_pretrain_steps:
        torch.manual_seed(step_seed(p.cfg.run.seed, -1 - c.value_pretrained))
        sampled = sample(p)
        ro, rewards, scores = sampled.kept_rows()
        if len(sampled.kept):
            mask = ro.response_mask.float()
            _, targets = critic_targets(p, ro, rewards, mask, None)
            b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                          loss_mask=loss_mask_of(ro, a.mask_truncated), adv=torch.zeros_like(mask),
                          logp_old=ro.logprobs, correct=scores > 0, value_targets=targets)
            losses: list = []
            for idx in minibatch_rows(len(sampled.kept) // p.cfg.rollout.group_size, a.epochs,
                                      a.minibatches, p.cfg.rollout.group_size):
                critic_step(p, b.rows(idx), losses)
            losses_per_batch.append(sum(losses) / len(losses))
        c.value_pretrained += 1
    return losses_per_batch
