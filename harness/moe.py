"""Mixture-of-Experts routing: record the experts the sampler chose, and route the trainer's
forward by a registered choice (`algo.routing_replay`) while measuring how often the trainer's own
top-k differs from the sampler's.

`RouterTape.attach(model)` replaces the forward of each top-k router of a transformers MoE model
(Qwen2-MoE's `Qwen2MoeTopKRouter`: `weight`, `top_k`, `norm_topk_prob`, `hidden_dim`) by one that
computes the same thing (router logits, softmax, top-k, optional renormalisation) and, when the
tape is armed, either records the chosen experts (`record()`) or routes by
`choose(natural, recorded)` (`replay(...)`) and counts the tokens whose expert set changed. A dense
model has no router: `attach` returns None. Recorded routing is (B, T, L, k) per rollout (prompt
and response parts kept apart, like the tokens), -1 where nothing was recorded.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

_ATTR = "_rlablate_router_tape"


def _routers(model: torch.nn.Module) -> list:
    return [m for m in model.modules()
            if type(m).__name__.endswith("TopKRouter") and hasattr(m, "top_k") and hasattr(m, "weight")]


class RouterTape:
    def __init__(self, routers: list):
        self.routers = routers
        self.recording = False
        self.captured: list = [None] * len(routers)
        self.given: torch.Tensor | None = None     # (N, L, k) recorded experts, -1 = none
        self.count: torch.Tensor | None = None     # (N,) bool: tokens counted as changed or not
        self.choose = None
        self.changed: torch.Tensor | None = None   # (N,) bool, accumulated over layers
        for layer, r in enumerate(routers):
            r.forward = self._forward(r, layer)

    @classmethod
    def attach(cls, model: torch.nn.Module) -> "RouterTape | None":
        """The model's tape (made once); None for a model without top-k routers (dense)."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        tape = getattr(base, _ATTR, None)
        if tape is None:
            routers = _routers(base)
            if not routers:
                return None
            tape = cls(routers)
            setattr(base, _ATTR, tape)
        return tape

    @property
    def layers(self) -> int:
        return len(self.routers)

    @property
    def top_k(self) -> int:
        return self.routers[0].top_k

    def _forward(self, router, layer: int):
        def forward(hidden_states):
            h = hidden_states.reshape(-1, router.hidden_dim)
            logits = F.linear(h, router.weight)
            probs = torch.nn.functional.softmax(logits, dtype=torch.float, dim=-1)
            value, natural = torch.topk(probs, router.top_k, dim=-1)
            idx = natural
            if self.recording:
                self.captured[layer] = natural.detach()
            if self.given is not None:
                rec = self.given[:, layer]
                same = (natural.sort(-1).values == rec.sort(-1).values).all(-1)
                self.changed |= ~same & (rec >= 0).all(-1)
                idx = self.choose(natural, rec)
                value = probs.gather(-1, idx)
            if router.norm_topk_prob:
                value = value / value.sum(dim=-1, keepdim=True)
            return logits, value.to(logits.dtype), idx
        return forward

    # ---------------------------------------------------------------- recording (the sampler)
    def take(self, batch: int, width: int) -> torch.Tensor:
        """The experts of the last forward over (batch, width) tokens: (batch, width, L, k)."""
        out = torch.stack([c.view(batch, width, -1) for c in self.captured], 2)
        self.captured = [None] * self.layers
        return out

    @contextlib.contextmanager
    def record(self):
        self.recording = True
        try:
            yield self
        finally:
            self.recording = False
            self.captured = [None] * self.layers

    # ---------------------------------------------------------------- replaying (the trainer)
    @contextlib.contextmanager
    def replay(self, recorded: torch.Tensor, choose, count: torch.Tensor):
        """Route the forward passes inside by `choose(natural, recorded)`; `recorded` (B, T, L, k)
        aligned with the forwarded (B, T) tokens, `count` (B, T) bool: the tokens whose change is
        counted. After the block, `self.last` = (changed tokens, counted tokens)."""
        B, T = recorded.shape[:2]
        self.given = recorded.reshape(B * T, self.layers, -1)
        self.changed = torch.zeros(B * T, dtype=torch.bool, device=recorded.device)
        self.choose = choose
        try:
            yield self
        finally:
            c = count.reshape(-1)
            self.last = (int((self.changed & c).sum()), int(c.sum()))
            self.given = self.changed = self.choose = None


def routing_of(model: torch.nn.Module) -> RouterTape | None:
    return RouterTape.attach(model)
