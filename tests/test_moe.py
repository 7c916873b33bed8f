"""A tiny Mixture-of-Experts scale (Qwen2-MoE, random init) and routing replay
(algo.routing_replay): the HF engine records the experts of every token it feeds, the trainer's
forward routes by the registered choice and counts the tokens whose expert set changed."""

from __future__ import annotations

import json

import pytest
import torch

from harness import algos
from harness.batch import sampled_mask
from harness.config import ConfigError, load_config
from harness.engines.hf import HFEngine
from harness.loop import train
from harness.models import build_model, get_tokenizer, sequence_logprobs
from harness.moe import RouterTape
from harness.tasks import make_task

R = algos.ROUTING_REPLAYS


def _moe(tmp_path):
    cfg = load_config(None, ["model.scale=tiny-moe", f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    model = build_model(cfg, tok, 0)
    items, _ = task.take("train", 0, 8)
    return model, tok, [it.prompt for it in items for _ in range(4)]


def _trainer(model, ro, name):
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                  ro.response_mask, 1.0, routing=(ro.routing_prompt, ro.routing_resp, R[name]))
    return lp, RouterTape.attach(model).last


def test_the_choices_by_hand():
    nat, rec = torch.tensor([[0, 1], [2, 3], [4, 5]]), torch.tensor([[1, 0], [6, 3], [-1, -1]])
    assert R["none"](nat, rec).tolist() == nat.tolist()
    assert R["r3"](nat, rec).tolist() == [[1, 0], [6, 3], [4, 5]]    # unrecorded: its own


def test_engine_records_the_experts_of_every_fed_token(tmp_path):
    model, tok, prompts = _moe(tmp_path)
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate(prompts, max_new_tokens=12, temperature=1.0)
    B, Tp = ro.prompt_ids.shape
    assert ro.routing_prompt.shape == (B, Tp, 4, 2) and ro.routing_resp.shape == (B, ro.response_ids.shape[1], 4, 2)
    assert (ro.routing_prompt >= 0).all() and (ro.routing_prompt < 8).all()
    fed = ro.routing_resp[..., 0, 0] >= 0          # every response token but each row's last one
    last = ro.lengths - 1
    assert fed.sum(-1).tolist() == last.tolist()
    dense = load_config(None, ["run.cache_dir=" + str(tmp_path)])
    assert HFEngine(build_model(dense, get_tokenizer(dense, make_task(dense).corpus), 0), tok).tape is None


def test_same_weights_fp32_replay_and_not_both_equal_the_sampler(tmp_path):
    """Sampler and trainer share the weights, fp32: no token changes experts, and the trainer's
    log-probs equal the sampler's with replay and without it."""
    model, tok, prompts = _moe(tmp_path)
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate(prompts, max_new_tokens=16, temperature=1.0)
    m = sampled_mask(ro).bool()
    for name in ("none", "r3"):
        lp, (changed, counted) = _trainer(model, ro, name)
        assert changed == 0 and counted == int((ro.lengths - 1).sum())
        assert torch.allclose(lp[m], ro.logprobs[m], atol=2e-6)


def test_replay_removes_the_routing_mismatch_of_a_sampler_whose_router_rounds(tmp_path):
    """The sampler's router computes with bf16-rounded weights (a precision mismatch confined to
    the router, as an inference kernel could have); the trainer's weights are the fp32 ones.
    Without replay some tokens change experts and the log-probs differ by up to ~1e-2 (measured: 11
    of 978 tokens, max 9.0e-3); with R3 the
    tokens whose own top-k still differs are routed as sampled, and the log-probs agree to the
    router-weight rounding (measured max 1.1e-5)."""
    model, tok, prompts = _moe(tmp_path)
    routers = RouterTape.attach(model).routers
    exact = [r.weight.detach().clone() for r in routers]
    with torch.no_grad():
        for r in routers:
            r.weight.copy_(r.weight.to(torch.bfloat16).float())
    torch.manual_seed(1)
    ro = HFEngine(model, tok).generate(prompts * 2, max_new_tokens=24, temperature=1.0)
    with torch.no_grad():
        for r, w in zip(routers, exact):
            r.weight.copy_(w)
    m = sampled_mask(ro).bool()
    lp_none, (ch_none, counted) = _trainer(model, ro, "none")
    lp_r3, (ch_r3, _) = _trainer(model, ro, "r3")
    d_none, d_r3 = (lp_none - ro.logprobs)[m].abs(), (lp_r3 - ro.logprobs)[m].abs()
    print(f"changed none {ch_none}/{counted} r3 {ch_r3}/{counted}; max|dlogp| none "
          f"{d_none.max():.2e} r3 {d_r3.max():.2e}; mean none {d_none.mean():.2e} r3 {d_r3.mean():.2e}")
    # without replay a change in one layer moves the hidden states of the next ones, so more
    # tokens change there than the trainer's own top-k differs by under replay
    assert 0 < ch_r3 <= ch_none < counted
    assert d_r3.max() < 2e-3 and d_none.max() > 10 * d_r3.max()


def test_replay_keeps_the_router_gradient(tmp_path):
    model, tok, prompts = _moe(tmp_path)
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate(prompts, max_new_tokens=8, temperature=1.0)
    lp, _ = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                              1.0, routing=(ro.routing_prompt, ro.routing_resp, R["r3"]))
    (lp * sampled_mask(ro)).sum().backward()
    assert all(r.weight.grad is not None and r.weight.grad.abs().sum() > 0
               for r in RouterTape.attach(model).routers)


def test_replay_on_a_dense_model_or_vllm_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"^algo.routing_replay = 'r3': model.scale = tiny-1m is dense"):
        load_config(None, ["algo.routing_replay=r3"])
    with pytest.raises(ConfigError, match=r"does not record the experts it chose \(vLLM's "
                       r"enable_return_routed_experts needs its Model Runner V2, which needs Triton"):
        load_config(None, ["algo.routing_replay=r3", "model.scale=tiny-moe", "rollout.engine=vllm"])


def test_moe_gspo_with_replay_runs_the_loop_and_logs_the_changed_fraction(tiny_overrides, monkeypatch):
    """tiny-moe, GSPO + R3, bf16 autocast (the mismatch is real): 3 steps; a verifier that calls
    every other item correct makes the advantages non-zero so rows are forwarded."""
    from harness.tasks.chain_sum import ChainSumTask
    monkeypatch.setattr(ChainSumTask, "score", lambda self, resp, item: float(len(resp) % 2 == 0))
    cfg = load_config(None, tiny_overrides + ["model.scale=tiny-moe", "algo.preset=gspo",
                                              "algo.routing_replay=r3", "model.dtype=bf16",
                                              "train.steps=3"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    fr = [r["moe/routing_changed_frac"] for r in rows if r.get("kind") == "train"]
    assert len(fr) == 3 and all(0 <= f < 0.5 for f in fr)
