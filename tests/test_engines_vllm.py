"""The vLLM engine against real vLLM (its CPU build, `make test-vllm`; skipped where vLLM is not
installed): sampled tokens' log-probs against the trainer's teacher-forced ones on the same
weights, weight sync after real optimizer updates (full and LoRA merged), seeded determinism, and
the fp32 LM head under bf16. One engine per fixture for the whole module (start-up is ~30-70 s on
a loaded 2-core machine); the figures are printed (`-s`) and recorded in docs/gpu.md."""

from __future__ import annotations

import os
import statistics
import time
from types import SimpleNamespace

import pytest
import torch

from harness.batch import StepBatch
from harness.config import load_config
from harness.engines import make_engine
from harness.loop.update import policy_backward
from harness.models import build_model, get_tokenizer, prepare_policy, sequence_logprobs
from harness.tasks import make_task

pytestmark = pytest.mark.vllm
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: not a fraction of the shared RAM
T_NEW = 24
BASE = ["model.scale=tiny-1m", "rollout.engine=vllm", "run.device=cpu", "model.max_positions=64",
        f"rollout.max_new_tokens={T_NEW}"]


def _start(tmp, extra=()):
    cfg = load_config(None, BASE + [f"run.cache_dir={tmp}", *extra])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    model = prepare_policy(build_model(cfg, tok, 0), cfg)
    path = tmp / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    t = time.time()
    eng = make_engine("vllm", model, tok, model_path=path, cfg=cfg)
    start_s = time.time() - t
    items, _ = task.take("train", 0, 16)
    prompts = [it.prompt for it in items for _ in range(8)]   # 16 groups of 8, as the loop asks
    t = time.time()
    eng.generate(prompts, max_new_tokens=T_NEW, temperature=1.0)   # the first call is slow
    print(f"\nvLLM engine {extra}: start {start_s:.1f} s, first generate {time.time() - t:.1f} s")
    return SimpleNamespace(cfg=cfg, task=task, tok=tok, model=model, path=path, eng=eng, prompts=prompts)


@pytest.fixture(scope="module")
def fp32(tmp_path_factory):
    return _start(tmp_path_factory.mktemp("vllm32"))


def _mismatch(model, ro, temperature=1.0):
    """|log pi_trainer - log pi_vllm| over the sampled response tokens: (mean, max)."""
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                                  temperature=temperature)
    d = (lp - ro.logprobs)[ro.response_mask.bool()].abs()
    return d.mean().item(), d.max().item()


def _update(model, ro, steps=2, lr=1e-2):
    """Real optimizer steps on a vLLM rollout (+-1 advantages), as the loop's update does them."""
    cfg = load_config(None, [])
    mask = ro.response_mask.float()
    adv = torch.tensor([1.0, -1.0] * (len(ro.texts) // 2)).unsqueeze(-1) * mask
    b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask, loss_mask=mask,
                  adv=adv, logp_old=ro.logprobs, correct=torch.zeros(len(ro.texts), dtype=torch.bool))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        policy_backward(model, b, cfg.algo, group_size=8, max_new_tokens=T_NEW, temperature=1.0)
        opt.step()


def test_sampler_logprobs_equal_the_trainers_teacher_forced_ones_fp32(fp32):
    for temperature in (1.0, 0.7):
        torch.manual_seed(0)
        ro = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=temperature)
        assert ro.response_mask.sum() > 1000 and (ro.lengths == ro.response_mask.sum(-1)).all()
        mean, mx = _mismatch(fp32.model, ro, temperature)
        print(f"T={temperature}: mismatch |log ratio| mean {mean:.2e}, max {mx:.2e} "
              f"over {int(ro.response_mask.sum())} tokens")
        # fp32 on both sides, different kernels: rounding only (measured ~1e-7 mean, ~5e-7 max)
        assert mean < 1e-6 and mx < 1e-5
    # the Rollout contract of HFEngine: EOS ends a response and counts in it; rows after are padding
    eos, pad = fp32.tok.eos_token_id, fp32.tok.pad_token_id
    for i in range(len(ro.texts)):
        n = int(ro.lengths[i])
        assert (ro.response_ids[i, n:] == pad).all()
        assert bool(ro.truncated[i]) == (eos not in ro.response_ids[i, :n].tolist())
        assert fp32.tok.decode(ro.response_ids[i, :n], skip_special_tokens=True) == ro.texts[i]


def test_same_seed_same_samples_other_seed_other_samples(fp32):
    outs = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        outs.append(fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0))
    a, b, c = outs
    assert torch.equal(a.response_ids, b.response_ids) and torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.response_ids, c.response_ids)


def test_after_updates_and_sync_vllm_follows_the_new_weights(fp32):
    torch.manual_seed(1)
    ro = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0)
    _update(fp32.model, ro)
    torch.manual_seed(2)
    stale = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0)
    stale_mean, _ = _mismatch(fp32.model, stale)
    times = []
    for _ in range(5):
        t = time.time()
        fp32.eng.sync_weights(fp32.model)
        times.append(time.time() - t)
    torch.manual_seed(2)
    fresh = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0)
    mean, mx = _mismatch(fp32.model, fresh)
    n = sum(p.numel() for p in fp32.model.parameters())
    print(f"sync of {n} parameters: median {statistics.median(times) * 1e3:.1f} ms "
          f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}); before sync mismatch {stale_mean:.2e}, "
          f"after: mean {mean:.2e}, max {mx:.2e}")
    assert stale_mean > 1e-2          # the update moved the policy well beyond rounding
    assert mean < 1e-6 and mx < 1e-5  # and vLLM now samples from exactly the new weights
    assert not torch.equal(fresh.response_ids, stale.response_ids)  # same seeds, new weights


def test_lora_policy_is_synced_merged(fp32, tmp_path):
    cfg = load_config(None, BASE + [f"run.cache_dir={tmp_path}", "model.lora_rank=4", "model.lora_alpha=8"])
    lora = prepare_policy(build_model(cfg, fp32.tok, 0), cfg)
    torch.manual_seed(1)
    ro = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0)
    _update(lora, ro, steps=3)       # step 1 moves B, the next ones A and B
    fp32.eng.sync_weights(lora)
    torch.manual_seed(2)
    fresh = fp32.eng.generate(fp32.prompts, max_new_tokens=T_NEW, temperature=1.0)
    mean, mx = _mismatch(lora, fresh)
    with torch.no_grad(), lora.disable_adapter():
        base_mean, _ = _mismatch(lora, fresh)
    print(f"LoRA merged: mismatch mean {mean:.2e}, max {mx:.2e}; against the base without adapters "
          f"{base_mean:.2e}")
    assert base_mean > 1e-3           # the adapters matter
    assert mean < 1e-6 and mx < 1e-5  # and vLLM samples from base + (alpha/r) B A


@pytest.fixture(scope="module")
def bf16(tmp_path_factory, fp32):
    # fp32 first: one engine is built at a time, the module's first test starts the fp32 one
    return _start(tmp_path_factory.mktemp("vllm16"), ["model.dtype=bf16", "algo.fp32_lm_head=true"])


def test_fp32_lm_head_under_bf16(bf16):
    heads = bf16.eng.llm.apply_model(lambda m: str(m.logits_processor.head_dtype))
    assert heads == ["torch.float32"]
    torch.manual_seed(0)
    ro = bf16.eng.generate(bf16.prompts, max_new_tokens=T_NEW, temperature=1.0)
    mean, mx = _mismatch(bf16.model, ro)            # trainer: bf16 autocast, fp32 head
    cfg_bf16_head = load_config(None, BASE + [f"run.cache_dir={bf16.path.parent}", "model.dtype=bf16"])
    bf16_head = prepare_policy(build_model(cfg_bf16_head, bf16.tok, 0), cfg_bf16_head)
    mean_b, _ = _mismatch(bf16_head, ro)            # the same trainer with a bf16 head
    print(f"bf16, vLLM fp32 head: mismatch against the trainer's fp32 head: mean {mean:.2e}, max "
          f"{mx:.2e}; against a bf16 head: mean {mean_b:.2e}")
    assert mean < 2e-2
    assert mean < mean_b              # vLLM's head computes like the trainer's fp32 head
