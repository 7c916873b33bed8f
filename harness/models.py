"""Models and tokenizers: tiny causal LMs built from a transformers config, or pretrained ones.

Both paths end in the same objects (a `PreTrainedModel` and a `PreTrainedTokenizerFast` loadable by
`AutoTokenizer`), so everything downstream is one code path whatever the scale.

Tiny models (random init, no download) form the `model.scale` axis; their shapes are the
entries of `scales.SCALES` (a light table the config rules and tasks read too), where
`pretrained` has the property `from_path`.

`prepare_policy` then applies the GPU-path options of `model.*` to either kind: bf16 weights and
autocast, the fp32 LM head, gradient checkpointing and LoRA (peft). With LoRA the KL reference is
the same model with its adapters disabled (`reference_context`), never a second copy.

The tokenizer of tiny models is trained locally with HF `tokenizers` on the task's own text
(a character-level WordLevel model: every symbol of the task is one token), cached by content hash
and saved in HF format.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig,
                          PreTrainedModel, PreTrainedTokenizerFast, Qwen2Config)

from .numerics import use_fp32_lm_head
from .scales import SCALES, TINY_SCALES, from_path
from .storage import file_lock


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

SPECIALS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def train_tokenizer(texts: list[str], out_dir: Path) -> PreTrainedTokenizerFast:
    """Train a character-level tokenizer on `texts` and save it (HF format) to `out_dir`."""
    tok = Tokenizer(models.WordLevel(unk_token=SPECIALS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()  # concatenate symbols back without spaces
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIALS.values()), min_frequency=1)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, padding_side="left", **SPECIALS)
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    fast.save_pretrained(tmp)
    os.replace(tmp, out_dir)
    return AutoTokenizer.from_pretrained(out_dir)


def get_tokenizer(cfg, corpus_fn) -> PreTrainedTokenizerFast:
    """Pretrained: the model's own tokenizer. Tiny: a locally trained one, cached by the hash of
    its training text (so every run of a sweep on the same task shares it)."""
    if from_path(cfg.model.scale):
        tok = AutoTokenizer.from_pretrained(cfg.model.path, padding_side="left")
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return tok
    texts = corpus_fn()
    digest = hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]
    out = Path(cfg.run.cache_dir) / "tokenizers" / f"chars-{digest}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.parent / f".{out.name}.lock"):
        if out.exists():
            return AutoTokenizer.from_pretrained(out)
        return train_tokenizer(texts, out)


# model.arch -> the transformers config class of the tiny models
ARCHS = {"qwen2": Qwen2Config, "llama": LlamaConfig}


def tiny_model_config(cfg, tok: PreTrainedTokenizerFast):
    shape = TINY_SCALES[cfg.model.scale]
    common = dict(vocab_size=len(tok), max_position_embeddings=cfg.model.max_positions,
                  num_key_value_heads=shape["num_attention_heads"], tie_word_embeddings=True,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id, rms_norm_eps=1e-6, **shape)
    if SCALES.meta(cfg.model.scale).moe:  # a Mixture-of-Experts shape: Qwen2-MoE whatever arch
        from transformers import Qwen2MoeConfig
        return Qwen2MoeConfig(**common)
    return ARCHS[cfg.model.arch](**common)


def build_model(cfg, tok: PreTrainedTokenizerFast, init_seed: int) -> PreTrainedModel:
    """Tiny: random init from a transformers config under `init_seed`. Pretrained: from_pretrained.

    Every load passes ``use_kernels=False``: transformers >= 5.2x defaults to replacing layers with
    kernels downloaded from the Hub when the model goes to CUDA (``model.train()`` kernelizes), which
    fails offline (a SLURM node, HF_HUB_OFFLINE=1: seen on the H200 device check) and would change
    the numerics of one arm of a controlled comparison behind the config's back."""
    if from_path(cfg.model.scale):
        model = AutoModelForCausalLM.from_pretrained(cfg.model.path, dtype=torch.float32,
                                                     use_kernels=False)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            model = AutoModelForCausalLM.from_config(tiny_model_config(cfg, tok),
                                                     attn_implementation="sdpa")
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def load_model(path: str | Path) -> PreTrainedModel:
    """Load a saved (e.g. warm-started) model directory."""
    AutoConfig.from_pretrained(path)  # fail early with transformers' own message
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                attn_implementation="sdpa", use_kernels=False)


def count_params(model: torch.nn.Module) -> int:
    """N in the FLOP estimates: all parameters, tied embeddings counted once."""
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------------------------------
# GPU-path options: dtype and autocast, fp32 head, gradient checkpointing, LoRA
# ------------------------------------------------------------------------------------------------
def use_autocast(model: PreTrainedModel, dtype: torch.dtype) -> PreTrainedModel:
    """Run `model.forward` (and so `generate`, the trainer's and the reference's forward passes)
    under torch.autocast(dtype) on whatever device the weights are on. In place; returns `model`."""
    inner = model.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        with torch.autocast(next(model.parameters()).device.type, dtype=dtype):
            return inner(*args, **kwargs)

    model.forward = forward
    return model


def prepare_policy(model: PreTrainedModel, cfg) -> torch.nn.Module:
    """Apply model.param_dtype, model.dtype (autocast), algo.fp32_lm_head,
    model.gradient_checkpointing and model.lora_* to a loaded model, in that order. Returns the
    model to train (a peft `PeftModel` when LoRA is on: only the adapters require grad)."""
    m = cfg.model
    if m.param_dtype != "fp32":
        model = model.to(DTYPES[m.param_dtype])
    if cfg.algo.fp32_lm_head:
        use_fp32_lm_head(model)
    if m.dtype != "fp32":
        use_autocast(model, DTYPES[m.dtype])
    if m.gradient_checkpointing:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.24's name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if m.lora_rank > 0:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(
            r=m.lora_rank, lora_alpha=m.lora_alpha, lora_dropout=m.lora_dropout,
            target_modules=list(m.lora_target_modules), task_type="CAUSAL_LM", bias="none"))
    return model


def is_lora(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def reference_context(model: torch.nn.Module):
    """Context in which `model` computes the frozen reference policy: a LoRA model with its
    adapters disabled (= the base weights, no second copy); any other model as it is."""
    return model.disable_adapter() if is_lora(model) else contextlib.nullcontext()


def policy_state(model: torch.nn.Module) -> dict:
    """What a checkpoint (or a lagged policy version) needs: every weight, or with LoRA only the
    adapter weights (the base is the warm start, restored from its cache). CPU copies."""
    sd = model.state_dict()
    if is_lora(model):
        sd = {k: v for k, v in sd.items() if "lora_" in k}
    return {k: v.detach().to("cpu", copy=True) for k, v in sd.items()}


def load_policy_state(model: torch.nn.Module, state: dict) -> None:
    """Inverse of `policy_state` (strict: every saved key must exist, and without LoRA every
    model key must be saved)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or (missing and not is_lora(model)) or \
            any("lora_" in k for k in missing):
        raise RuntimeError(f"policy state does not match the model: missing {missing[:3]}, "
                           f"unexpected {unexpected[:3]}")


def iter_export_weights(model: torch.nn.Module):
    """(name, tensor) of the policy's weights under the plain transformers names, LoRA merged in
    (W + scale B A), one tensor at a time (a merged copy of one matrix at a time, not of the
    model), without mutating the model (an in-place merge/unmerge would round a bf16 base twice).
    This is what the vLLM engine loads after each update."""
    if not is_lora(model):
        yield from ((k, v.detach()) for k, v in model.state_dict().items())
        return
    from peft.tuners.lora import LoraLayer
    base = model.get_base_model()
    layers = {name: mod for name, mod in base.named_modules() if isinstance(mod, LoraLayer)}
    for key, value in base.state_dict().items():
        if "lora_" in key:
            continue
        mod = layers.get(key.rsplit(".base_layer.", 1)[0]) if key.endswith(".base_layer.weight") else None
        if mod is not None and not mod.disable_adapters and not mod.merged:
            with torch.no_grad():
                value = value + mod.get_delta_weight(mod.active_adapters[0]).to(value.dtype)
        yield key.replace(".base_layer.", "."), value.detach()


def forward_params(model: torch.nn.Module) -> tuple[str, bool]:
    """(name of the forward's KV-cache keyword, whether forward takes `logits_to_keep`), read once
    per model class from the class's signature (an autocast wrapper or a peft model hides it):
    transformers >= 5.24 calls the cache `cache=` (the old `past_key_values=` is deprecated until
    5.40); earlier releases only know `past_key_values=`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model
    return _forward_params(type(base))


@functools.lru_cache(maxsize=None)
def _forward_params(cls) -> tuple[str, bool]:
    params = inspect.signature(cls.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def output_cache(out):
    """The KV cache of a forward output under either name (`cache`, older `past_key_values`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def sequence_logprobs(model: PreTrainedModel, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      response_ids: torch.Tensor, response_mask: torch.Tensor,
                      temperature: float = 1.0, with_entropy: bool = False, routing=None):
    """Teacher-forced log pi(response token | prefix) / temperature, shape (B, Tr), and optionally
    the per-token entropy of that distribution (B, Tr); values at padding positions mean nothing
    (callers mask them).

    Same values as one forward pass over prompt + response (up to float rounding), for less work:
    columns that are padding in every row are not forwarded, and rows that repeat the previous row's
    prompt (a group's G samples) share one forward pass of it: the prompt's keys and values (a KV
    cache; gradients flow through it) are expanded to the rows and only the responses are forwarded
    on top, so a 7-token prompt sampled 8 times costs 7 positions, not 56.

    `routing` = (routing_prompt (B, Tp, L, k), routing_resp (B, Tr, L, k), choose): an MoE model's
    experts as the sampler recorded them, and the `algo.routing_replay` function that picks the
    experts used here; the forward is then one pass over prompt + response (the recorded experts
    are per row and position), and the model's `RouterTape.last` holds (response tokens whose
    expert set changed in some layer, response tokens counted) for this call.
    """
    B, tr_full = response_ids.shape
    real = response_mask.any(0).nonzero()
    tr = int(real.max()) + 1 if len(real) else 1                                # trailing padding
    lead = int(prompt_mask.any(0).nonzero().min()) if prompt_mask.any() else 0   # leading padding
    prompt_ids, prompt_mask = prompt_ids[:, lead:], prompt_mask[:, lead:]
    response_ids, response_mask = response_ids[:, :tr], response_mask[:, :tr]
    cache_kw, has_keep = forward_params(model)
    new = torch.ones(B, dtype=torch.bool, device=prompt_ids.device)          # row starts a new prompt
    new[1:] = ((prompt_ids[1:] != prompt_ids[:-1]) | (prompt_mask[1:] != prompt_mask[:-1])).any(-1)
    if routing is not None:  # MoE with the sampler's experts: one pass, routed by the choice
        from .moe import RouterTape
        tape = RouterTape.attach(model)
        rp, rr, choose = routing
        rec = torch.cat([rp[:, lead:], rr[:, :tr]], 1)
        ids = torch.cat([prompt_ids, response_ids], 1)
        attn = torch.cat([prompt_mask, response_mask], 1)
        # counted: response tokens whose output predicts a later response token (the last one's
        # routing changes nothing the loss sees)
        count = torch.zeros_like(attn, dtype=torch.bool)
        count[:, prompt_ids.shape[1]:] = (response_mask.cumsum(-1) < response_mask.sum(-1, keepdim=True)) & response_mask.bool()
        keep = {"logits_to_keep": tr + 1} if has_keep else {}
        with tape.replay(rec, choose, count):
            logits = model(input_ids=ids, attention_mask=attn,
                           position_ids=(attn.cumsum(-1) - 1).clamp(min=0), **keep).logits
        logits = logits[:, -tr - 1:-1]
    elif bool(new.all()):  # no shared prompts: one pass over prompt + response
        ids = torch.cat([prompt_ids, response_ids], 1)
        attn = torch.cat([prompt_mask, response_mask], 1)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        keep = {"logits_to_keep": tr + 1} if has_keep else {}
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep).logits
        logits = logits[:, -tr - 1:-1]                                           # (B, Tr, V)
    else:
        starts = new.nonzero().squeeze(-1)
        expand = new.long().cumsum(0) - 1                                        # row -> its prompt
        u_ids, u_mask = prompt_ids[starts], prompt_mask[starts]
        out = model(input_ids=u_ids, attention_mask=u_mask, position_ids=(u_mask.cumsum(-1) - 1).clamp(min=0),
                    use_cache=True, **({"logits_to_keep": 1} if has_keep else {}))
        logits = out.logits[:, -1:][expand]                                      # predicts token 0
        if tr > 1:
            cache = output_cache(out)
            cache.reorder_cache(expand)                                          # (U, ...) -> (B, ...)
            pos = prompt_mask.sum(-1, keepdim=True) + torch.arange(tr - 1, device=prompt_ids.device)
            rest = model(input_ids=response_ids[:, :-1], position_ids=pos, use_cache=True,
                         attention_mask=torch.cat([prompt_mask, response_mask[:, :-1]], 1),
                         **{cache_kw: cache}).logits
            logits = torch.cat([logits, rest], 1)                                # (B, Tr, V)
    logp_all = torch.log_softmax(logits.float() / temperature, -1)
    logp = logp_all.gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)
    pad = (0, tr_full - tr)
    if not with_entropy:
        return F.pad(logp, pad), None
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return F.pad(logp, pad), F.pad(entropy, pad)


class ValueModel(torch.nn.Module):
    """The critic of `advantage = gae`: a separate network (not a head on the policy's trunk, so
    the value loss never moves the policy), a copy of the warm-start transformer body with a scalar
    head, zero-initialised so V = 0 before value pretraining. V(s_t) for response token t is read at
    the position that predicts token t (the state is the prompt plus y_<t), the same alignment as
    the policy's log-probs (see harness/loop/critic.py)."""

    def __init__(self, lm: torch.nn.Module):
        super().__init__()
        self.body = lm.base_model                      # the transformer without the LM head
        self.head = torch.nn.Linear(lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, prompt_ids, prompt_mask, response_ids, response_mask) -> torch.Tensor:
        """(B, T) values of the states before each response token."""
        ids = torch.cat([prompt_ids, response_ids], 1)
        attn = torch.cat([prompt_mask, response_mask], 1)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        h = self.body(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state
        tp = prompt_ids.shape[1]
        return self.head(h[:, tp - 1:-1].float()).squeeze(-1) * response_mask


def device_for(cfg, local_rank: int | None = None) -> torch.device:
    """The device of `run.device` (auto: CUDA when available); under data parallel on GPUs, this
    process's GPU (`local_rank`), made the current one."""
    device = torch.device(cfg.run.device if cfg.run.device != "auto" else
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and local_rank is not None:  # one GPU per process
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    return device
