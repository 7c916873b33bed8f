"""Models and tokenizers: tiny causal LMs built from a transformers config, or pretrained ones.

Both paths end in the same objects (a `PreTrainedModel` and a `PreTrainedTokenizerFast` loadable by
`AutoTokenizer`), so everything downstream is one code path whatever the scale.

Tiny models (random init, no download) form the `model.scale` axis:

| scale      | hidden | layers | heads | mlp  | params (17-symbol vocab) |
|------------|--------|--------|-------|------|--------------------------|
| tiny-0.3m  | 64     | 4      | 4     | 256  | ~0.27M                   |
| tiny-1m    | 128    | 4      | 4     | 384  | ~0.86M                   |
| tiny-4m    | 256    | 5      | 8     | 768  | ~4.3M                    |

The tokenizer of tiny models is trained locally with HF `tokenizers` on the task's own text
(a character-level WordLevel model: every symbol of the task is one token), cached by content hash
and saved in HF format.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig,
                          PreTrainedModel, PreTrainedTokenizerFast, Qwen2Config)

from .config import Config
from .io import file_lock

TINY_SCALES = {
    "tiny-0.3m": dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=256),
    "tiny-1m": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=384),
    "tiny-4m": dict(hidden_size=256, num_hidden_layers=5, num_attention_heads=8, intermediate_size=768),
}
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


def get_tokenizer(cfg: Config, corpus_fn) -> PreTrainedTokenizerFast:
    """Pretrained: the model's own tokenizer. Tiny: a locally trained one, cached by the hash of
    its training text (so every run of a sweep on the same task shares it)."""
    if cfg.model.scale == "pretrained":
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


def tiny_model_config(cfg: Config, tok: PreTrainedTokenizerFast):
    shape = TINY_SCALES[cfg.model.scale]
    common = dict(vocab_size=len(tok), max_position_embeddings=cfg.model.max_positions,
                  num_key_value_heads=shape["num_attention_heads"], tie_word_embeddings=True,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id, rms_norm_eps=1e-6, **shape)
    if cfg.model.arch == "qwen2":
        return Qwen2Config(**common)
    return LlamaConfig(**common)


def build_model(cfg: Config, tok: PreTrainedTokenizerFast, init_seed: int) -> PreTrainedModel:
    """Tiny: random init from a transformers config under `init_seed`. Pretrained: from_pretrained."""
    if cfg.model.scale == "pretrained":
        model = AutoModelForCausalLM.from_pretrained(cfg.model.path, torch_dtype=torch.float32)
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
    return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32,
                                                attn_implementation="sdpa")


def count_params(model: torch.nn.Module) -> int:
    """N in the FLOP estimates: all parameters, tied embeddings counted once."""
    return sum(p.numel() for p in model.parameters())
