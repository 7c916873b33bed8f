"""routing_replay: (natural (N, k), recorded (N, k)) -> the experts each token is routed to in the
trainer's forward of a Mixture-of-Experts model. `natural` is the trainer's own top-k, `recorded`
the sampler's choice at rollout (-1 where none was recorded: padding, the last sampled token).
Property: replays (the trainer uses the sampler's experts; needs an MoE model that records them).

Routing weights are always the trainer's current router probabilities at the chosen experts (so
the router keeps its gradient), renormalised as the model does; only the selection is replayed.
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

ROUTING_REPLAYS = Registry("algo.routing_replay", replays=False)


@ROUTING_REPLAYS.register("none")
def route_natural(natural: torch.Tensor, recorded: torch.Tensor) -> torch.Tensor:
    """The trainer routes by its own top-k: sampler and trainer may pick different experts for the
    same token (GSPO, Zheng et al. 2025, arXiv 2507.18071, argues a sequence-level ratio makes
    Routing Replay unnecessary)."""
    return natural


@ROUTING_REPLAYS.register("r3", replays=True)
def route_replayed(natural: torch.Tensor, recorded: torch.Tensor) -> torch.Tensor:
    """Rollout Routing Replay (R3; verl router_replay.mode R3; Routing Replay in Zheng et al. 2025,
    arXiv 2512.01374, "Stabilizing RL with LLMs"; R3's own paper, Ma et al. 2025, arXiv 2510.11370,
    cited from memory): each token goes to the experts the sampler chose for it; where nothing
    was recorded, its own."""
    return torch.where(recorded >= 0, recorded, natural)
