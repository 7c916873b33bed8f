"""The one table of config-error cases (data only; test_config_load.py and test_config_rules.py run
it). Each case: the overrides, the substring the one-line message must contain (from the key on,
so a different key or value cannot match), and the room that must raise it: `load` (keys, types,
ranges, YAML, overrides) or `rules` (combinations). `unused=True` marks a key that has no effect
under the chosen values: its LAST override is that key, and without it (or at its default) the
rest of the case loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.tasks.math_problems import DATA_DIR

SAMPLE = [f"task.train_path={DATA_DIR / 'gsm8k_sample_train.jsonl'}",
          f"task.in_dist_path={DATA_DIR / 'gsm8k_sample_test.jsonl'}",
          f"task.held_out_path={DATA_DIR / 'math_sample_test.jsonl'}"]
MATH = ["task.name=math", *SAMPLE]
PRETRAINED = ["model.scale=pretrained", "model.path=/models/x"]
VLLM = ["rollout.engine=vllm", "run.device=cuda"]
NO_WARMUP = ["warmup.max_steps=0"]
REINFORCE = ["algo.surrogate=reinforce", "algo.minibatches=1"]
TIS = ["algo.old_logprobs=recompute", "algo.rollout_correction=tis"]
OFFLINE = ["algo.paradigm=offline", "offline.n_prompts=64"]
HARD = DATA_DIR / "gsm_hard_sample_test.jsonl"  # a second held-out file (issue 17, part 3)


@dataclass(frozen=True)
class Case:
    overrides: tuple
    message: str
    room: str              # "load" or "rules"
    unused: bool = False   # a no-effect key: the last override


def L(*overrides: str, msg: str) -> Case:
    return Case(tuple(overrides), msg, "load")


def R(*overrides: str, msg: str) -> Case:
    return Case(tuple(overrides), msg, "rules")


def U(*overrides: str, msg: str) -> Case:
    return Case(tuple(overrides), msg, "rules", unused=True)


def E(*overrides: str, msg: str) -> Case:
    """A valid config that names something this machine lacks (check_environment refuses it)."""
    return Case(tuple(overrides), msg, "environment")


CASES = [
    # ---- load: keys, types, ranges, overrides -----------------------------------------------------
    L("optim.lrr=1e-3", msg="unknown key 'optim.lrr'; allowed under optim: lr, weight_decay, beta1, "
      "beta2, grad_clip, warmup_steps, schedule (did you mean 'optim.lr'?)"),
    L("optimm.lr=1e-3", msg="unknown key 'optimm'; allowed under the top level: run, model, task, "
      "eval, warmup, rollout, algo, optim, train, offline (did you mean 'optim'?)"),
    L("lr=3", msg="unknown key 'lr'; allowed under the top level: run, model"),
    L("eval.in_dist.n_itemz=3", msg="unknown key 'eval.in_dist.n_itemz'; allowed under eval.in_dist: "
      "n_items, k (did you mean 'eval.in_dist.n_items'?)"),
    L("optim.lr=abc", msg="optim.lr = 'abc': expected a float"),
    L("optim.lr=0", msg="optim.lr = 0.0: must be > 0"),
    L("optim.lr=nan", msg="optim.lr = nan: expected a finite number"),
    L("train.steps=1.5", msg="train.steps = 1.5: expected an integer"),
    L("train.steps=-1", msg="train.steps = -1: must be >= 0"),
    L("task.cot=maybe", msg="task.cot = 'maybe': expected true or false"),
    L("rollout.top_p=1.5", msg="rollout.top_p = 1.5: must be > 0 and <= 1"),
    L("warmup.target_pass_rate=1.5", msg="warmup.target_pass_rate = 1.5: must be >= 0 and <= 1"),
    L("model.scale=tiny-2m", msg="model.scale = 'tiny-2m': allowed values are tiny-0.3m, tiny-1m, "
      "tiny-4m, tiny-moe, pretrained"),
    L("model.dtype=fp16", msg="model.dtype = 'fp16': allowed values are fp32, bf16"),
    L("algo.preset=grpoo", msg="algo.preset = 'grpoo': allowed values are cispo, dapo, dpo, dpop, dppo_kl, "
      "dppo_tv, dr_grpo, gmpo, grpo, gspo, ipo, kto, luspo, minpro, ppo, reinforce_pp, "
      "reinforce_pp_baseline, rloo, sapo, scalerl, sft, sgrpo, simpo, vapo, vespo, none (did you mean 'grpo'?)"),
    L("algo.preset=7", msg="algo.preset = 7: expected a string"),
    L("algo.deviates_from_preset=[]", msg="algo.deviates_from_preset is derived from the config; do "
      "not set it"),
    L("optim=3", msg="optim = 3: expected a mapping of keys"),
    L("optim.lr", msg="override 'optim.lr': expected key=value, e.g. optim.lr=3e-4"),
    L("optim..lr=3", msg="override 'optim..lr=3': 'optim..lr' is not a dotted key like optim.lr"),
    L("preset=dapo", "algo.preset=gspo", msg="preset = 'dapo': also given as algo.preset = 'gspo'; "
      "set one of them"),
    # issue 20, first day: accepted silently before
    L("algo.clip_low=1.5", msg="algo.clip_low = 1.5: must be >= 0 and <= 1"),
    L("run.threads=-1", msg="run.threads = -1: must be >= 0"),
    L("rollout.max_new_tokens=100000", "model.max_positions=100100",
      msg="model.max_positions = 100100: must be >= 16 and <= 4096"),

    # ---- rules: choices and names -----------------------------------------------------------------
    R("algo.advantage=group_nrm", msg="algo.advantage = 'group_nrm': allowed values are batch_norm, "
      "gae, group_mean, group_mean_batch_std, group_mean_batch_std_seq, group_norm, rloo (did you "
      "mean 'group_norm'?)"),
    R("algo.kl=k4", msg="algo.kl = 'k4': allowed values are k1, k2, k3, none"),
    R("algo.rollout_correction=tys", "algo.old_logprobs=recompute",
      msg="algo.rollout_correction = 'tys': allowed values are mask, none, seq_mask, seq_tis, tis "
      "(did you mean 'tis'?)"),
    R("algo.off_policy_mask=dsv3", msg="algo.off_policy_mask = 'dsv3': allowed values are dsv32, none "
      "(did you mean 'dsv32'?)"),
    R("algo.surrogate=grpo", msg="algo.surrogate = 'grpo': allowed values are cispo, cispo_band, "
      "dppo_kl, dppo_tv, gmpo, ppo_clip, reinforce, sapo"),
    R("run.name=../x", msg="run.name = '../x': letters, digits and _ . + - only, not starting with "
      "'.' (it names a directory under run.results_dir)"),
    R("run.sweep=.hidden", msg="run.sweep = '.hidden': letters, digits and _ . + - only"),
    R("run.results_dir=", msg="run.results_dir = '': must name a directory (default 'results')"),
    R("run.cache_dir=", msg="run.cache_dir = '': must name a directory (default '.cache/rlablate')"),
    # ---- rules: model, numerics, LoRA
    R("model.scale=pretrained", msg="model.path = None: required when model.scale = pretrained"),
    R("model.path=/x", msg="model.path = '/x': only allowed with model.scale = pretrained (got tiny-1m)"),
    U(*PRETRAINED, "model.arch=llama", msg="model.arch = 'llama': only used by the tiny models built "
      "from a config (model.scale = tiny-0.3m, tiny-1m, tiny-4m, tiny-moe), not model.scale = pretrained"),
    U(*PRETRAINED, "model.max_positions=4096", msg="model.max_positions = 4096: only used by the tiny "
      "models built from a config"),
    R("model.param_dtype=bf16", msg="model.param_dtype = 'bf16': needs model.dtype = bf16 (bf16 "
      "weights under fp32 compute would only add casts)"),
    U("model.lora_alpha=32", msg="model.lora_alpha = 32.0: only used with LoRA (model.lora_rank > 0)"),
    U("model.lora_dropout=0.1", msg="model.lora_dropout = 0.1: only used with LoRA"),
    U("model.lora_target_modules=[q_proj]", msg="model.lora_target_modules = ['q_proj']: only used "
      "with LoRA"),
    R("model.lora_rank=4", "model.lora_target_modules=[]", msg="model.lora_target_modules = []: "
      "expected a non-empty list of module names, e.g. [q_proj, v_proj]"),
    # ---- rules: engine
    # (vLLM on the CPU and vLLM with algo.fp32_lm_head are valid since vLLM's CPU build and its
    # head_dtype override: tests/test_config_rules.py loads both)
    R(*VLLM, "algo.rollout_lag=2", msg="algo.rollout_lag = 2: the simulated lag keeps a second HF "
      "model as sampler; use rollout.engine = hf"),
    U("rollout.gpu_memory_utilization=0.5", msg="rollout.gpu_memory_utilization = 0.5: only used "
      "with rollout.engine = vllm"),
    # ---- rules: task
    U(SAMPLE[0], msg="task.train_path = '"),
    U("task.chat_template=true", msg="task.chat_template = True: only used with task.name = math"),
    U(*MATH, "task.n_terms=3", msg="task.n_terms = 3: only used with task.name = chain_sum"),
    U(*MATH, "task.held_out_in_warmup=true", msg="task.held_out_in_warmup = True: only used with "
      "task.name = chain_sum"),
    R("task.name=math", msg="task.train_path = None: required when task.name = math (a .jsonl or "
      ".parquet file; schema in docs/tasks.md)"),
    R(*MATH, "task.prompt_template=Solve it", msg="task.prompt_template = 'Solve it': must contain "
      "{problem}"),
    R(*MATH, "task.chat_template=true", msg="task.chat_template = true: tiny models have no chat "
      "template; needs model.scale = pretrained"),
    R("task.min_digits=3", "task.max_digits=2", msg="task.min_digits = 3: must be <= task.max_digits (2)"),
    R("task.held_out=first_two_ge_50", "task.max_digits=1", msg="task.held_out = 'first_two_ge_50': "
      "needs task.max_digits >= 2 (two-digit operands must exist)"),
    R("rollout.max_new_tokens=200", msg="model.max_positions = 128: prompt + rollout.max_new_tokens "
      "needs 209"),
    U("task.hard_n_terms=6", msg="task.hard_n_terms = 6: no effect with task.hard_share = 0"),
    U("task.hard_max_digits=1", msg="task.hard_max_digits = 1: no effect with task.hard_share = 0"),
    U(*MATH, "task.hard_share=0.4", msg="task.hard_share = 0.4: only used with task.name = chain_sum"),
    R("task.hard_share=0.4", "task.min_digits=2", "task.hard_max_digits=1",
      msg="task.hard_max_digits = 1: must be >= task.min_digits (2)"),
    R("task.hard_share=0.4", "task.hard_n_terms=16", "task.hard_max_digits=4",
      msg="model.max_positions = 128: prompt + rollout.max_new_tokens needs 131"),
    # ---- rules: eval and warm-up
    R("eval.temperature=0", msg="eval.in_dist.k = 4: greedy eval (eval.temperature = 0) is "
      "deterministic, so k must be 1"),
    R("eval.temperature=0", "eval.in_dist.k=1", msg="eval.held_out.k = 4: greedy eval"),
    U(*NO_WARMUP, "warmup.lr=0.01", msg="warmup.lr = 0.01: the warm-up does not train when "
      "warmup.max_steps = 0"),
    U(*NO_WARMUP, "warmup.min_steps=5", msg="warmup.min_steps = 5: the warm-up does not train"),
    U(*NO_WARMUP, "warmup.batch_size=8", msg="warmup.batch_size = 8: the warm-up does not train"),
    U(*NO_WARMUP, "warmup.check_every=5", msg="warmup.check_every = 5: the warm-up does not train"),
    U(*NO_WARMUP, "warmup.check_items=8", msg="warmup.check_items = 8: the warm-up does not train"),
    U(*NO_WARMUP, "task.held_out_in_warmup=true", msg="task.held_out_in_warmup = True: the warm-up "
      "does not train when warmup.max_steps = 0"),
    U(*PRETRAINED, *NO_WARMUP, "warmup.seed=3", msg="warmup.seed = 3: model.scale = pretrained with "
      "warmup.max_steps = 0 starts from model.path itself (no warm start is built)"),
    R("warmup.max_steps=5", "warmup.min_steps=10", msg="warmup.min_steps = 10: must be <= "
      "warmup.max_steps (5)"),
    # ---- rules: batch shape and sampling
    R("algo.minibatches=3", msg="algo.minibatches = 3: must divide rollout.prompts_per_step (32, 256 "
      "sequences) so every minibatch holds whole groups"),
    R("algo.minibatches=64", msg="algo.minibatches = 64: must be <= rollout.prompts_per_step (32); "
      "minibatches split by prompt so groups stay whole"),
    R("algo.micro_batches=200", msg="algo.micro_batches = 200: must be <= the sequences per "
      "minibatch (128)"),
    R("rollout.group_size=1", msg="rollout.group_size = 1: advantage 'group_norm' needs groups of "
      ">= 2 samples per prompt"),
    R("rollout.top_p=0.9", msg="algo.old_logprobs = 'sampler': the sampler's log-probs under top_p = "
      "0.9 are not the policy's; use old_logprobs=recompute"),
    R("algo.overlong_cache=48", msg="algo.overlong_cache = 48: must be < rollout.max_new_tokens (48), "
      "the L_max of the soft overlong punishment"),
    # ---- rules: the objective
    R("algo.ratio=sequence", "algo.aggregation=token_mean", msg="algo.aggregation = 'token_mean': "
      "with algo.ratio = 'sequence' every token of a response carries the same response-level term, "
      "so this aggregation weights each response by its length; use seq_mean_token_mean (or "
      "seq_sum_mean, LUSPO's deliberate length weight)"),
    R("algo.surrogate=gmpo", "algo.aggregation=token_mean", msg="algo.aggregation = 'token_mean': "
      "with algo.surrogate = 'gmpo' every token of a response carries the same response-level term"),
    R("algo.surrogate=gmpo", "algo.ratio=sequence", msg="algo.ratio = 'sequence': surrogate 'gmpo' "
      "needs the per-token log-ratio (it clips each token before averaging); use a per-token ratio"),
    R("algo.ratio=sequence", "algo.aggregation=seq_sum_constant", msg="algo.aggregation = "
      "'seq_sum_constant': with algo.ratio = 'sequence'"),
    R("algo.ratio=sequence", "algo.aggregation=prompt_mean", msg="algo.aggregation = 'prompt_mean': "
      "with algo.ratio = 'sequence'"),
    U("algo.advantage=group_mean", "algo.adv_eps=1e-3", msg="algo.adv_eps = 0.001: advantage "
      "'group_mean' divides by no std (adv_eps acts with batch_norm, gae, group_mean_batch_std, "
      "group_mean_batch_std_seq, group_norm)"),
    U("algo.advantage=rloo", "algo.adv_eps=1e-3", msg="algo.adv_eps = 0.001: advantage 'rloo' "
      "divides by no std"),
    U(*REINFORCE, "algo.clip_high=0.28", msg="algo.clip_high = 0.28: surrogate 'reinforce' does not "
      "read it (read by cispo_band, gmpo, ppo_clip)"),
    U(*REINFORCE, "algo.clip_low=0.1", msg="algo.clip_low = 0.1: surrogate 'reinforce' does not read it"),
    U("algo.surrogate=cispo", "algo.dual_clip=3", msg="algo.dual_clip = 3.0: surrogate 'cispo' does "
      "not read it (read by ppo_clip)"),
    # CISPO's cap is absolute (weight_cap); the old band reading of clip_high is refused, not reused
    U("algo.preset=cispo", "algo.clip_high=4", msg="algo.clip_high = 4.0: surrogate 'cispo' does not "
      "read it (read by cispo_band, gmpo, ppo_clip)"),
    U("algo.weight_cap=5", msg="algo.weight_cap = 5.0: surrogate 'ppo_clip' does not read it (read "
      "by cispo, dppo_kl, dppo_tv)"),
    U("algo.tau_neg=2", msg="algo.tau_neg = 2.0: surrogate 'ppo_clip' does not read it (read by sapo)"),
    U("algo.surrogate=sapo", "algo.clip_high=0.28", msg="algo.clip_high = 0.28: surrogate 'sapo' does "
      "not read it"),
    U("algo.preset=dppo_tv", "algo.clip_low=0.3", msg="algo.clip_low = 0.3: surrogate 'dppo_tv' does "
      "not read it"),
    U("algo.div_high=0.1", msg="algo.div_high = 0.1: surrogate 'ppo_clip' does not read it (read by "
      "dppo_kl, dppo_tv)"),
    L("algo.weight_cap=0", msg="algo.weight_cap = 0.0: must be > 0"),
    L("algo.tau_pos=0", msg="algo.tau_pos = 0.0: must be > 0"),
    L("algo.entropy_coef=-0.01", msg="algo.entropy_coef = -0.01: must be >= 0"),
    R("algo.dual_clip=0.5", msg="algo.dual_clip = 0.5: must be > 1 (or 0 = off); the floor c*A "
      "binds only where the ratio exceeds c"),
    U(*REINFORCE, "algo.ratio=sequence", msg="algo.ratio = 'sequence': surrogate 'reinforce' uses no "
      "importance ratio; leave algo.ratio = token"),
    R("algo.surrogate=reinforce", msg="algo.minibatches = 2, algo.epochs = 1: surrogate 'reinforce' "
      "has no importance ratio, so every update after the first would use off-policy samples "
      "uncorrected; use 1 and 1"),
    # ---- rules: critic
    U("algo.lam_alpha=0.05", msg="algo.lam_alpha = 0.05: only used with a critic (algo.advantage = "
      "gae), not 'group_norm'"),
    U("algo.value_pretrain_steps=5", msg="algo.value_pretrain_steps = 5: only used with a critic"),
    U("algo.advantage=rloo", "algo.gamma=0.99", msg="algo.gamma = 0.99: only used with a critic "
      "(algo.advantage = gae), not 'rloo'"),
    U("algo.critic_lr=0.01", msg="algo.critic_lr = 0.01: only used with a critic"),
    U("algo.advantage=gae", "algo.lam_alpha=0.05", "algo.lam_policy=0.9", msg="algo.lam_policy = 0.9: "
      "unused when algo.lam_alpha = 0.05 (length-adaptive lambda_policy); leave it at its default"),
    # ---- rules: KL
    R("algo.kl_coef=0.1", msg="algo.kl_coef = 0.1: algo.kl = none (no KL term); set an estimator "
      "(k1, k2, k3) or kl_coef = 0"),
    U("algo.kl_mode=reward", msg="algo.kl_mode = 'reward': algo.kl = none (no KL term)"),
    R("algo.kl=k3", msg="algo.kl_coef = 0.0: algo.kl = 'k3' needs a coefficient > 0 (or algo.kl = "
      "none, which also skips the reference model)"),
    R("algo.kl=k1", "algo.kl_coef=0.1", msg="algo.kl = 'k1': as a loss term its expected gradient "
      "is zero (E_pi[grad log pi] = 0), so it regularises nothing; use kl_mode = reward, or k2/k3 "
      "as a loss"),
    # ---- rules: off-policy
    R("algo.rollout_lag=2", "algo.old_logprobs=recompute", msg="algo.old_logprobs = 'recompute': "
      "with algo.rollout_lag = 2 pi_old must be the behaviour policy (sampler)"),
    R(*REINFORCE, "algo.rollout_lag=2", msg="algo.rollout_lag = 2: surrogate 'reinforce' has no "
      "importance ratio to correct stale rollouts; use 0"),
    R("algo.rollout_correction=tis", msg="algo.rollout_correction = 'tis': needs algo.old_logprobs "
      "= recompute (with the sampler's log-probs as pi_old"),
    R("algo.rollout_correction=mask", msg="algo.rollout_correction = 'mask': needs "
      "algo.old_logprobs = recompute"),
    U("algo.rollout_correction_cap=3", msg="algo.rollout_correction_cap = 3.0: only used when "
      "algo.rollout_correction is mask or seq_mask or seq_tis or tis (it is none)"),
    U(*TIS, "algo.rollout_correction_floor=0.2", msg="algo.rollout_correction_floor = 0.2: only used "
      "when algo.rollout_correction is mask (it is tis); the floor is used by mask"),
    # sequence-level corrections need the trainer's recomputed pi_old, as the token-level ones
    R("algo.rollout_correction=seq_tis", msg="algo.rollout_correction = 'seq_tis': needs "
      "algo.old_logprobs = recompute"),
    R("algo.rollout_correction=seq_mask", msg="algo.rollout_correction = 'seq_mask': needs "
      "algo.old_logprobs = recompute"),
    U("algo.old_logprobs=recompute", "algo.rollout_correction=seq_mask",
      "algo.rollout_correction_floor=0.2", msg="algo.rollout_correction_floor = 0.2: only used when "
      "algo.rollout_correction is mask (it is seq_mask)"),
    U("algo.off_policy_mask_threshold=0.1", msg="algo.off_policy_mask_threshold = 0.1: only used when "
      "algo.off_policy_mask is dsv32 (it is none)"),
    # ---- rules: group filter (and the order of the batch std relative to it)
    R("algo.adv_batch_scope=all", msg="algo.adv_batch_scope = 'all': allowed values are kept, sampled"),
    R("algo.adv_batch_scope=sampled", msg="algo.adv_batch_scope = 'sampled': no effect with "
      "algo.group_filter = none (nothing is dropped)"),
    R("algo.group_filter=zero_variance", "algo.adv_batch_scope=sampled", msg="algo.adv_batch_scope = "
      "'sampled': advantage 'group_norm' is a function of each group alone (no batch statistic)"),
    R("algo.preset=reinforce_pp_baseline", "algo.group_filter=zero_variance", "algo.adv_batch_scope=sampled",
      msg="algo.adv_batch_scope = 'sampled': the dropped groups would need critic values / reference "
      "log-probs"),
    U("algo.max_gen_rounds=4", msg="algo.max_gen_rounds = 4: refilling needs a filter "
      "(algo.group_filter = zero_variance); with none every round is kept"),
    # ---- rules: forced length interruptions (ScaleRL)
    U("rollout.interrupt_phrase=x", msg="rollout.interrupt_phrase = 'x': only used when "
      "rollout.think_budget > 0"),
    R("rollout.think_budget=48", msg="rollout.think_budget = 48: must be < rollout.max_new_tokens (48)"),
    U("model.scale=tiny-moe", "model.arch=llama", msg="model.arch = 'llama': no effect with "
      "model.scale = tiny-moe (a Qwen2-MoE model)"),
    R("algo.routing_replay=r3", msg="algo.routing_replay = 'r3': model.scale = tiny-1m is dense"),
    R("algo.routing_replay=r3", "model.scale=tiny-moe", "rollout.engine=vllm", msg="algo.routing_replay "
      "= 'r3': rollout.engine = vllm does not record the experts it chose (vLLM's "
      "enable_return_routed_experts needs its Model Runner V2, which needs Triton"),
    # ---- rules: adaptive entropy control (Skywork-OR1)
    R("algo.entropy_control=target", msg="algo.entropy_control = 'target': allowed values are "
      "adaptive, fixed"),
    U("algo.entropy_target=0.5", msg="algo.entropy_target = 0.5: only used when "
      "algo.entropy_control is adaptive (it is fixed)"),
    U("algo.entropy_coef_step=0.001", msg="algo.entropy_coef_step = 0.001: only used when "
      "algo.entropy_control is adaptive (it is fixed)"),
    U("algo.entropy_coef_max=0.01", msg="algo.entropy_coef_max = 0.01: only used when "
      "algo.entropy_control is adaptive (it is fixed)"),
    R("algo.entropy_control=adaptive", "algo.entropy_coef=0.01", msg="algo.entropy_coef = 0.01: the "
      "start value of an adaptive coefficient must be <= algo.entropy_coef_max (0.005)"),
    L("algo.entropy_target=0", msg="algo.entropy_target = 0.0: must be > 0"),
    # ---- rules: prompt retirement (No-Positive-Resampling) needs a finite training set
    R("algo.retire=no_positive", msg="algo.retire = 'no_positive': needs a finite, cycling training "
      "set (task.train_items > 0)"),
    U("algo.retire_threshold=0.8", msg="algo.retire_threshold = 0.8: only used when algo.retire is "
      "no_positive (it is none)"),
    R("algo.retire=all", msg="algo.retire = 'all': allowed values are no_positive, none"),
    # ---- rules: the paradigm (issue 17): offline losses, their knobs, the finite training split
    R("algo.paradigm=batch", msg="algo.paradigm = 'batch': allowed values are offline, online"),
    R("algo.offline_loss=orpo", msg="algo.offline_loss = 'orpo': allowed values are dpo, dpop, ipo, "
      "ipo_token_mean, kto, kto_ema, none, sft, sft_gold, simpo"),
    R("algo.offline_loss=dpo", msg="algo.offline_loss = 'dpo': an offline loss needs algo.paradigm "
      "= offline (it is online)"),
    R("algo.paradigm=offline", "offline.n_prompts=8", msg="algo.offline_loss = 'none': "
      "algo.paradigm = offline needs an offline loss (dpo, dpop, ipo"),
    R("algo.preset=dpo", msg="offline.n_prompts = 0: algo.paradigm = offline trains on a finite "
      "training split"),
    L(*OFFLINE, "algo.offline_loss=dpo", "algo.beta=0", msg="algo.beta = 0.0: must be > 0"),
    L(*OFFLINE, "algo.offline_loss=dpo", "algo.beta=-0.1", msg="algo.beta = -0.1: must be > 0"),
    L(*OFFLINE, "algo.offline_loss=kto_ema", "algo.kto_ema_alpha=1.5",
      msg="algo.kto_ema_alpha = 1.5: must be > 0 and <= 1"),
    L(*OFFLINE, "algo.offline_loss=dpo", "offline.samples=1", msg="offline.samples = 1: must be >= 2"),
    U("algo.beta=0.2", msg="algo.beta = 0.2: only used by the offline paradigm (algo.paradigm = offline)"),
    U("offline.samples=8", msg="offline.samples = 8: only used by the offline paradigm"),
    U(*OFFLINE, "algo.offline_loss=sft", "algo.beta=0.2", msg="algo.beta = 0.2: offline loss 'sft' "
      "does not read it (read by dpo, dpop, ipo, ipo_token_mean, kto, kto_ema, simpo)"),
    U(*OFFLINE, "algo.offline_loss=dpo", "algo.simpo_gamma=1.0", msg="algo.simpo_gamma = 1.0: offline "
      "loss 'dpo' does not read it (read by simpo)"),
    U(*OFFLINE, "algo.offline_loss=dpo", "algo.dpop_lambda=10", msg="algo.dpop_lambda = 10.0: offline "
      "loss 'dpo' does not read it (read by dpop)"),
    L(*OFFLINE, "algo.offline_loss=dpop", "algo.dpop_lambda=-1", msg="algo.dpop_lambda = -1.0: must be >= 0"),
    U(*OFFLINE, "algo.offline_loss=sft_gold", "offline.samples=4", msg="offline.samples = 4: offline "
      "loss 'sft_gold' trains on the reference answers (no self-play)"),
    U(*OFFLINE, "algo.offline_loss=dpo", "algo.clip_high=0.3", msg="algo.clip_high = 0.3: the offline "
      "paradigm does not run the RL objective"),
    U(*OFFLINE, "algo.offline_loss=dpo", "algo.kl=k3", msg="algo.kl = 'k3': the offline paradigm "
      "does not run the RL objective"),
    U(*OFFLINE, "algo.offline_loss=dpo", "rollout.group_size=4", msg="rollout.group_size = 4: the "
      "offline paradigm does not run the RL objective"),
    # ---- several held-out sets (issue 17, part 3): math's named files, chain_sum's countdown
    L(*MATH, "task.held_out_paths=[far]", msg="task.held_out_paths = ['far']: expected a mapping of "
      "names to non-empty strings, e.g. {far: data/far.jsonl}"),
    L(*MATH, "task.held_out_paths={far: 3}", msg="task.held_out_paths = {'far': 3}: expected a "
      "mapping of names to non-empty strings"),
    L(*MATH, "task.held_out_paths.far=", msg="task.held_out_paths = {'far': ''}: expected a mapping "
      "of names to non-empty strings"),
    R(*MATH, f"task.held_out_paths={{9far: {HARD}}}", "eval.held_out_sets=[9far]",
      msg="task.held_out_paths = {'9far': '" + str(HARD) + "'}: '9far' is not a valid set name (a "
      "letter, then letters, digits or _; at most 40 characters"),
    R(*MATH, f"task.held_out_paths.in_dist={HARD}", "eval.held_out_sets=[in_dist]",
      msg="'in_dist' clashes with the task's own split in_dist (reserved: train, warmup, "
      "warmup_check, in_dist, held_out)"),
    R(*MATH, f"task.held_out_paths.held_out={HARD}", msg="'held_out' clashes with the task's own "
      "split held_out"),
    R(*MATH, f"task.held_out_paths.far={HARD}", "eval.held_out_sets=[far, far]",
      msg="eval.held_out_sets = ['far', 'far']: 'far' is listed twice"),
    R(*MATH, "eval.held_out_sets=[far]", msg="eval.held_out_sets = ['far']: 'far' is not a held-out "
      "set of task.name = math (allowed: none; a math set is a file named in task.held_out_paths: "
      "{name: file})"),
    R(*MATH, f"task.held_out_paths.far={HARD}", "eval.held_out_sets=[far, hard]",
      msg="'hard' is not a held-out set of task.name = math (allowed: far; a math set is a file"),
    U(f"task.held_out_paths={{far: {HARD}}}", msg="task.held_out_paths = {'far': '" + str(HARD) + "'}: "
      "only used with task.name = math"),
    U(*MATH, f"task.held_out_paths={{far: {HARD}}}", msg="task.held_out_paths = {'far': '" + str(HARD) +
      "'}: 'far' is not listed in eval.held_out_sets (= []), so it would never be evaluated; list it "
      "there, or drop it"),
    R("eval.held_out_sets=[countdown, countdown]", msg="'countdown' is listed twice"),
    R("task.name=countdown", "eval.held_out_sets=[countdown]", msg="eval.held_out_sets = "
      "['countdown']: 'countdown' is not a held-out set of task.name = countdown (allowed: none)"),
    R("eval.held_out_sets=[countdown]", "model.max_positions=60", msg="model.max_positions = 60: "
      "prompt + rollout.max_new_tokens needs 63"),
    E(*MATH, "task.held_out_paths.far=/no/far.jsonl", "eval.held_out_sets=[far]",
      msg="task.held_out_paths.far = '/no/far.jsonl': no such file (a .jsonl or .parquet file: "
      "docs/tasks.md)"),
    E(*MATH, f"task.held_out_paths.far={DATA_DIR}", "eval.held_out_sets=[far]",
      msg=f"task.held_out_paths.far = '{DATA_DIR}': not a file"),
]
