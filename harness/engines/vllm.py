"""The vLLM engine (`rollout.engine = vllm`): the same `Rollout` as `HFEngine`, sampled by vLLM
running in the trainer's own process on the same GPU. NEVER RUN YET (no machine with vLLM was
available when it was written; docs/gpu.md says what to check first). The import error is tested.

- **Install**: the optional extra `[gpu]` (vLLM has no CPU wheel). vLLM is imported only when this
  engine is built; without it the run stops with one line naming the extra.
- **Log-probs**: vLLM returns the log-prob of each sampled token; `logprobs_mode =
  processed_logprobs` makes it the distribution actually sampled from (after temperature and
  top_p), as `HFEngine` does, so `algo.old_logprobs = sampler` means the same thing for both.
- **Weight sync** (`sync_weights`, called by the loop after every step's updates): the policy's
  weights under their transformers names, LoRA merged in one matrix at a time
  (`models.iter_export_weights`), are handed to the vLLM model's own `load_weights` in place (same process, same GPU: a device-to-device copy of
  every weight, ~2 bytes x N in bf16; no disk, no NCCL), then the prefix cache is reset (its KV
  blocks were computed with the old weights).
- **Memory**: vLLM takes `rollout.gpu_memory_utilization` of the GPU (its weights + KV cache); the
  trainer's weights, gradients, optimizer state and activations live in the rest.
"""

from __future__ import annotations

import os

import torch

from ..batch import Rollout, encode_prompts
from ..models import iter_export_weights
from ..scales import from_path

INSTALL_HINT = ("rollout.engine = vllm needs vLLM, which is not installed: pip install "
                "'rlablate[gpu]' (Linux with CUDA; vLLM has no CPU wheel)")


def import_vllm():
    """`import vllm`, or ImportError with one line naming the `[gpu]` extra."""
    # the engine core in this process, so weights are loaded by reference, not pickled to a worker
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return vllm


class VLLMEngine:
    """Sampling with `vllm.LLM.generate` on token ids; the caller's tokenizer decodes."""

    def __init__(self, model, tok, *, model_path, cfg):
        vllm = import_vllm()
        self.vllm, self.tok = vllm, tok
        self.device = next(model.parameters()).device  # where the trainer wants the tensors
        kwargs = dict(model=str(model_path), dtype="bfloat16" if cfg.model.dtype == "bf16" else "float32",
                      gpu_memory_utilization=cfg.rollout.gpu_memory_utilization, seed=cfg.run.seed,
                      logprobs_mode="processed_logprobs", enable_prefix_caching=True)
        if not from_path(cfg.model.scale):
            kwargs["max_model_len"] = cfg.model.max_positions
        self.llm = vllm.LLM(**kwargs)

    @torch.no_grad()
    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float,
                 top_p: float = 1.0) -> Rollout:
        """Same contract as `HFEngine.generate`; per-request seeds come from torch's global RNG,
        so a seeded caller gets the same samples (vLLM's own kernels permitting)."""
        tok = self.tok
        ids, mask = encode_prompts(tok, prompts, "cpu")
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),)).tolist()
        reqs = [{"prompt_token_ids": row[m.bool()].tolist()} for row, m in zip(ids, mask)]
        params = [self.vllm.SamplingParams(
            n=1, temperature=temperature, top_p=1.0 if temperature == 0 else top_p, top_k=-1,
            max_tokens=max_new_tokens, logprobs=0, seed=s, stop_token_ids=[tok.eos_token_id],
            detokenize=False) for s in seeds]
        outs = self.llm.generate(reqs, params, use_tqdm=False)
        B, T = len(prompts), max(1, max(len(o.outputs[0].token_ids) for o in outs))
        resp = torch.full((B, T), tok.pad_token_id, dtype=torch.long)
        logp = torch.zeros(B, T)
        truncated = torch.zeros(B, dtype=torch.bool)
        for i, o in enumerate(outs):
            c = o.outputs[0]
            toks = list(c.token_ids)
            if toks:
                resp[i, :len(toks)] = torch.tensor(toks)
                logp[i, :len(toks)] = torch.tensor([lp[t].logprob for t, lp in zip(toks, c.logprobs)])
            truncated[i] = c.finish_reason == "length"
        rmask = (resp != tok.pad_token_id).long() if tok.pad_token_id != tok.eos_token_id else \
            (torch.arange(T).unsqueeze(0) < torch.tensor([len(o.outputs[0].token_ids) for o in outs])
             .unsqueeze(1)).long()
        texts = tok.batch_decode(torch.where(resp == tok.eos_token_id, tok.pad_token_id, resp),
                                 skip_special_tokens=True)
        d = self.device
        return Rollout(ids.to(d), mask.to(d), resp.to(d), rmask.to(d), (logp * rmask).to(d),
                       rmask.sum(-1).to(d), truncated.to(d), texts)

    def sync_weights(self, model) -> None:
        """Load the policy's current weights into vLLM's copy (see the module docstring)."""
        if hasattr(self.llm, "apply_model"):
            self.llm.apply_model(lambda m: m.load_weights(weights=iter_export_weights(model)))
        else:  # older in-process layout
            runner = self.llm.llm_engine.model_executor.driver_worker.worker.model_runner
            runner.model.load_weights(weights=iter_export_weights(model))
        self.llm.reset_prefix_cache()
