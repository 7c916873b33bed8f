"""Forced length interruptions (ScaleRL; rollout.think_budget): the HF engine writes the
end-of-thinking phrase after the budget, marks it as forced, and the forced tokens never reach
the loss."""

from __future__ import annotations

import json

import pytest
import torch

from harness.batch import StepBatch, loss_mask_of, sampled_mask
from harness.config import load_config
from harness.engines.hf import HFEngine
from harness.loop import train
from harness.loop.update import policy_backward
from harness.models import build_model, get_tokenizer
from harness.tasks import make_task

from test_engines_hf import _one_pass_logprobs


def _setup(tmp_path):
    cfg = load_config(None, ["model.scale=tiny-0.3m", f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    return cfg, task, tok, build_model(cfg, tok, 0)


def _interrupted(tmp_path, budget=5, max_new=14):
    cfg, task, tok, model = _setup(tmp_path)
    items, _ = task.take("train", 0, 4)
    prompts = [it.prompt for it in items for _ in range(3)]
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate(prompts, max_new_tokens=max_new, temperature=1.0,
                                       think_budget=budget, interrupt=task.interrupt_phrase)
    return cfg, tok, model, ro


def test_the_budget_forces_the_phrase_and_the_sampler_saw_it(tmp_path):
    """Every row still going after 5 sampled tokens has the phrase ('=' for compact chain_sum)
    at column 5, marked forced with log-prob 0; rows that ended before have nothing forced. The
    sampled tokens after the phrase have the log-probs of a teacher-forced pass over the whole
    response, phrase included: the sampler continued from it."""
    cfg, tok, model, ro = _interrupted(tmp_path)
    eq = tok.encode("=", add_special_tokens=False)
    assert len(eq) == 1
    ended_early = (ro.lengths <= 5) & ~ro.truncated
    cut = ro.forced.any(-1)
    assert cut.any() and (cut == ~ended_early).all()
    for i in range(len(ro.texts)):
        if cut[i]:
            assert ro.forced[i].nonzero().flatten().tolist() == [5]
            assert int(ro.response_ids[i, 5]) == eq[0] and float(ro.logprobs[i, 5]) == 0.0
            assert int(ro.response_mask[i, 5]) == 1          # in the response: context, not loss
    ref = _one_pass_logprobs(model, ro)
    m = sampled_mask(ro).bool()
    assert torch.allclose(ro.logprobs[m], ref[m], atol=1e-4)
    assert (sampled_mask(ro)[ro.forced] == 0).all() and (loss_mask_of(ro, False)[ro.forced] == 0).all()


def test_forced_tokens_carry_no_gradient(tmp_path):
    """policy_backward's gradient does not change, bit for bit, when the forced tokens' advantage
    and pi_old are set to anything; the sampled tokens after the phrase do carry a gradient."""
    cfg, tok, model, ro = _interrupted(tmp_path)
    a = cfg.algo
    adv = torch.randn(ro.response_ids.shape)

    def grad(adv, logp_old):
        b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                      loss_mask=loss_mask_of(ro, False), adv=adv, logp_old=logp_old,
                      correct=torch.zeros(len(ro.texts), dtype=torch.bool))
        model.zero_grad()
        policy_backward(model, b, a, group_size=3, max_new_tokens=14, temperature=1.0)
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    g = grad(adv, ro.logprobs)
    f = ro.forced
    g2 = grad(torch.where(f, torch.full_like(adv, 1e6), adv), torch.where(f, torch.full_like(adv, -30.0), ro.logprobs))
    assert torch.equal(g, g2)
    after = torch.zeros_like(adv)  # only the tokens after the phrase carry an advantage
    after[:, 6:] = 1.0
    assert grad(after * sampled_mask(ro), ro.logprobs).abs().sum() > 0


def test_budget_and_phrase_rules_and_the_loop_logs_the_interruption_rate(tiny_overrides):
    with pytest.raises(ValueError, match="cannot spell it"):
        _, task, tok, model = _setup(tiny_overrides[-1].split("=", 1)[1])
        HFEngine(model, tok).generate(["1+2="], max_new_tokens=10, temperature=1.0, think_budget=3,
                                      interrupt="Time is up")
    cfg = load_config(None, tiny_overrides + ["rollout.think_budget=6"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    fracs = [r["rollout/interrupted_frac"] for r in rows if r.get("kind") == "train"]
    assert len(fracs) == 4 and all(0 < f <= 1 for f in fracs)
