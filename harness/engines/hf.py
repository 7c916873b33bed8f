"""The transformers engine (`rollout.engine = hf`): batched sampling with the model's own forward
and KV cache, in a decode loop of our own; the CPU default, and the sampler of the simulated
rollout lag. It samples with the policy object itself, so it needs no weight sync.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..batch import Rollout, encode_prompts
from ..models import forward_params, output_cache
from ..moe import RouterTape


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

    def __init__(self, model: PreTrainedModel, tok: PreTrainedTokenizerBase, **_):
        self.model = model
        self.tok = tok
        self._cache_kw, has_keep = forward_params(model)
        self._keep_last = {"logits_to_keep": 1} if has_keep else {}
        self.tape = RouterTape.attach(model)  # an MoE model: the experts of every fed token are kept

    def _forward(self, ids, attn, pos, cache, **kw):
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True,
                         **{self._cache_kw: cache}, **kw)
        return out.logits[:, -1], output_cache(out)

    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float,
                 top_p: float = 1.0, think_budget: int = 0, interrupt: str = "") -> Rollout:
        """Sample one response per prompt (repeat prompts for groups). temperature 0 = greedy.

        Forced length interruption (ScaleRL, Khatri et al. 2025, arXiv 2510.13786): with
        `think_budget` B > 0, every row that has not ended (EOS) after B sampled tokens gets the
        tokens of `interrupt` written after them (marked in `Rollout.forced`, log-prob 0), then
        samples on to max_new_tokens in all: the answer's budget is what remains.

        Decodes under `torch.inference_mode` (no autograd bookkeeping per op: ~3% of sampling on
        the tiny model); the returned tensors are ordinary ones, usable in the update's graph."""
        phrase = None
        if think_budget:
            phrase = interrupt_ids(self.tok, interrupt)
            if think_budget + len(phrase) >= max_new_tokens:
                raise ValueError(f"rollout.think_budget = {think_budget}: with the interruption "
                                 f"phrase ({len(phrase)} tokens) it leaves no answer budget within "
                                 f"rollout.max_new_tokens = {max_new_tokens}")
        with torch.inference_mode(), (self.tape.record() if self.tape else contextlib.nullcontext()):
            ro = self._generate(prompts, max_new_tokens, temperature, top_p, think_budget, phrase)
        return Rollout(*[x.clone() if isinstance(x, torch.Tensor) else x
                         for x in (getattr(ro, f.name) for f in dataclasses.fields(Rollout))])

    def _generate(self, prompts: list[str], max_new_tokens: int, temperature: float,
                  top_p: float, think_budget: int = 0, phrase: list[int] | None = None) -> Rollout:
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
        forced = torch.zeros((B, max_new_tokens), dtype=torch.bool, device=device) if phrase else None
        tape = self.tape
        if tape:  # (B, T, L, k) experts per fed token, -1 = not fed (padding, the last token)
            r_resp = torch.full((B, max_new_tokens, tape.layers, tape.top_k), -1, dtype=torch.long,
                                device=device)
        was_training = model.training
        model.eval()
        try:
            logits, cache = self._forward(uids, umask, (umask.cumsum(-1) - 1).clamp(min=0), None,
                                          **self._keep_last)
            if tape:
                r_prompt = tape.take(*uids.shape)[expand]
            if len(starts) < B:
                cache.reorder_cache(expand)
                logits = logits[expand]
            rows = torch.arange(B, device=device)       # the batch rows still generating
            attn = mask
            pos = mask.sum(-1, keepdim=True)            # position id of the next input token
            n = 0
            while n < max_new_tokens:                   # n: the next response column
                token, lp = _sample(logits, temperature, top_p)
                resp[rows, n] = token
                logprobs[rows, n] = lp
                n += 1
                alive = token != eos
                if n == max_new_tokens or not bool(alive.any()):
                    break
                if not bool(alive.all()):               # drop the finished rows
                    keep = alive.nonzero().squeeze(-1)
                    rows, token, attn, pos = rows[keep], token[keep], attn[keep], pos[keep]
                    cache.reorder_cache(keep)
                step_ids = token.unsqueeze(-1)
                if phrase and n == think_budget:       # forced interruption of every row still going
                    k = len(phrase)
                    ph = torch.tensor(phrase, dtype=torch.long, device=device).expand(len(rows), k)
                    resp[rows.unsqueeze(-1), torch.arange(n, n + k, device=device)] = ph
                    forced[rows, n:n + k] = True
                    step_ids = torch.cat([step_ids, ph], 1)   # the phrase is prefilled in one pass
                    n += k
                w = step_ids.shape[1]
                attn = torch.cat([attn, attn.new_ones(len(rows), w)], 1)
                logits, cache = self._forward(step_ids, attn,
                                              pos if w == 1 else pos + torch.arange(w, device=device),
                                              cache)
                if tape:  # the tokens just fed: response columns n - w .. n - 1
                    r_resp[rows.unsqueeze(-1), torch.arange(n - w, n, device=device)] = tape.take(len(rows), w)
                pos = pos + w
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
        return Rollout(ids, mask, resp, rmask, logprobs, lengths, truncated, texts,
                       None if forced is None else forced[:, :n],
                       r_prompt if tape else None, r_resp[:, :n] if tape else None)


def interrupt_ids(tok, phrase: str) -> list[int]:
    """The token ids of an interruption phrase; one line if the tokenizer cannot spell it."""
    ids = tok.encode(phrase, add_special_tokens=False)
    if not ids or (tok.unk_token_id is not None and tok.unk_token_id in ids):
        raise ValueError(f"rollout.interrupt_phrase = {phrase!r}: the tokenizer cannot spell it "
                         f"(a tiny model's tokenizer knows only its task's characters)")
    return ids


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
