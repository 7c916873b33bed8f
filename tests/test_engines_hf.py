"""The fast paths of the loop (issue 7) against plain computations with the same transformers model:
our decode loop vs `generate`, a group's shared prompt pass vs one forward over prompt + response,
skipping rows with an identically zero loss vs forwarding them, and both names of the KV-cache
argument."""

from __future__ import annotations

import inspect

import torch
from transformers import Qwen2ForCausalLM, TopPLogitsWarper

from harness import algos
from harness.config import load_config
from harness.models import build_model, get_tokenizer
from harness.engines.hf import HFEngine, _sample
from harness.models import sequence_logprobs
from harness.tasks import make_task
from harness.batch import StepBatch
from harness.loop.update import inert_rows, policy_backward


def _setup(tmp_path, scale="tiny-0.3m"):
    cfg = load_config(None, [f"model.scale={scale}", f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    return cfg, task, tok, build_model(cfg, tok, 0)


def _one_pass_logprobs(model, ro):
    """log pi(response token) from one forward over prompt + response (no sharing, no trimming)."""
    ids = torch.cat([ro.prompt_ids, ro.response_ids], 1)
    attn = torch.cat([ro.prompt_mask, ro.response_mask], 1)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0)).logits
    logp = torch.log_softmax(logits[:, ro.prompt_ids.shape[1] - 1:-1].float(), -1)
    return logp.gather(-1, ro.response_ids.unsqueeze(-1)).squeeze(-1)


def test_greedy_decode_loop_equals_transformers_generate(tmp_path):
    _, task, tok, model = _setup(tmp_path)
    items, _ = task.take("train", 0, 5)
    prompts = [it.prompt for it in items for _ in range(3)]       # groups: shared prefill
    ro = HFEngine(model, tok).generate(prompts, max_new_tokens=12, temperature=0)
    out = model.generate(input_ids=ro.prompt_ids, attention_mask=ro.prompt_mask, do_sample=False,
                         max_new_tokens=12, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    ref = out[:, ro.prompt_ids.shape[1]:]
    for i in range(len(prompts)):
        n = int(ro.lengths[i])
        assert ro.response_ids[i, :n].tolist() == ref[i, :n].tolist()
        assert (ro.response_ids[i, n:] == tok.pad_token_id).all()
    # an untrained model rarely stops: some rows ran to the limit, and they are marked truncated
    assert ro.truncated.tolist() == [int(x) == 12 and tok.eos_token_id not in r.tolist()
                                     for x, r in zip(ro.lengths, ro.response_ids)]


def test_nucleus_filter_equals_transformers_top_p():
    torch.manual_seed(0)
    logits = torch.randn(64, 19) * 3
    for p in (0.5, 0.9, 0.99):
        ref = torch.log_softmax(TopPLogitsWarper(p)(None, logits.clone()), -1)
        torch.manual_seed(1)
        token, lp = _sample(logits, 1.0, p)
        assert torch.isfinite(ref.gather(-1, token[:, None])).all()       # only nucleus tokens drawn
        torch.testing.assert_close(lp, ref.gather(-1, token[:, None]).squeeze(-1))


def test_shared_prompt_pass_equals_one_forward_values_and_gradients(tmp_path):
    _, task, tok, model = _setup(tmp_path)
    items, _ = task.take("train", 0, 4)
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate([it.prompt for it in items for _ in range(4)],
                                       max_new_tokens=16, temperature=1.0)
    m = ro.response_mask.bool()
    grads = []
    for fn in (lambda: sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                         ro.response_mask)[0], lambda: _one_pass_logprobs(model, ro)):
        model.zero_grad(set_to_none=True)
        lp = fn()
        (lp * m * torch.linspace(0.5, 1.5, lp.numel()).view_as(lp)).sum().backward()
        grads.append((lp.detach(), torch.cat([p.grad.reshape(-1) for p in model.parameters()])))
    (lp_shared, g_shared), (lp_one, g_one) = grads
    assert (lp_shared[m] - lp_one[m]).abs().max() < 1e-5
    assert (g_shared - g_one).norm() / g_one.norm() < 1e-5          # float rounding only
    # and the sampler's own log-probs agree with both
    assert (ro.logprobs[m] - lp_one[m]).abs().max() < 1e-5


_QWEN2_CACHE_KW = "cache" if "cache" in inspect.signature(Qwen2ForCausalLM.forward).parameters \
    else "past_key_values"


class _OldSignatureQwen2(Qwen2ForCausalLM):
    """A transformers model whose forward takes the KV cache as `past_key_values` (the name before
    transformers 5.24), passing it on under today's name."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=None, logits_to_keep=0, **kwargs):
        assert "cache" not in kwargs
        # under the name the installed transformers' Qwen2 takes (cache= from 5.24, before it
        # past_key_values=: make test-vllm runs this file under 5.19 too)
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                               use_cache=use_cache, logits_to_keep=logits_to_keep,
                               **{_QWEN2_CACHE_KW: past_key_values}, **kwargs)


def test_engine_and_logprobs_use_either_cache_argument_name(tmp_path):
    _, task, tok, model = _setup(tmp_path)
    old = _OldSignatureQwen2(model.config)
    old.load_state_dict(model.state_dict())
    prompts = [it.prompt for it in task.take("train", 0, 3)[0] for _ in range(2)]
    outs = []
    for mdl in (model, old):
        torch.manual_seed(5)
        ro = HFEngine(mdl, tok).generate(prompts, max_new_tokens=10, temperature=1.0)
        lp, _ = sequence_logprobs(mdl, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask)
        outs.append((ro, lp))
    (a, lpa), (b, lpb) = outs
    assert torch.equal(a.response_ids, b.response_ids) and a.texts == b.texts
    torch.testing.assert_close(a.logprobs, b.logprobs)
    torch.testing.assert_close(lpa, lpb)


def test_rows_with_zero_loss_are_skipped_and_the_gradient_is_unchanged(tmp_path):
    cfg, task, tok, model = _setup(tmp_path)
    items, _ = task.take("train", 0, 4)
    G = 4
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate([it.prompt for it in items for _ in range(G)], max_new_tokens=10,
                                       temperature=1.0)
    mask = ro.response_mask.float()
    scores = torch.tensor([1.0, 0, 1, 0] + [0.0] * 4 + [1.0] * 4 + [0, 0, 0, 1])  # groups 1, 2 all equal
    adv = algos.ADVANTAGES["group_norm"](scores, mask, group_size=G, eps=1e-6)
    b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask, mask, adv,
                  ro.logprobs + 0.05 * torch.randn_like(ro.logprobs) * mask, scores > 0)
    a = cfg.algo
    w = algos.AGGREGATIONS[a.aggregation](mask, group_size=G, max_new_tokens=10)
    assert inert_rows(b, w, None, a).tolist() == [False] * 4 + [True] * 8 + [False] * 4
    model.zero_grad(set_to_none=True)
    st = policy_backward(model, b, a, group_size=G, max_new_tokens=10, temperature=1.0)
    g_skip = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    # the full formula over every row, the skipped ones included
    model.zero_grad(set_to_none=True)
    logp = _one_pass_logprobs(model, ro)
    out = algos.SURROGATES[a.surrogate](algos.RATIOS[a.ratio](logp, b.logp_old, mask), adv, logp,
                                        clip_low=a.clip_low, clip_high=a.clip_high)
    loss = (out.loss * w).sum()
    loss.backward()
    g_full = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert g_full.abs().sum() > 0
    assert (g_skip - g_full).norm() / g_full.norm() < 1e-5
    assert abs(st["loss"] - loss.item()) < 1e-6
    assert st["tokens"] == mask[:4].sum() + mask[12:].sum()       # statistics: the forwarded rows
    # with a KL term every row carries gradient
    kl = load_config(None, ["algo.kl=k3", "algo.kl_coef=0.1"]).algo
    assert not inert_rows(b, w, None, kl).any()
    # a minibatch with nothing to learn leaves zero gradients (Adam's momentum still steps), not None
    model.zero_grad(set_to_none=True)
    policy_backward(model, b.rows(torch.arange(4, 12)), a, group_size=G, max_new_tokens=10, temperature=1.0)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
