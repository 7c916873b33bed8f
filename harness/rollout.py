"""Rollout engines: prompts in, sampled responses with the sampler's own log-probs out.

Every engine returns a `Rollout` with the same fields, so the loop does not care who sampled.
`HFEngine` samples with the transformers model's own forward and KV cache, in a decode loop of
its own (batched; shared prompts prefilled once; finished rows leave the batch). A vLLM engine plugs into the
same interface (`harness/rollout_vllm.py`) and is imported lazily, never on CPU.

Also here: `sequence_logprobs`, the one teacher-forced forward pass the trainer uses, with the same
position ids the sampler used (left padding), so a recomputed log-prob matches the sampler's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .models import forward_params, output_cache


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
    """Batched sampling with the transformers model's own forward and KV cache, in a decode loop of
    our own (`generate` spends most of a step on logits processors, stopping criteria and output
    bookkeeping that a tiny model makes visible):

    - prompts repeated back to back (a group's G samples) are encoded and prefilled once, then the
      cache is expanded to the G rows;
    - a row that emitted EOS leaves the batch (its cache rows are dropped), and the loop stops when
      no row is left or at max_new_tokens;
    - per step only the chosen token's log-prob is kept (no stacked (B, T, V) scores).

    The sampled distribution is `generate`'s (softmax(logits / T), nucleus-filtered for top_p < 1,
    argmax for T = 0) and the log-probs are those of that processed distribution, equal to a
    teacher-forced forward (`sequence_logprobs`) to float rounding. Randomness comes from torch's
    global RNG: the caller seeds it.
    """

    def __init__(self, model: PreTrainedModel, tok: PreTrainedTokenizerBase):
        self.model = model
        self.tok = tok
        self._cache_kw, has_keep = forward_params(model)
        self._keep_last = {"logits_to_keep": 1} if has_keep else {}

    def _forward(self, ids, attn, pos, cache, **kw):
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True,
                         **{self._cache_kw: cache}, **kw)
        return out.logits[:, -1], output_cache(out)

    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float,
                 top_p: float = 1.0) -> Rollout:
        """Sample one response per prompt (repeat prompts for groups). temperature 0 = greedy.

        Decodes under `torch.inference_mode` (no autograd bookkeeping per op: ~3% of sampling on
        the tiny model); the returned tensors are ordinary ones, usable in the update's graph."""
        with torch.inference_mode():
            ro = self._generate(prompts, max_new_tokens, temperature, top_p)
        return Rollout(*[x.clone() if isinstance(x, torch.Tensor) else x
                         for x in (getattr(ro, f.name) for f in dataclasses.fields(Rollout))])

    def _generate(self, prompts: list[str], max_new_tokens: int, temperature: float,
                  top_p: float) -> Rollout:
        model, tok = self.model, self.tok
        device = next(model.parameters()).device
        # runs of identical prompts: encode and prefill each run once
        starts = [i for i in range(len(prompts)) if i == 0 or prompts[i] != prompts[i - 1]]
        counts = torch.tensor([b - a for a, b in zip(starts, starts[1:] + [len(prompts)])])
        uids, umask = encode_prompts(tok, [prompts[i] for i in starts], device)
        expand = torch.repeat_interleave(torch.arange(len(starts)), counts).to(device)  # (B,)
        ids, mask = uids[expand], umask[expand]
        B = len(prompts)
        eos, pad = tok.eos_token_id, tok.pad_token_id
        resp = torch.full((B, max_new_tokens), pad, dtype=torch.long, device=device)
        logprobs = torch.zeros((B, max_new_tokens), device=device)
        was_training = model.training
        model.eval()
        try:
            logits, cache = self._forward(uids, umask, (umask.cumsum(-1) - 1).clamp(min=0), None,
                                          **self._keep_last)
            if len(starts) < B:
                cache.reorder_cache(expand)
                logits = logits[expand]
            rows = torch.arange(B, device=device)       # the batch rows still generating
            attn = mask
            pos = mask.sum(-1, keepdim=True)            # position id of the next input token
            n = 0
            for t in range(max_new_tokens):
                token, lp = _sample(logits, temperature, top_p)
                resp[rows, t] = token
                logprobs[rows, t] = lp
                n = t + 1
                alive = token != eos
                if n == max_new_tokens or not bool(alive.any()):
                    break
                if not bool(alive.all()):               # drop the finished rows
                    keep = alive.nonzero().squeeze(-1)
                    rows, token, attn, pos = rows[keep], token[keep], attn[keep], pos[keep]
                    cache.reorder_cache(keep)
                attn = torch.cat([attn, attn.new_ones(len(rows), 1)], 1)
                logits, cache = self._forward(token.unsqueeze(-1), attn, pos, cache)
                pos = pos + 1
        finally:
            model.train(was_training)
        resp, logprobs = resp[:, :n], logprobs[:, :n]
        is_eos = resp == eos
        # a token is part of the response up to and including the first EOS
        rmask = ((is_eos.cumsum(-1) - is_eos.long()) == 0).long()
        lengths = rmask.sum(-1)
        truncated = ~is_eos.any(-1)
        texts = tok.batch_decode(torch.where(is_eos, torch.full_like(resp, pad), resp),
                                 skip_special_tokens=True)
        return Rollout(ids, mask, resp, rmask, logprobs, lengths, truncated, texts)


def _sample(logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row from softmax(logits / temperature), restricted to the nucleus of mass
    top_p (the smallest set of most likely tokens whose mass reaches top_p; Holtzman et al. 2020),
    and its log-prob under that processed distribution. temperature 0: argmax, log-prob under
    softmax(logits)."""
    logits = logits.float()
    if temperature == 0:
        logp = torch.log_softmax(logits, -1)
        token = logp.argmax(-1)
    else:
        logits = logits / temperature
        if top_p < 1.0:
            sorted_logits, order = logits.sort(-1)                       # ascending
            tail = sorted_logits.softmax(-1).cumsum(-1) <= 1 - top_p   # mass outside the nucleus
            tail[:, -1] = False                                          # keep the most likely token
            logits = logits.masked_fill(tail.scatter(-1, order, tail), float("-inf"))
        logp = torch.log_softmax(logits, -1)
        token = torch.multinomial(logp.exp(), 1).squeeze(-1)
    return token, logp.gather(-1, token.unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(model: PreTrainedModel, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      response_ids: torch.Tensor, response_mask: torch.Tensor,
                      temperature: float = 1.0, with_entropy: bool = False):
    """Teacher-forced log pi(response token | prefix) / temperature, shape (B, Tr), and optionally
    the per-token entropy of that distribution (B, Tr); values at padding positions mean nothing
    (callers mask them).

    Same values as one forward pass over prompt + response (up to float rounding), for less work:
    columns that are padding in every row are not forwarded, and rows that repeat the previous row's
    prompt (a group's G samples) share one forward pass of it: the prompt's keys and values (a KV
    cache; gradients flow through it) are expanded to the rows and only the responses are forwarded
    on top, so a 7-token prompt sampled 8 times costs 7 positions, not 56.
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
    if bool(new.all()):  # no shared prompts: one pass over prompt + response
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
