"""Model scales: `model.scale` name -> the shape of a tiny model, with its properties (`SCALES`).

A light module (no torch): the config rules, the tasks and `models.py` all ask an entry's
properties instead of comparing the name `pretrained`. Properties:

- from_path: the weights and tokenizer come from `model.path` (`from_pretrained`); the tiny-model
  keys (`model.arch`, `model.max_positions`) do not act, and the tokenizer may have a chat template.
  Otherwise the entry is the transformers-config shape of a random-init tiny model.

| scale      | hidden | layers | heads | mlp  | params (17-symbol vocab) |
|------------|--------|--------|-------|------|--------------------------|
| tiny-0.3m  | 64     | 4      | 4     | 256  | ~0.27M                   |
| tiny-1m    | 128    | 4      | 4     | 384  | ~0.86M                   |
| tiny-4m    | 256    | 5      | 8     | 768  | ~4.3M                    |
| tiny-moe   | 64     | 4      | 4     | 8 experts x 64, top-2, + shared 64 | ~0.51M |

`moe`: a Qwen2-MoE model (transformers `Qwen2MoeConfig`, every layer sparse; `model.arch` does not
act), whose router choices the sampler can record for routing replay (`algo.routing_replay`).
"""

from __future__ import annotations

from .registry import Registry

SCALES = Registry("model.scale", from_path=False, moe=False)
SCALES.add("tiny-0.3m", dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                             intermediate_size=256))
SCALES.add("tiny-1m", dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                           intermediate_size=384))
SCALES.add("tiny-4m", dict(hidden_size=256, num_hidden_layers=5, num_attention_heads=8,
                           intermediate_size=768))
SCALES.add("tiny-moe", dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=256, moe_intermediate_size=64, num_experts=8,
                            num_experts_per_tok=2, shared_expert_intermediate_size=64,
                            norm_topk_prob=True, decoder_sparse_step=1), moe=True)
SCALES.add("pretrained", None, from_path=True)

# in registration order: the order `model.scale`'s allowed values are listed in
SCALE_NAMES = tuple(SCALES)
TINY_SCALES = {name: SCALES[name] for name in SCALES.where(from_path=False)}


def from_path(scale: str) -> bool:
    """The model of this scale is loaded from `model.path` (not built from a tiny shape)."""
    return SCALES.meta(scale).from_path
