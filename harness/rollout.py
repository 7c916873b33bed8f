"""Rollout engines: prompts in, sampled responses with the sampler's own log-probs out.

Every engine returns a `Rollout` with the same fields, so the loop does not care who sampled.
`HFEngine` samples with transformers' `generate` (batched, KV cache). A vLLM engine plugs into the
same interface (`harness/rollout_vllm.py`) and is imported lazily, never on CPU.

Also here: `sequence_logprobs`, the one teacher-forced forward pass the trainer uses, with the same
position ids the sampler used (left padding), so a recomputed log-prob matches the sampler's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class Rollout:
    prompt_ids: torch.Tensor     # (B, Tp) left-padded
    prompt_mask: torch.Tensor    # (B, Tp) 1 = real token
    response_ids: torch.Tensor   # (B, Tr) right-padded; includes the EOS token when one was emitted
    response_mask: torch.Tensor  # (B, Tr) 1 = a token the policy chose
    logprobs: torch.Tensor       # (B, Tr) log pi_sampler(token) at the sampling temperature; 0 on pad
    lengths: torch.Tensor        # (B,) response tokens (incl. EOS)
    truncated: torch.Tensor      # (B,) bool: hit max_new_tokens without EOS
    texts: list[str]             # decoded responses (EOS and pad removed)

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())


def encode_prompts(tok: PreTrainedTokenizerBase, prompts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """BOS + prompt, left-padded."""
    ids = [[tok.bos_token_id] + tok.encode(p, add_special_tokens=False) if tok.bos_token_id is not None
           else tok.encode(p, add_special_tokens=False) for p in prompts]
    width = max(len(x) for x in ids)
    out = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        out[i, width - len(x):] = torch.tensor(x)
        mask[i, width - len(x):] = 1
    return out.to(device), mask.to(device)


class HFEngine:
    """Batched sampling with transformers `generate` and its KV cache."""

    def __init__(self, model: PreTrainedModel, tok: PreTrainedTokenizerBase):
        self.model = model
        self.tok = tok

    @torch.no_grad()
    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float,
                 top_p: float = 1.0) -> Rollout:
        """Sample one response per prompt (repeat prompts for groups). temperature 0 = greedy.
        Randomness comes from torch's global RNG: the caller seeds it."""
        model, tok = self.model, self.tok
        device = next(model.parameters()).device
        ids, mask = encode_prompts(tok, prompts, device)
        greedy = temperature == 0
        gen_cfg = GenerationConfig(  # explicit: no top_k=50 or penalties from a model's defaults
            max_new_tokens=max_new_tokens, do_sample=not greedy,
            temperature=None if greedy else temperature, top_p=None if greedy else top_p,
            top_k=0, repetition_penalty=1.0,  # None would mean "fill in the model's (or 50)"
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
            return_dict_in_generate=True, output_scores=True)
        was_training = model.training
        model.eval()
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_cfg)
        model.train(was_training)
        resp = out.sequences[:, ids.shape[1]:]                                 # (B, Tr)
        scores = torch.stack(out.scores, dim=1).float()                        # (B, Tr, V) processed
        logprobs = torch.log_softmax(scores, -1).gather(-1, resp.unsqueeze(-1)).squeeze(-1)
        is_eos = resp == tok.eos_token_id
        # a token is part of the response up to and including the first EOS
        before_eos = (is_eos.cumsum(-1) - is_eos.long()) == 0
        rmask = before_eos.long()
        lengths = rmask.sum(-1)
        truncated = ~is_eos.any(-1)
        logprobs = torch.where(rmask.bool(), logprobs, torch.zeros_like(logprobs))
        resp = torch.where(rmask.bool(), resp, torch.full_like(resp, tok.pad_token_id))
        texts = tok.batch_decode(torch.where(is_eos, torch.full_like(resp, tok.pad_token_id), resp),
                                 skip_special_tokens=True)
        return Rollout(ids, mask, resp, rmask, logprobs, lengths, truncated, texts)


def sequence_logprobs(model: PreTrainedModel, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      response_ids: torch.Tensor, response_mask: torch.Tensor,
                      temperature: float = 1.0, with_entropy: bool = False):
    """Teacher-forced log pi(response token | prefix) / temperature, shape (B, Tr), and optionally
    the per-token entropy of that distribution (B, Tr)."""
    ids = torch.cat([prompt_ids, response_ids], 1)                              # (B, Tp+Tr)
    attn = torch.cat([prompt_mask, response_mask], 1)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    tp = prompt_ids.shape[1]
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos).logits
    logits = logits[:, tp - 1:-1].float() / temperature                          # (B, Tr, V)
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, response_ids.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return logp, None
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def require_engine(name: str) -> None:
    """Fail early (before a warm start) when the engine's optional dependency is missing."""
    if name == "vllm":
        from .rollout_vllm import import_vllm
        import_vllm()


def make_engine(name: str, model: PreTrainedModel, tok: PreTrainedTokenizerBase, **opts):
    """The engine named by `rollout.engine` (config validates the name). `opts` (model_path, cfg)
    are for engines that hold their own copy of the weights; such an engine also has
    `sync_weights(model)`, which the loop calls after every step's updates."""
    if name == "vllm":  # imported lazily: an optional extra ([gpu]) that needs CUDA
        from .rollout_vllm import VLLMEngine
        return VLLMEngine(model, tok, **opts)
    return HFEngine(model, tok)
