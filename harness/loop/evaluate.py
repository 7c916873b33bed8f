"""Evaluation: pass@1 as the mean over N items of the fraction of k samples that are correct.

Items are the sampling unit, so the standard error is sd(per-item fraction) / sqrt(N)
(Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640). Sampling more than one response per
item (k > 1) shrinks the within-item part of that variance.
"""

from __future__ import annotations

import math

import torch

from ..tasks.base import Item


@torch.no_grad()
def evaluate(engine, task, items: list[Item], *, k: int, temperature: float, max_new_tokens: int,
             seed: int, chunk: int = 512) -> dict:
    """Sample k responses per item under a fixed seed (the training RNG is left untouched)."""
    prompts = [it.prompt for it in items for _ in range(k)]
    correct, lengths = [], []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(0, len(prompts), chunk):
            ro = engine.generate(prompts[i:i + chunk], max_new_tokens=max_new_tokens,
                                 temperature=temperature)
            for j, text in enumerate(ro.texts):
                correct.append(task.score(text, items[(i + j) // k]))
            lengths += ro.lengths.tolist()
    c = torch.tensor(correct).view(len(items), k)
    per_item = c.mean(-1)                                                      # (N,)
    n = len(items)
    se = per_item.std(unbiased=True).item() / math.sqrt(n) if n > 1 else float("nan")
    L = torch.tensor(lengths, dtype=torch.float).view(len(items), k)
    wrong = c == 0
    return {
        "pass@1": per_item.mean().item(),
        "stderr": se,
        "n_items": n,
        "k": k,
        "response_len": L.mean().item(),
        "response_len_incorrect": L[wrong].mean().item() if wrong.any() else float("nan"),
        "per_item": per_item.tolist(),
        "gen_tokens": int(L.sum().item()),
    }
