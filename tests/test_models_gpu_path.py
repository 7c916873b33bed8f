"""The GPU path, tested on CPU: LoRA through peft (only adapters train; the reference is the base
model with the adapters disabled), bf16 autocast with the fp32 LM head, gradient checkpointing,
the weights a vLLM engine would load, the rollout/train mismatch correction axis (hand-computed),
the vLLM engine's import error, the forward's cache keyword. Real GPU checks are marked `gpu`."""

from __future__ import annotations

import json
import math

import pytest
import torch

from harness import algos
from harness.config import load_config
from harness.models import (build_model, forward_params, get_tokenizer, is_lora, iter_export_weights,
                            output_cache, policy_state, prepare_policy, reference_context)
from harness.engines import HFEngine, make_engine
from harness.models import sequence_logprobs
from harness.tasks import make_task
from harness.loop import train
from harness.batch import StepBatch
from harness.loop.update import policy_backward

LORA = ["model.lora_rank=4", "model.lora_alpha=8"]


def _setup(tmp_path, extra=()):
    cfg = load_config(None, ["model.scale=tiny-0.3m", f"run.cache_dir={tmp_path}", *extra])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    return cfg, task, tok


def _batch(model, tok, task, n=8, seed=0):
    """A real rollout of the model and a StepBatch with +-1 advantages (half the rows each)."""
    torch.manual_seed(seed)
    items, _ = task.take("train", 0, n)
    ro = HFEngine(model, tok).generate([i.prompt for i in items], max_new_tokens=12, temperature=1.0)
    mask = ro.response_mask.float()
    adv = torch.tensor([1.0, -1.0] * (n // 2), device=mask.device).unsqueeze(-1) * mask
    return ro, StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                         loss_mask=mask, adv=adv, logp_old=ro.logprobs,
                         correct=torch.zeros(n, dtype=torch.bool))


def _step(model, batch, cfg, steps=1):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        policy_backward(model, batch, cfg.algo, group_size=2, max_new_tokens=12, temperature=1.0)
        opt.step()


# ------------------------------------------------------------------------------------------ LoRA
def test_lora_trains_only_the_adapters(tmp_path):
    cfg, task, tok = _setup(tmp_path, LORA)
    model = prepare_policy(build_model(cfg, tok, 0), cfg)
    assert is_lora(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    # 7 target modules x 4 layers x (A, B)
    assert len(trainable) == 7 * 4 * 2
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    _ro, batch = _batch(model, tok, task)
    _step(model, batch, cfg, steps=2)  # step 1 moves B (A's gradient is 0 while B = 0); step 2 both
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed == trainable


def test_lora_reference_is_the_base_model_without_a_copy(tmp_path):
    cfg, task, tok = _setup(tmp_path, LORA)
    model = prepare_policy(build_model(cfg, tok, 0), cfg)
    base = build_model(cfg, tok, 0)  # the same init: what the reference must reproduce
    ro, batch = _batch(model, tok, task)
    _step(model, batch, cfg, steps=2)
    args = (ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
    with torch.no_grad():
        with reference_context(model):
            ref, _ = sequence_logprobs(model, *args)
        pol, _ = sequence_logprobs(model, *args)
        want, _ = sequence_logprobs(base, *args)
    m = ro.response_mask.bool()
    assert torch.allclose(ref[m], want[m], atol=1e-6)          # reference == base weights
    assert (pol[m] - want[m]).abs().max() > 1e-3                # the policy itself has moved
    # one set of base weights: the peft model holds no second copy of them
    n_base = sum(p.numel() for p in base.parameters())
    n_all = sum(p.numel() for p in model.parameters())
    assert n_base < n_all < 1.2 * n_base


def test_exported_weights_merge_lora_into_plain_names(tmp_path):
    """What the vLLM engine loads after each update: plain transformers names, LoRA merged in."""
    cfg, task, tok = _setup(tmp_path, LORA)
    model = prepare_policy(build_model(cfg, tok, 0), cfg)
    ro, batch = _batch(model, tok, task)
    _step(model, batch, cfg, steps=2)
    w = dict(iter_export_weights(model))
    fresh = build_model(cfg, tok, 1)
    assert set(w) == set(fresh.state_dict())  # no lora_ / base_layer names left
    fresh.load_state_dict(w)
    args = (ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
    with torch.no_grad():
        got, want = sequence_logprobs(fresh, *args)[0], sequence_logprobs(model, *args)[0]
    assert torch.allclose(got, want, atol=1e-5)
    # the export did not modify the model (no in-place merge)
    assert all("lora_" not in k or not torch.equal(v, torch.zeros_like(v))
               for k, v in policy_state(model).items())


# -------------------------------------------------------------------------------- dtype and head
@pytest.mark.parametrize("param_dtype", ["fp32", "bf16"])
def test_fp32_head_gives_fp32_logits_under_bf16(tmp_path, param_dtype):
    cfg, task, tok = _setup(tmp_path)
    ids = torch.tensor([[1, 5, 6, 7]])
    dtypes = {}
    for head in (False, True):
        c = load_config(None, ["model.scale=tiny-0.3m", "model.dtype=bf16",
                               f"model.param_dtype={param_dtype}", f"algo.fp32_lm_head={head}"])
        model = prepare_policy(build_model(c, tok, 0), c)
        assert next(model.parameters()).dtype == (torch.bfloat16 if param_dtype == "bf16" else torch.float32)
        with torch.no_grad():
            dtypes[head] = model(input_ids=ids).logits.dtype
    assert dtypes == {False: torch.bfloat16, True: torch.float32}
    # the fp32 CPU default: fp32 logits either way, and the head switch is an exact no-op
    base = build_model(cfg, tok, 0)
    c = load_config(None, ["model.scale=tiny-0.3m", "algo.fp32_lm_head=true"])
    with torch.no_grad():
        a = base(input_ids=ids).logits
        b = prepare_policy(build_model(c, tok, 0), c)(input_ids=ids).logits
    assert a.dtype == torch.float32 and torch.equal(a, b)


def test_bf16_sampler_and_trainer_agree_closely_with_the_fp32_head(tmp_path):
    """Same model, same dtype: generate (KV cache) vs teacher forcing differ only by rounding."""
    cfg, task, tok = _setup(tmp_path)
    c = load_config(None, ["model.scale=tiny-0.3m", "model.dtype=bf16", "algo.fp32_lm_head=true"])
    model = prepare_policy(build_model(c, tok, 0), c)
    ro, _ = _batch(model, tok, task)
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                  ro.response_mask)
    m = ro.response_mask.bool()
    assert (lp[m] - ro.logprobs[m]).abs().mean() < 0.02


def test_gradient_checkpointing_gives_the_same_gradient(tmp_path):
    cfg, task, tok = _setup(tmp_path)
    grads = []
    for ckpt in (False, True):
        c = load_config(None, ["model.scale=tiny-0.3m", f"model.gradient_checkpointing={ckpt}"])
        model = prepare_policy(build_model(c, tok, 0), c)
        model.train()
        _ro, batch = _batch(model, tok, task)
        policy_backward(model, batch, c.algo, group_size=2, max_new_tokens=12, temperature=1.0)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        on = getattr(model, "is_activation_checkpointing", None)
        assert (model.is_gradient_checkpointing if on is None else on) == ckpt
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_lora_bf16_kl_run_trains_saves_adapters_only_and_logs_the_mismatch(tiny_overrides):
    over = tiny_overrides + LORA + ["model.dtype=bf16", "algo.fp32_lm_head=true", "algo.kl=k3",
                                    "algo.kl_coef=0.01", "train.steps=2", "warmup.max_steps=20",
                                    "warmup.check_every=20", "warmup.batch_size=16",
                                    "warmup.check_items=8"]
    cfg = load_config(None, over)
    s = train(cfg, progress=False)
    assert s["status"] == "finished"
    rows = [json.loads(x) for x in open(cfg.run_dir() / "metrics.jsonl")]
    tr = [r for r in rows if r["kind"] == "train"]
    assert len(tr) == 2 and all(r["loss/kl"] is not None and r["loss/kl"] >= 0 for r in tr)
    # sampler vs trainer under the same weights (first minibatch's forward): bf16 rounding only
    assert all(0 <= r["rollout/mismatch_log_ratio_abs_mean"] < 0.05 for r in tr)
    ckpt = torch.load(cfg.run_dir() / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["model"] and all("lora_" in k for k in ckpt["model"])


# ------------------------------------------------------------------ rollout/train mismatch axis
P_TRAIN = torch.tensor([[0.5, 0.2, 0.9, 0.3]])
P_SAMPLER = torch.tensor([[0.25, 0.4, 0.09, 0.3]])   # ratios 2, 0.5, 10, (pad)
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]])


def test_tis_truncates_the_ratio_at_the_cap():
    w = algos.ROLLOUT_CORRECTIONS["tis"](P_TRAIN.log(), P_SAMPLER.log(), MASK, cap=2.0, floor=0.5)
    assert torch.allclose(w, torch.tensor([[2.0, 0.5, 2.0, 0.0]]))
    w = algos.ROLLOUT_CORRECTIONS["tis"](P_TRAIN.log(), P_SAMPLER.log(), MASK, cap=5.0, floor=0.5)
    assert torch.allclose(w, torch.tensor([[2.0, 0.5, 5.0, 0.0]]))


def test_mask_drops_tokens_outside_the_band():
    w = algos.ROLLOUT_CORRECTIONS["mask"](P_TRAIN.log(), P_SAMPLER.log(), MASK, cap=5.0, floor=0.4)
    assert torch.equal(w, torch.tensor([[1.0, 1.0, 0.0, 0.0]]))   # 10 > 5: masked
    w = algos.ROLLOUT_CORRECTIONS["mask"](P_TRAIN.log(), P_SAMPLER.log(), MASK, cap=2.5, floor=0.6)
    assert torch.equal(w, torch.tensor([[1.0, 0.0, 0.0, 0.0]]))


def test_mismatch_log_ratio_by_hand():
    lr = algos.mismatch_log_ratio(P_TRAIN.log(), P_SAMPLER.log(), MASK)
    want = [math.log(2), math.log(0.5), math.log(10), 0.0]
    assert torch.allclose(lr, torch.tensor([want]), atol=1e-6)


def test_correction_weights_the_surrogate_token_by_token(tmp_path):
    """c_t multiplies each token's surrogate: c = 2 doubles loss and gradient; c = 0 on a row is
    the same gradient as that row's advantage set to 0."""
    cfg, task, tok = _setup(tmp_path)
    model = build_model(cfg, tok, 0)
    _ro, b = _batch(model, tok, task)

    def run(batch):
        model.zero_grad(set_to_none=True)
        st = policy_backward(model, batch, cfg.algo, group_size=2, max_new_tokens=12, temperature=1.0)
        return st["loss"], torch.cat([p.grad.flatten() for p in model.parameters()])

    import dataclasses
    l1, g1 = run(b)
    l2, g2 = run(dataclasses.replace(b, correction=2 * b.loss_mask))
    assert l2 == pytest.approx(2 * l1, rel=1e-5) and torch.allclose(g2, 2 * g1, atol=1e-7)
    keep = torch.ones(len(b), 1)
    keep[0] = 0
    l3, g3 = run(dataclasses.replace(b, correction=b.loss_mask * keep))
    l4, g4 = run(dataclasses.replace(b, adv=b.adv * keep))
    assert l3 == pytest.approx(l4, abs=1e-7) and torch.allclose(g3, g4, atol=1e-7)


def test_recompute_run_logs_mismatch_and_correction(tiny_overrides):
    cfg = load_config(None, tiny_overrides + ["train.steps=2", "algo.old_logprobs=recompute",
                                              "algo.rollout_correction=tis",
                                              "algo.rollout_correction_cap=2"])
    assert train(cfg, progress=False)["status"] == "finished"
    tr = [json.loads(x) for x in open(cfg.run_dir() / "metrics.jsonl")]
    tr = [r for r in tr if r["kind"] == "train"]
    for r in tr:  # fp32 on CPU, one model: the sampler and the trainer agree to rounding
        assert 0 <= r["rollout/mismatch_log_ratio_abs_mean"] < 1e-4
        assert r["rollout/correction_weight_mean"] == pytest.approx(1.0, abs=1e-3)


# ----------------------------------------------------------------------------- vLLM engine, cache
def test_vllm_engine_missing_gives_one_line_naming_the_gpu_extra(tmp_path):
    pytest.importorskip("harness.engines.vllm")  # the module itself imports without vLLM
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here; the missing-vLLM error cannot be observed")
    except ImportError:
        pass
    cfg, task, tok = _setup(tmp_path)
    model = build_model(cfg, tok, 0)
    with pytest.raises(ImportError) as e:
        make_engine("vllm", model, tok, model_path=tmp_path, cfg=cfg)
    msg = str(e.value)
    assert "\n" not in msg and "rlablate[gpu]" in msg and "rollout.engine = vllm" in msg
    # the CLI: one line, exit 1, before any warm-up (run.device=auto is the CPU here)
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "--quiet", "model.scale=tiny-0.3m",
                        "rollout.engine=vllm", "run.device=auto", f"run.results_dir={tmp_path / 'r'}",
                        f"run.cache_dir={tmp_path / 'c'}"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()  # the error, then train's wall-time line (issue 20)
    assert p.returncode == 1 and lines[0] == f"rlablate: {msg}", p.stderr
    assert len(lines) == 2 and lines[1].startswith("rlablate train: ") and lines[1].endswith(" s wall")
    assert not (tmp_path / "c" / "warmstart").exists()


def test_cache_keyword_follows_the_forward_signature(tmp_path):
    cfg, task, tok = _setup(tmp_path)
    model = build_model(cfg, tok, 0)
    import inspect
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    assert list({forward_params(model)[0]: None}) == [name]

    class Old(torch.nn.Module):  # the pre-5.24 signature
        def forward(self, input_ids, past_key_values=None):
            return input_ids

    assert forward_params(Old()) == ("past_key_values", False)
    # a real incremental decode with the keyword it chose equals the full forward
    ids = torch.tensor([[1, 5, 6, 7, 8]])
    with torch.no_grad():
        full = model(input_ids=ids).logits[:, -1]
        out = model(input_ids=ids[:, :-1], use_cache=True)
        step = model(input_ids=ids[:, -1:], use_cache=True, **{forward_params(model)[0]: output_cache(out)})
    assert torch.allclose(step.logits[:, -1], full, atol=1e-5)


# --------------------------------------------------------------------------------- on a GPU only
@pytest.mark.gpu
def test_cuda_bf16_fp32_head_lora_step(tmp_path):
    cfg, task, tok = _setup(tmp_path, LORA + ["model.dtype=bf16", "model.param_dtype=bf16",
                                              "algo.fp32_lm_head=true",
                                              "model.gradient_checkpointing=true"])
    model = prepare_policy(build_model(cfg, tok, 0).cuda(), cfg)
    with torch.no_grad():
        assert model(input_ids=torch.tensor([[1, 5, 6]], device="cuda")).logits.dtype == torch.float32
    _ro, batch = _batch(model, tok, task)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    _step(model, batch, cfg, steps=2)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all("lora_" in n for n in changed)


@pytest.mark.gpu
def test_vllm_engine_samples_and_syncs(tmp_path):
    pytest.importorskip("vllm", reason="vLLM not installed (extra [gpu])")
    cfg, task, tok = _setup(tmp_path, ["rollout.engine=vllm", "run.device=cuda"])
    model = build_model(cfg, tok, 0).cuda()
    path = tmp_path / "m"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    eng = make_engine("vllm", model, tok, model_path=path, cfg=cfg)
    items, _ = task.take("train", 0, 8)
    ro = eng.generate([i.prompt for i in items], max_new_tokens=12, temperature=1.0)
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
    m = ro.response_mask.bool()
    assert (lp[m] - ro.logprobs[m]).abs().mean() < 0.05
    eng.sync_weights(model)


def test_sampler_logprobs_cover_the_full_vocabulary_of_a_large_model(tmp_path):
    """Regression: GenerationConfig(top_k=None) let transformers fill in top_k = 50 (or the model's
    own generation_config), so with a vocabulary > 50 the sampler drew from a truncated
    distribution and its log-probs were off by a constant (~2 nats for 512 tokens)."""
    from transformers import AutoModelForCausalLM, Qwen2Config
    _cfg, task, tok = _setup(tmp_path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(
        vocab_size=512, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, intermediate_size=64, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id))
    model.generation_config.top_k = 20           # as a pretrained checkpoint's file may say
    model.generation_config.repetition_penalty = 1.5
    ro, _ = _batch(model, tok, task)
    assert (ro.response_ids >= 50).any()
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
    m = ro.response_mask.bool()
    assert (lp[m] - ro.logprobs[m]).abs().max() < 1e-4


def test_gpu_check_script_runs_tiny_on_cpu():
    """bench/gpu_check.py (what bench/gpu_check.sh runs on a GPU) on a toy model, so it cannot rot."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    assert subprocess.run(["bash", "-n", str(root / "bench" / "gpu_check.sh")]).returncode == 0
    assert subprocess.run(["bash", "-n", str(root / "bench" / "gpu_wheels.sh")]).returncode == 0
    p = subprocess.run([sys.executable, str(root / "bench" / "gpu_check.py"), "--tiny", "--device", "cpu"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout.split("RESULT ", 1)[1])
    assert res["bf16_fp32_head_ok"] and res["lora_only_adapters_changed"]
    assert res["logits_dtype_fp32_head_True"] == "float32"
    assert res["mismatch_bf16_fp32_head"] < 0.01   # generate vs teacher forcing: rounding only
    for k in ("hf_rollout_tokens_per_s", "update_full_tokens_per_s", "update_lora_r16_ckpt_tokens_per_s"):
        assert res[k] > 0


def test_shipped_gpu_config_and_sweep_resolve():
    """configs/gpu_qwen2.5-7b.yaml is a valid config; the scale sweep carries GPU resources and the
    vLLM memory share per model scale."""
    from pathlib import Path

    from harness.sweep.expand import expand
    from harness.sweep.spec import load_spec
    root = Path(__file__).resolve().parents[1]
    cfg = load_config(root / "configs" / "gpu_qwen2.5-7b.yaml")
    assert (cfg.rollout.engine, cfg.model.lora_rank, cfg.algo.rollout_correction) == ("vllm", 64, "tis")
    runs = expand(load_spec(root / "sweeps" / "gpu_qwen_scales.yaml"))
    assert len(runs) == 12
    by_size = {r.point["label.size"]: r for r in runs}
    assert by_size["7b"].resources["mem_gb"] == 160 and by_size["0.5b"].resources["mem_gb"] == 64
    assert all(r.resources["gpus_per_node"] == 1 for r in runs)
    assert by_size["7b"].cfg.rollout.gpu_memory_utilization == 0.35


def test_loaded_models_do_not_take_kernels_from_the_hub(tmp_path):
    """Regression (the H200 device check): transformers >= 5.2x's from_pretrained defaults to
    use_kernels=True, and model.train() under CUDA then fetches layer kernels from the Hub, which
    fails offline and changes one arm's numerics behind the config. Both loaders must switch it off."""
    from transformers import AutoModelForCausalLM, Qwen2Config
    from harness.models import load_model
    m = AutoModelForCausalLM.from_config(Qwen2Config(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, intermediate_size=32))
    m.save_pretrained(tmp_path / "m")
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "m").use_kernels  # the library's default
    assert load_model(tmp_path / "m").use_kernels is False
    cfg = load_config(None, ["model.scale=pretrained", f"model.path={tmp_path / 'm'}"])
    pad_only = type("Tok", (), {"pad_token_id": 0})()  # build_model reads only the pad id here
    assert build_model(cfg, pad_only, 0).use_kernels is False
