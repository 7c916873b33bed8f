"""What a run measures: the compute counters and the one meter that moves them, the train row of
each step, the mismatch statistics, and the TensorBoard copy of metrics.jsonl.

Compute is counted the ScaleRL way (the x-axis of the fitted curve): 2N FLOPs per token forwarded
(sampling, a recomputed pi_old, the reference, the critic's values) and 6N per token trained
(forward + backward), prompt tokens included, with N the model's parameters; every token the
sampler generated counts, kept or filtered. `ComputeMeter` is the only code that adds to them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .. import algos


@dataclass
class Counters:
    """The run's progress, checkpointed and restored whole (`state` in the checkpoint)."""
    step: int = 0
    cursor: int = 0              # raw index of the next training item (the data stream is a pure
    flops: float = 0.0           # function of it, so resuming is exact)
    tokens: int = 0
    wall_s: float = 0.0          # wall time of earlier attempts (a resumed run adds its own)
    eval_flops: float = 0.0
    value_pretrained: int = 0    # VAPO value-pretraining batches done
    offline_state: dict = field(default_factory=dict)  # what an offline loss carries (kto_ema)
    entropy_coef: float | None = None  # the entropy bonus coefficient of the next step (None:
    #                                    algo.entropy_coef; moved by algo.entropy_control)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Counters":
        return cls(**d)


def forward_flops(n_params: int, tokens: int) -> int:
    """A forward pass: 2N FLOPs per token (ScaleRL's and Kaplan et al.'s 2N rule)."""
    return 2 * n_params * tokens


def train_flops(n_params: int, tokens: int) -> int:
    """A forward and a backward pass: 6N FLOPs per token."""
    return 6 * n_params * tokens


class ComputeMeter:
    """Every compute increment of a run (see the module docstring); the warm-up, which keeps its
    own total, uses the same two formulas."""

    def __init__(self, counters: Counters):
        self.c = counters

    def generated(self, n_params: int, ro) -> None:
        """A rollout's sampling: 2N per prompt and response token; its tokens count as data."""
        self.forward(n_params, ro)
        self.c.tokens += ro.n_tokens

    def forward(self, n_params: int, ro) -> None:
        """One teacher-forced forward pass over a rollout (pi_old, reference, critic values)."""
        self.c.flops += forward_flops(n_params, int(ro.prompt_mask.sum()) + ro.n_tokens)

    def trained(self, n_params: int, b) -> None:
        """One forward + backward over a minibatch's prompt and response tokens."""
        self.c.flops += train_flops(n_params, int(b.prompt_mask.sum()) + int(b.response_mask.sum()))

    def evaluated(self, n_params: int, gen_tokens: int) -> None:
        self.c.eval_flops += forward_flops(n_params, gen_tokens)


def mismatch_stats(abs_log_ratio_sum, tokens, max_abs) -> dict:
    """The rollout/train mismatch |log pi_trainer(y_t) - log pi_sampler(y_t)| under the sampling
    weights: its mean over the measured tokens and its maximum. The one definition for both ways
    of measuring it: with a recomputed pi_old, every response token of the step (tensor sums,
    float32); with the sampler's log-probs as pi_old, the tokens of the step's first update (its
    ratio, before the first optimizer step, is exactly that mismatch; Python sums)."""
    return {"mean": float(abs_log_ratio_sum / max(tokens, 1.0)), "max": float(max_abs)}


def recomputed_mismatch(logp_train: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor) -> dict:
    lr = algos.mismatch_log_ratio(logp_train, logp_sampler, mask).abs()
    return mismatch_stats(lr.sum(), mask.sum(), lr.max())


def mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def per_token(sums: dict, key: str) -> float | None:
    """A per-token mean over every update of the step, from policy_backward's sums."""
    return sums[key] / sums["tokens"] if sums.get("tokens") else None


def train_row(step: int, sampled, kept: int, lag: int, upd, prep, *, group_size: int,
              with_reference: bool, pos_nll: bool, sync_s: float, optimizer_lr: float,
              dt: float) -> dict:
    """The `kind = train` row of metrics.jsonl for one step. `sampled`: the step's rollout
    (every sampled response, kept or filtered), `upd`: the update statistics, `prep`: what
    `prepare` measured (explained variance, mismatch)."""
    ro_all, scores_all, rewards_all = sampled.rollout, sampled.scores, sampled.rewards
    correct = scores_all > 0
    lens = ro_all.lengths.float()
    # incorrect responses in groups with both outcomes (the groups where 1/|o_i| acts)
    wrong_mixed = ~correct & algos.informative_groups(correct, group_size).repeat_interleave(group_size)
    sums, mis = upd.sums, prep.mismatch
    row = {"kind": "train", "step": step,
            "rollout/reward_mean": rewards_all.mean().item(),
            "rollout/pass_rate": correct.float().mean().item(),
            "rollout/response_len": lens.mean().item(),
            "rollout/response_len_correct": lens[correct].mean().item() if correct.any() else None,
            "rollout/response_len_incorrect": lens[~correct].mean().item() if (~correct).any() else None,
            "rollout/response_len_incorrect_mixed":
                lens[wrong_mixed].mean().item() if wrong_mixed.any() else None,
            "rollout/truncated_frac": ro_all.truncated.float().mean().item(),
            "rollout/zero_var_groups": (~algos.informative_groups(scores_all, group_size)).float().mean().item(),
            "rollout/gen_rounds": sampled.rounds, "rollout/kept_groups": kept,
            "rollout/policy_lag": lag,
            "loss/policy": mean(upd.loss), "policy/entropy": per_token(sums, "entropy"),
            "policy/clip_frac": per_token(sums, "clipped"),
            "policy/approx_kl": per_token(sums, "approx_kl"),
            "policy/log_ratio_abs_mean": per_token(sums, "abs_log_ratio"),
            "policy/log_ratio_abs_max": sums.get("max_abs_log_ratio"),
            "loss/kl": per_token(sums, "kl_ref") if with_reference else None,
            "loss/value": mean(upd.value_loss), "value/explained_var": prep.explained_var,
            "loss/pos_nll": sums["pos_nll"] / len(upd.loss) if pos_nll and upd.loss else None,
            "rollout/mismatch_log_ratio_abs_mean": mis.get("mean"),
            "rollout/mismatch_log_ratio_abs_max": mis.get("max"),
            "rollout/correction_weight_mean": mis.get("weight"),
            "perf/weight_sync_s": sync_s,
            "policy/grad_norm": mean(upd.grad_norm), "optim/lr": optimizer_lr,
            "perf/step_s": dt, "perf/tokens_per_s": ro_all.n_tokens / max(dt, 1e-9)}
    # columns of choices that are off by default appear only when they act (so a run that does
    # not use them writes the rows it always wrote)
    if "opm_seqs" in sums:  # off-policy sequence mask: the fraction of responses dropped
        row["policy/off_policy_masked_frac"] = sums["opm_masked"] / max(sums["opm_seqs"], 1.0)
    if "entropy_bonus" in sums:  # the bonus term sum(w * H), mean over the step's updates
        row["loss/entropy_bonus"] = sums["entropy_bonus"] / max(len(upd.loss), 1)
    if "routing_counted" in sums:  # MoE: response tokens routed differently from the sampler
        row["moe/routing_changed_frac"] = sums["routing_changed"] / max(sums["routing_counted"], 1.0)
    if ro_all.forced is not None:  # forced length interruptions: the fraction of responses cut
        row["rollout/interrupted_frac"] = ro_all.forced.any(-1).float().mean().item()
    return row


class TensorBoard:
    """TensorBoard scalars (same names as metrics.jsonl), and the run's resolved config: as text
    (the YAML of config.yaml, TEXT tab) and as hparams (every scalar key, HPARAMS tab, with the
    final eval pass rates as its metrics), so the event file alone says what ran."""

    def __init__(self, path: Path, purge_step: int):
        from torch.utils.tensorboard import SummaryWriter
        # written to disk every 10 s and at close (not every step: ~1% of a tiny model's step);
        # metrics.jsonl, written every step, stays the record
        self.w = SummaryWriter(str(path), purge_step=purge_step, flush_secs=10)

    def log(self, row: dict) -> None:
        for k, v in row.items():
            if "/" in k and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.w.add_scalar(k, v, row["step"])

    def log_config(self, config: dict, yaml_text: str) -> None:
        """Written once, at step 0 of a fresh run (a resumed run already has it)."""
        from torch.utils.tensorboard.summary import hparams
        self.w.add_text("config", "```yaml\n" + yaml_text + "```", 0)
        flat = {k: (v if isinstance(v, (int, float, str, bool)) else str(v))
                for k, v in _flatten(config).items()}
        exp, ssi, sei = hparams(flat, {k: 0.0 for k in HPARAM_METRICS})
        for summary in (exp, ssi, sei):
            self.w.file_writer.add_summary(summary, 0)

    def close(self) -> None:
        self.w.close()


# the scalars the hparams table shows beside each run's config
HPARAM_METRICS = ("eval/in_dist/pass@1", "eval/held_out/pass@1")


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = "none" if v is None else v
    return out



WANDB_ENV = "RLABLATE_WANDB"


class WandbLog:
    """Optional Weights & Biases logging: the same rows under the same names as metrics.jsonl
    (train rows and eval rows, at their RL step) and the resolved config as the W&B run config.

    On when the environment names a project: ``RLABLATE_WANDB=<project>`` (W&B's own variables
    apply: ``WANDB_MODE=offline`` writes ``<run_dir>/wandb/`` without a network, ``wandb sync``
    uploads it later; ``WANDB_ENTITY``, ``WANDB_API_KEY``). It is not a config key on purpose: it
    changes no result, so it stays out of the run id and of config.yaml, and a sweep can turn it
    on for a re-run of finished runs' neighbours without forking their ids. The W&B run id is the
    run id, with ``resume="allow"``: a resumed run continues the same W&B run. Needs the extra
    ``pip install rlablate[wandb]``."""

    def __init__(self, project: str, run_dir: Path, config: dict, run_id: str, name: str):
        try:
            import wandb
        except ImportError:
            raise ImportError(f"{WANDB_ENV}={project}: W&B logging needs the wandb package "
                              f"(pip install 'rlablate[wandb]')") from None
        self.run = wandb.init(project=project, id=run_id, name=name, dir=str(run_dir),
                              config=config, resume="allow")

    @classmethod
    def from_env(cls, run_dir: Path, config: dict, run_id: str, name: str):
        import os
        project = os.environ.get(WANDB_ENV, "").strip()
        return cls(project, run_dir, config, run_id, name) if project else None

    def log(self, row: dict) -> None:
        values = {k: v for k, v in row.items() if "/" in k and isinstance(v, (int, float))
                  and not isinstance(v, bool) and math.isfinite(v)}
        self.run.log(values, step=int(row["step"]))

    def close(self) -> None:
        self.run.finish()