"""Typed, strict run configuration.

A run is described by one `Config` (nested dataclasses). It is resolved in this order, each layer
overriding the previous one explicitly:

    dataclass defaults  ->  algo preset (harness/presets/<name>.yaml)  ->  YAML file  ->  CLI `a.b=v`

Unknown keys, wrong types, out-of-range values and invalid combinations raise `ConfigError` with one
line naming the key, the bad value and what is allowed. Nothing is written before the config is
valid. The resolved config (every field, defaults included) is saved with the run and is the record
of what ran.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import yaml

from .registry import suggest

PRESET_DIR = Path(__file__).parent / "presets"


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
    scale: Literal["tiny-0.3m", "tiny-1m", "tiny-4m", "pretrained"] = F(
        "tiny-1m", "tiny-* = random-init causal LM built from a transformers config (no download); "
        "pretrained = from_pretrained(model.path)")
    arch: Literal["qwen2", "llama"] = F("qwen2", "architecture of the tiny models")
    path: Optional[str] = F(None, "local path (or hub id where the network allows) of a pretrained "
                            "model and its tokenizer; required iff scale=pretrained")
    max_positions: int = F(128, "context length of tiny models (prompt + response)", lo=16)
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
    name: Literal["chain_sum", "math"] = F(
        "chain_sum", "chain_sum = procedural (reasoning-gym generator); math = GSM8K/MATH-style "
        "problems from local JSONL/Parquet files, checked by math-verify (docs/tasks.md)")
    train_path: Optional[str] = F(None, "math: training problems (.jsonl or .parquet)")
    in_dist_path: Optional[str] = F(None, "math: the in-distribution eval set (e.g. GSM8K test)")
    held_out_path: Optional[str] = F(None, "math: the held-out eval set (e.g. MATH when training "
                                     "on GSM8K)")
    prompt_template: str = F("{problem}\nPut the final answer in \\boxed{}.\n",
                             "math: the prompt; {problem} is replaced by the item's problem")
    chat_template: bool = F(False, "math: wrap the prompt in the tokenizer's chat template "
                            "(instruct models)")
    n_terms: int = F(2, "operands per chain", lo=2, hi=8)
    min_digits: int = F(1, "fewest digits per operand", lo=1, hi=4)
    max_digits: int = F(2, "most digits per operand", lo=1, hi=4)
    cot: bool = F(True, "reference answers (warm start) show the running sums: '12+7=19,19+35=54.'")
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
        "= vLLM in the trainer's process on the same GPU (extra [gpu]), weights synced after each "
        "step (docs/gpu.md)")
    gpu_memory_utilization: float = F(0.3, "vllm: fraction of the GPU's memory vLLM may take "
                                      "(weights + KV cache); the trainer lives in the rest",
                                      lo=0, hi=1, lo_open=True)
    prompts_per_step: int = F(32, "prompts per RL step", lo=1)
    group_size: int = F(8, "samples per prompt (G)", lo=1)
    max_new_tokens: int = F(48, "generation limit; longer responses are truncated", lo=1)
    temperature: float = F(1.0, "sampling temperature", lo=0, lo_open=True)
    top_p: float = F(1.0, "nucleus sampling mass", lo=0, hi=1, lo_open=True)


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
    clip_low: float = F(0.2, "eps_low: ratio clipped below at 1 - eps_low", lo=0)
    clip_high: float = F(0.2, "eps_high: ratio clipped above at 1 + eps_high (DAPO: 0.28)", lo=0)
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
        "[floor, cap]); needs old_logprobs=recompute; none = off", choices_from="rollout_correction")
    rollout_correction_cap: float = F(2.0, "tis: the truncation C of min(ratio, C); mask: the upper "
                                      "bound of the kept band (IcePop 5)", lo=1)
    rollout_correction_floor: float = F(0.5, "mask: the lower bound of the kept band (IcePop 0.5)",
                                        lo=0, hi=1, lo_open=True)
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
        d = self.to_dict()
        for k in ("name", "sweep", "results_dir", "cache_dir", "threads", "malloc_tuning"):
            d["run"].pop(k)
        digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
        return f"{_slug(self.run_name())}-{digest}"

    def run_dir(self) -> Path:
        return Path(self.run.results_dir) / _slug(self.run.sweep) / self.run_id()


NAME_RE = r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*"


def _slug(s: str) -> str:
    """Path-safe name: no separators, no '..', so a config cannot escape the results root."""
    s = re.sub(r"[^A-Za-z0-9_.+-]", "_", s).strip(".")
    return s or "run"


# ------------------------------------------------------------------------------------------------
# Strict loading
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict:
    """Evaluated annotations of a config dataclass (string annotations: evaluated once)."""
    return typing.get_type_hints(cls)


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(key: str, value: Any, tp: Any, meta: dict) -> Any:
    """Check `value` against the annotation `tp`; return it (numeric strings become numbers)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(key, value, args[0], meta)
    if origin is Literal:
        allowed = list(typing.get_args(tp))
        if value not in allowed:
            raise ConfigError(f"{key} = {value!r}: allowed values are {', '.join(map(str, allowed))}"
                              + suggest(str(value), [str(a) for a in allowed]))
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r}: expected true or false")
        return value
    if tp in (int, float):
        if isinstance(value, str):  # YAML reads 3e-4 as a string; CLI values are strings
            try:
                value = float(value) if tp is float else int(value)
            except ValueError:
                raise ConfigError(f"{key} = {value!r}: expected a {tp.__name__}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} = {value!r}: expected a {tp.__name__}")
        if tp is int and isinstance(value, float):
            if not value.is_integer():
                raise ConfigError(f"{key} = {value!r}: expected an integer")
            value = int(value)
        if tp is float:
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"{key} = {value!r}: expected a finite number")
        lo, hi = meta.get("lo"), meta.get("hi")
        too_low = lo is not None and (value < lo or (meta.get("lo_open") and value == lo))
        if too_low or (hi is not None and value > hi):
            parts = []
            if lo is not None:
                parts.append(f"{'>' if meta.get('lo_open') else '>='} {lo}")
            if hi is not None:
                parts.append(f"<= {hi}")
            raise ConfigError(f"{key} = {value!r}: must be {' and '.join(parts)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} = {value!r}: expected a string")
        return value
    if tp is list or origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: expected a list")
        return value
    raise ConfigError(f"{key}: unsupported field type {tp}")  # pragma: no cover - programming error


def _apply(obj: Any, data: dict, prefix: str = "") -> None:
    """Set fields of dataclass `obj` from the nested dict `data`, strictly."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} = {data!r}: expected a mapping of keys")
    hints = _type_hints(type(obj))
    fields = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in fields:
            names = list(fields)
            raise ConfigError(
                f"unknown key {full!r}; allowed under {prefix.rstrip('.') or 'the top level'}: "
                f"{', '.join(names)}" + suggest(str(key), names).replace("'", f"'{prefix}", 1))
        tp = hints[key]
        if _is_section(tp):
            _apply(getattr(obj, key), value, f"{full}.")
        else:
            setattr(obj, key, _coerce(full, value, tp, fields[key].metadata))


def safe_load_strict(text: str):
    """yaml.safe_load (plain data only: never yaml.load, a config must not construct objects), and
    a key given twice in one mapping is an error (YAML would silently keep the last one)."""
    data = yaml.safe_load(text)
    todo = [yaml.compose(text, Loader=yaml.SafeLoader)]
    while todo:
        node = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                    if k.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {k.value!r} is given twice", k.start_mark)
                    seen.add(k.value)
                todo.append(v)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
    return data


def read_text(path: Path, err) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise err(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise err(f"{path}: not a text file (not UTF-8)") from None


def yaml_error(path, e: yaml.YAMLError) -> str:
    where = getattr(e, "problem_mark", None)
    at = f" (line {where.line + 1})" if where else ""
    return f"{path}: not valid YAML{at}: {getattr(e, 'problem', e)}"


def _read_yaml(path: Path) -> dict:
    text = read_text(path, ConfigError)
    try:
        data = safe_load_strict(text)
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(path, e)) from None
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def parse_overrides(items: list[str]) -> dict:
    """['optim.lr=3e-4', 'train.steps=10'] -> nested dict. Values are parsed as YAML scalars."""
    out: dict = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected key=value, e.g. optim.lr=3e-4")
        key, raw = item.split("=", 1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            raise ConfigError(f"override {item!r}: {key!r} is not a dotted key like optim.lr")
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is both a value and a section")
        node[parts[-1]] = value
    return out


def deep_merge(a: dict, b: dict) -> dict:
    """`b` over `a`, recursively for nested mappings (neither input is modified)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> dict:
    """A preset is data: a YAML mapping of `algo` keys (and nothing else). Read once per process
    (sweeps resolve thousands of configs); callers get their own copy."""
    return dict(_load_preset_cached(name))


@functools.lru_cache(maxsize=None)
def _load_preset_cached(name: str) -> dict:
    if name == "none":
        return {}
    if name not in list_presets():
        raise ConfigError(f"algo.preset = {name!r}: allowed values are {', '.join(list_presets())}, "
                          f"none" + suggest(name, list_presets()))
    data = _read_yaml(PRESET_DIR / f"{name}.yaml")
    bad = [k for k in data if k not in {f.name for f in dataclasses.fields(AlgoCfg)}]
    if bad:  # pragma: no cover - a shipped preset is checked by the tests
        raise ConfigError(f"preset {name}: unknown algo key {bad[0]!r}")
    return data


def build_config(data: dict | None = None) -> Config:
    """Resolve defaults <- preset <- `data`, check every key, value and combination."""
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config = {data!r}: expected a mapping of config keys")
    if "preset" in data:  # shorthand: `preset: dapo` / `preset=dapo` is `algo.preset`
        algo = data.get("algo", {})
        if isinstance(algo, dict) and "preset" in algo:
            raise ConfigError(f"preset = {data['preset']!r}: also given as algo.preset = "
                              f"{algo['preset']!r}; set one of them")
        data = {**data, "algo": {**(algo if isinstance(algo, dict) else {}), "preset": data["preset"]}}
        del data["preset"]
    algo = data.get("algo", {})
    if not isinstance(algo, dict):
        raise ConfigError(f"algo = {algo!r}: expected a mapping of keys")
    preset_name = algo.get("preset", AlgoCfg.preset)
    if not isinstance(preset_name, str):
        raise ConfigError(f"algo.preset = {preset_name!r}: expected a string")
    if "deviates_from_preset" in algo:
        raise ConfigError("algo.deviates_from_preset is derived from the config; do not set it")
    preset = load_preset(preset_name)
    cfg = Config()
    _apply(cfg, {"algo": preset})
    _apply(cfg, data)
    base = Config()
    _apply(base, {"algo": preset})
    cfg.algo.deviates_from_preset = sorted(
        k for k in algo if k != "preset" and getattr(cfg.algo, k) != getattr(base.algo, k))
    validate(cfg)
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """The one entry point: YAML file (optional) plus dotted CLI overrides -> a valid Config."""
    data = _read_yaml(Path(path)) if path else {}
    if overrides:
        data = deep_merge(data, parse_overrides(overrides))
    return build_config(data)


def config_from_dict(d: dict) -> Config:
    """Rebuild a Config from a saved resolved config (config.yaml of a run)."""
    d = json.loads(json.dumps(d))  # deep copy
    d.get("algo", {}).pop("deviates_from_preset", None)
    # A saved record already contains the preset's values; re-applying the preset is a no-op.
    return build_config(d)


# ------------------------------------------------------------------------------------------------
# Combinations
# ------------------------------------------------------------------------------------------------
def validate(cfg: Config) -> None:
    """Invalid combinations raise; nothing is silently changed."""
    from . import algos  # registries of design choices

    for f in dataclasses.fields(AlgoCfg):
        reg_name = f.metadata.get("choices_from")
        if reg_name and reg_name != "presets":
            reg = algos.REGISTRIES[reg_name]
            value = getattr(cfg.algo, f.name)
            if value not in reg:
                raise ConfigError(f"algo.{f.name} = {value!r}: allowed values are "
                                  f"{', '.join(reg.names())}" + suggest(value, reg.names()))
    for key in ("name", "sweep"):  # they name directories under run.results_dir: no escaping it
        v = getattr(cfg.run, key)
        if v and not re.fullmatch(NAME_RE, v):
            raise ConfigError(f"run.{key} = {v!r}: letters, digits and _ . + - only, not starting "
                              f"with '.' (it names a directory under run.results_dir)")
    if cfg.model.scale == "pretrained" and not cfg.model.path:
        raise ConfigError("model.path = None: required when model.scale = pretrained")
    if cfg.model.scale != "pretrained" and cfg.model.path:
        raise ConfigError(f"model.path = {cfg.model.path!r}: only allowed with model.scale = "
                          f"pretrained (got {cfg.model.scale})")
    _validate_model_engine(cfg)
    _validate_task(cfg)
    if cfg.task.min_digits > cfg.task.max_digits:
        raise ConfigError(f"task.min_digits = {cfg.task.min_digits}: must be <= task.max_digits "
                          f"({cfg.task.max_digits})")
    if cfg.task.held_out in ("first_two_ge_50", "first_ends_in_7") and cfg.task.max_digits < 2:
        raise ConfigError(f"task.held_out = {cfg.task.held_out!r}: needs task.max_digits >= 2 "
                          "(two-digit operands must exist)")
    if cfg.eval.temperature == 0:
        for s in ("in_dist", "held_out"):
            if getattr(cfg.eval, s).k != 1:
                raise ConfigError(f"eval.{s}.k = {getattr(cfg.eval, s).k}: greedy eval "
                                  f"(eval.temperature = 0) is deterministic, so k must be 1")
    total = cfg.rollout.prompts_per_step * cfg.rollout.group_size
    if cfg.algo.minibatches > cfg.rollout.prompts_per_step:
        raise ConfigError(f"algo.minibatches = {cfg.algo.minibatches}: must be <= "
                          f"rollout.prompts_per_step ({cfg.rollout.prompts_per_step}); minibatches "
                          f"split by prompt so groups stay whole")
    if cfg.rollout.prompts_per_step % cfg.algo.minibatches:
        raise ConfigError(f"algo.minibatches = {cfg.algo.minibatches}: must divide "
                          f"rollout.prompts_per_step ({cfg.rollout.prompts_per_step}, {total} "
                          f"sequences) so every minibatch holds whole groups")
    _validate_algo(cfg)
    needs_groups = algos.ADVANTAGES.meta(cfg.algo.advantage).needs_group
    if needs_groups and cfg.rollout.group_size < 2:
        raise ConfigError(f"rollout.group_size = {cfg.rollout.group_size}: advantage "
                          f"{cfg.algo.advantage!r} needs groups of >= 2 samples per prompt")
    if not algos.OLD_LOGPROBS.meta(cfg.algo.old_logprobs).exact_under_top_p and cfg.rollout.top_p < 1.0:
        raise ConfigError(f"algo.old_logprobs = {cfg.algo.old_logprobs!r}: the sampler's log-probs under top_p = "
                          f"{cfg.rollout.top_p} are not the policy's; use old_logprobs=recompute")
    if cfg.model.scale != "pretrained" and cfg.task.name == "chain_sum":
        need = _max_prompt_chars(cfg) + cfg.rollout.max_new_tokens + 2
        if need > cfg.model.max_positions:
            raise ConfigError(f"model.max_positions = {cfg.model.max_positions}: prompt + "
                              f"rollout.max_new_tokens needs {need}")


LORA_KEYS = ("lora_alpha", "lora_dropout", "lora_target_modules")
MATH_KEYS = ("train_path", "in_dist_path", "held_out_path", "prompt_template", "chat_template")


def _validate_model_engine(cfg: Config) -> None:
    """Numerics, LoRA and the rollout engine."""
    from . import algos
    m, a = cfg.model, cfg.algo
    if m.param_dtype == "bf16" and m.dtype != "bf16":
        raise ConfigError("model.param_dtype = 'bf16': needs model.dtype = bf16 (bf16 weights under "
                          "fp32 compute would only add casts)")
    if m.lora_rank == 0:
        for key in LORA_KEYS:
            if getattr(m, key) != getattr(ModelCfg(), key):
                raise ConfigError(f"model.{key} = {getattr(m, key)!r}: only used with LoRA "
                                  f"(model.lora_rank > 0)")
    if not m.lora_target_modules or not all(isinstance(x, str) and x for x in m.lora_target_modules):
        raise ConfigError(f"model.lora_target_modules = {m.lora_target_modules!r}: expected a "
                          f"non-empty list of module names, e.g. [q_proj, v_proj]")
    if cfg.rollout.engine == "vllm":
        if cfg.run.device == "cpu":
            raise ConfigError("rollout.engine = 'vllm': vLLM needs a CUDA device; set run.device = "
                              "cuda (or auto)")
        if a.rollout_lag > 0:
            raise ConfigError(f"algo.rollout_lag = {a.rollout_lag}: the simulated lag keeps a second "
                              f"HF model as sampler; use rollout.engine = hf")
        if a.fp32_lm_head:
            raise ConfigError("algo.fp32_lm_head = true: vLLM computes its LM head in the model's "
                              "dtype, so the switch would reach the trainer only; use rollout.engine "
                              "= hf, or fp32_lm_head = false (and algo.rollout_correction)")
    elif cfg.rollout.gpu_memory_utilization != RolloutCfg().gpu_memory_utilization:
        raise ConfigError(f"rollout.gpu_memory_utilization = {cfg.rollout.gpu_memory_utilization}: "
                          f"only used with rollout.engine = vllm")
    corr = algos.ROLLOUT_CORRECTIONS.meta(a.rollout_correction)
    if corr.active and not algos.OLD_LOGPROBS.meta(a.old_logprobs).trainer_forward:
        raise ConfigError(f"algo.rollout_correction = {a.rollout_correction!r}: needs algo.old_logprobs "
                          f"= {', '.join(algos.OLD_LOGPROBS.where(trainer_forward=True))} (with the "
                          f"sampler's log-probs as pi_old the PPO ratio already "
                          f"is pi / pi_sampler, and there is no trainer pi_old to correct)")
    base = AlgoCfg()
    if not corr.uses_cap and a.rollout_correction_cap != base.rollout_correction_cap:
        raise ConfigError(f"algo.rollout_correction_cap = {a.rollout_correction_cap}: only used when "
                          f"algo.rollout_correction is {' or '.join(algos.ROLLOUT_CORRECTIONS.where(uses_cap=True))} "
                          f"(it is {a.rollout_correction})")
    if not corr.uses_floor and a.rollout_correction_floor != base.rollout_correction_floor:
        raise ConfigError(f"algo.rollout_correction_floor = {a.rollout_correction_floor}: only used when "
                          f"algo.rollout_correction is {' or '.join(algos.ROLLOUT_CORRECTIONS.where(uses_floor=True))} "
                          f"(it is {a.rollout_correction}); the floor is used by "
                          f"{' or '.join(algos.ROLLOUT_CORRECTIONS.where(uses_floor=True))}")


def _validate_task(cfg: Config) -> None:
    t = cfg.task
    if t.name == "math":
        for key in ("train_path", "in_dist_path", "held_out_path"):
            if not getattr(t, key):
                raise ConfigError(f"task.{key} = None: required when task.name = math (a .jsonl or "
                                  f".parquet file; schema in docs/tasks.md)")
        if "{problem}" not in t.prompt_template:
            raise ConfigError(f"task.prompt_template = {t.prompt_template!r}: must contain {{problem}}")
        if t.chat_template and cfg.model.scale != "pretrained":
            raise ConfigError("task.chat_template = true: tiny models have no chat template; needs "
                              "model.scale = pretrained")
    else:
        for key in MATH_KEYS:
            if getattr(t, key) != getattr(TaskCfg(), key):
                raise ConfigError(f"task.{key} = {getattr(t, key)!r}: only used with task.name = math")


CRITIC_KEYS = ("gamma", "lam_policy", "lam_critic", "lam_alpha", "critic_lr", "value_pretrain_steps")


def _validate_algo(cfg: Config) -> None:
    """Combinations of design choices that are wrong or meaningless: one line each, never a warning."""
    from . import algos

    a = cfg.algo
    if algos.RATIOS.meta(a.ratio).constant_per_response and \
            algos.AGGREGATIONS.meta(a.aggregation).weights_by_length:
        raise ConfigError(f"algo.aggregation = {a.aggregation!r}: with algo.ratio = {a.ratio!r} every "
                          f"token of a response carries the same response-level term, so this "
                          f"aggregation weights each response by its length; use seq_mean_token_mean")
    if a.dual_clip and not algos.SURROGATES.meta(a.surrogate).has_dual_clip:
        raise ConfigError(f"algo.dual_clip = {a.dual_clip}: only surrogate "
                          f"{', '.join(algos.SURROGATES.where(has_dual_clip=True))} has a dual clip "
                          f"(algo.surrogate = {a.surrogate!r}); set 0")
    if 0 < a.dual_clip <= 1:
        raise ConfigError(f"algo.dual_clip = {a.dual_clip}: must be > 1 (or 0 = off); the floor "
                          f"c*A binds only where the ratio exceeds c")
    if not algos.SURROGATES.meta(a.surrogate).uses_ratio:
        if a.ratio != AlgoCfg().ratio:
            raise ConfigError(f"algo.ratio = {a.ratio!r}: surrogate {a.surrogate!r} uses no "
                              f"importance ratio; leave algo.ratio = token")
        if a.epochs * a.minibatches > 1:
            raise ConfigError(f"algo.minibatches = {a.minibatches}, algo.epochs = {a.epochs}: surrogate "
                              f"{a.surrogate!r} has no importance ratio, so every update after the "
                              f"first would use off-policy samples uncorrected; use 1 and 1")
    if a.rollout_lag > 0 and algos.OLD_LOGPROBS.meta(a.old_logprobs).trainer_forward:
        raise ConfigError(f"algo.old_logprobs = {a.old_logprobs!r}: with algo.rollout_lag = "
                          f"{a.rollout_lag} pi_old must be the behaviour policy (sampler); a "
                          f"recomputed pi_old would leave the lag uncorrected")
    if a.rollout_lag > 0 and not algos.SURROGATES.meta(a.surrogate).uses_ratio:
        raise ConfigError(f"algo.rollout_lag = {a.rollout_lag}: surrogate {a.surrogate!r} has no "
                          f"importance ratio to correct stale rollouts; use 0")
    kl = algos.KL_ESTIMATORS.meta(a.kl)
    if not kl.needs_reference and a.kl_coef > 0:
        raise ConfigError(f"algo.kl_coef = {a.kl_coef}: algo.kl = none (no KL term); set an "
                          f"estimator (k1, k2, k3) or kl_coef = 0")
    if not kl.needs_reference and a.kl_mode != AlgoCfg().kl_mode:
        raise ConfigError(f"algo.kl_mode = {a.kl_mode!r}: algo.kl = none (no KL term)")
    if kl.needs_reference and a.kl_coef == 0:
        raise ConfigError(f"algo.kl_coef = 0.0: algo.kl = {a.kl!r} needs a coefficient > 0 (or "
                          f"algo.kl = none, which also skips the reference model)")
    if kl.needs_reference and not kl.gradient_as_loss and algos.KL_MODES.meta(a.kl_mode).in_loss:
        raise ConfigError(f"algo.kl = {a.kl!r}: as a loss term its expected gradient is zero "
                          "(E_pi[grad log pi] = 0), so it regularises nothing; use kl_mode = reward, "
                          "or k2/k3 as a loss")
    if not algos.ADVANTAGES.meta(a.advantage).needs_critic:
        base = AlgoCfg()
        for key in CRITIC_KEYS:
            if getattr(a, key) != getattr(base, key):
                raise ConfigError(f"algo.{key} = {getattr(a, key)!r}: only used with a critic "
                                  f"(algo.advantage = gae), not {a.advantage!r}")
    if a.lam_alpha > 0 and a.lam_policy != AlgoCfg().lam_policy:
        raise ConfigError(f"algo.lam_policy = {a.lam_policy}: unused when algo.lam_alpha = "
                          f"{a.lam_alpha} (length-adaptive lambda_policy); leave it at its default")
    if a.max_gen_rounds > 1 and not algos.GROUP_FILTERS.meta(a.group_filter).drops:
        raise ConfigError(f"algo.max_gen_rounds = {a.max_gen_rounds}: refilling needs a filter "
                          f"(algo.group_filter = zero_variance); with none every round is kept")
    if a.overlong_cache >= cfg.rollout.max_new_tokens:
        raise ConfigError(f"algo.overlong_cache = {a.overlong_cache}: must be < "
                          f"rollout.max_new_tokens ({cfg.rollout.max_new_tokens}), the L_max of the "
                          f"soft overlong punishment")
    seqs_per_mb = cfg.rollout.prompts_per_step // a.minibatches * cfg.rollout.group_size
    if a.micro_batches > seqs_per_mb:
        raise ConfigError(f"algo.micro_batches = {a.micro_batches}: must be <= the sequences per "
                          f"minibatch ({seqs_per_mb})")


def _max_prompt_chars(cfg: Config) -> int:
    terms = cfg.task.n_terms + (1 if cfg.task.held_out == "more_terms" else 0)
    return terms * (cfg.task.max_digits + 1) + 1


# ------------------------------------------------------------------------------------------------
# Saving and documenting
# ------------------------------------------------------------------------------------------------
def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=False)


def describe_fields(cls: type = Config, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every field: the text of `rlablate train --help`."""
    rows = []
    inst = cls()
    hints = _type_hints(cls)
    for f in dataclasses.fields(cls):
        if _is_section(hints[f.name]):
            rows += describe_fields(hints[f.name], f"{prefix}{f.name}.")
        elif f.name != "deviates_from_preset":
            tp = hints[f.name]
            help_ = f.metadata.get("help", "")
            if typing.get_origin(tp) is Literal:
                help_ += f" [{'|'.join(map(str, typing.get_args(tp)))}]"
            rows.append((f"{prefix}{f.name}", repr(getattr(inst, f.name)), help_))
    return rows
