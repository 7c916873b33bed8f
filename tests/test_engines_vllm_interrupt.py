"""Forced length interruptions (ScaleRL; rollout.think_budget) in the vLLM engine, against real
vLLM (its CPU build, `make test-vllm`; skipped where vLLM is not installed), on the warm start of
the embedded default (tiny-1m, compact chain_sum, whose phrase is '='): the budget forces the
phrase, the forced tokens carry no gradient, the HF and vLLM engines agree on which rows are cut
and where the phrase sits, and the loop logs the interruption rate with vLLM sampling."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
import torch

from harness.batch import StepBatch, loss_mask_of, sampled_mask
from harness.config import load_config
from harness.engines import make_engine
from harness.engines.hf import HFEngine
from harness.loop import train
from harness.loop.update import policy_backward
from harness.loop.warm_start import get_warm_start, load_warm_model
from harness.models import get_tokenizer, sequence_logprobs
from harness.tasks import make_task

pytestmark = pytest.mark.vllm
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: not a fraction of the shared RAM
BUDGET, T_NEW = 8, 48   # greedy answers of this warm start are 7-11 tokens: about half are cut
BASE = ["rollout.engine=vllm", "run.device=cpu", f"rollout.think_budget={BUDGET}"]


@pytest.fixture(scope="module")
def warm(cache_dir):
    """The default config's warm start (cached: test_engines_vllm_run.py shares it) in vLLM."""
    cfg = load_config("configs/default.yaml", BASE + [f"run.cache_dir={cache_dir}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    path, _ = get_warm_start(cfg, tok, task, progress=False)
    model = load_warm_model(path, "cpu")
    items, _ = task.take("train", 0, 64)
    eng = make_engine("vllm", model, tok, model_path=path, cfg=cfg)
    return SimpleNamespace(cfg=cfg, task=task, tok=tok, model=model, eng=eng,
                           prompts=[it.prompt for it in items], phrase=task.interrupt_phrase)


def _generate(engine, w, prompts, temperature, seed=0):
    torch.manual_seed(seed)
    return engine.generate(prompts, max_new_tokens=T_NEW, temperature=temperature,
                           think_budget=BUDGET, interrupt=w.phrase)


def _check_forced(w, ro):
    """Rows cut = rows not ended within the budget; the phrase sits at columns B.. B+k-1 of every
    cut row, forced, log-prob 0, in the response mask (context) but not in the sampled mask."""
    ph = w.tok.encode(w.phrase, add_special_tokens=False)
    cut = ro.forced.any(-1)
    ended_early = (ro.lengths <= BUDGET) & ~ro.truncated
    assert (cut == ~ended_early).all()
    for i in cut.nonzero().flatten().tolist():
        assert ro.forced[i].nonzero().flatten().tolist() == list(range(BUDGET, BUDGET + len(ph)))
        assert ro.response_ids[i, BUDGET:BUDGET + len(ph)].tolist() == ph
        assert (ro.logprobs[i, BUDGET:BUDGET + len(ph)] == 0).all()
        assert (ro.response_mask[i, BUDGET:BUDGET + len(ph)] == 1).all()
    assert (sampled_mask(ro)[ro.forced] == 0).all() and (loss_mask_of(ro, False)[ro.forced] == 0).all()
    return cut


def test_hf_and_vllm_cut_the_same_rows_at_the_same_place(warm):
    """Greedy decoding of the same weights: both engines write the same responses, cut the same
    rows and put the phrase at the same columns; the sampled tokens' log-probs agree."""
    hf = _generate(HFEngine(warm.model, warm.tok), warm, warm.prompts, 0.0)
    vl = _generate(warm.eng, warm, warm.prompts, 0.0)
    cut = _check_forced(warm, vl)
    _check_forced(warm, hf)
    frac = cut.float().mean().item()
    print(f"\ngreedy, budget {BUDGET}: {int(cut.sum())} of {len(cut)} rows cut by both engines")
    assert 0.2 < frac < 0.8                          # both kinds of rows are present
    assert torch.equal(hf.forced, vl.forced) and torch.equal(hf.lengths, vl.lengths)
    assert torch.equal(hf.response_ids, vl.response_ids) and hf.texts == vl.texts
    assert torch.equal(hf.truncated, vl.truncated)
    m = sampled_mask(vl).bool()
    d = (hf.logprobs - vl.logprobs)[m].abs()
    print(f"greedy log-probs, HF vs vLLM: mean |diff| {d.mean():.2e}, max {d.max():.2e}")
    assert d.max() < 1e-4


def test_sampled_interruptions_continue_from_the_phrase(warm):
    """Sampling at T = 1 (64 prompts x 4): every row not ended after B tokens is cut at column B;
    the tokens sampled after the phrase have the log-probs of one teacher-forced pass over the
    whole response, phrase included (the second request continued from it); same seed, same
    rollout."""
    prompts = [p for p in warm.prompts for _ in range(4)]
    ro = _generate(warm.eng, warm, prompts, 1.0, seed=3)
    cut = _check_forced(warm, ro)
    assert 0 < cut.float().mean() < 1
    with torch.no_grad():
        ref, _ = sequence_logprobs(warm.model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                   ro.response_mask, temperature=1.0)
    m = sampled_mask(ro).bool()
    after = m.clone()
    after[:, :BUDGET + 1] = False                    # the sampled tokens after the phrase
    assert (after & cut.unsqueeze(-1)).sum() > 50
    d = (ref - ro.logprobs)[m].abs()
    print(f"T=1: {int(cut.sum())} of {len(cut)} cut; trainer vs vLLM log-probs over "
          f"{int(m.sum())} sampled tokens: mean {d.mean():.2e}, max {d.max():.2e}")
    assert d.max() < 1e-4
    again = _generate(warm.eng, warm, prompts, 1.0, seed=3)
    assert torch.equal(again.response_ids, ro.response_ids) and torch.equal(again.forced, ro.forced)


def test_forced_tokens_of_a_vllm_rollout_carry_no_gradient(warm):
    """policy_backward's gradient does not change, bit for bit, when the forced tokens' advantage
    and pi_old are set to anything; the sampled tokens after the phrase do carry a gradient."""
    ro = _generate(warm.eng, warm, [p for p in warm.prompts[:16] for _ in range(4)], 1.0, seed=5)
    assert ro.forced.any()
    a = warm.cfg.algo

    def grad(adv, logp_old):
        b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                      loss_mask=loss_mask_of(ro, False), adv=adv, logp_old=logp_old,
                      correct=torch.zeros(len(ro.texts), dtype=torch.bool))
        warm.model.zero_grad()
        policy_backward(warm.model, b, a, group_size=4, max_new_tokens=T_NEW, temperature=1.0)
        return torch.cat([p.grad.flatten() for p in warm.model.parameters()])

    adv = torch.randn(ro.response_ids.shape)
    f = ro.forced
    g = grad(adv, ro.logprobs)
    g2 = grad(torch.where(f, torch.full_like(adv, 1e6), adv),
              torch.where(f, torch.full_like(adv, -30.0), ro.logprobs))
    assert torch.equal(g, g2)
    after = torch.zeros_like(adv)
    after[:, BUDGET + 1:] = 1.0
    assert grad(after * sampled_mask(ro), ro.logprobs).abs().sum() > 0
    warm.model.zero_grad()


def test_the_loop_logs_the_interruption_rate_with_vllm(warm, tmp_path, cache_dir):
    cfg = load_config("configs/default.yaml", BASE + [
        f"run.cache_dir={cache_dir}", f"run.results_dir={tmp_path}", "train.steps=2",
        "rollout.prompts_per_step=8", "eval.every=2", "eval.in_dist.n_items=16",
        "eval.held_out.n_items=16", "run.threads=2"])
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    fracs = [r["rollout/interrupted_frac"] for r in rows if r.get("kind") == "train"]
    print(f"loop with vLLM, budget {BUDGET}: interrupted_frac per step {fracs}")
    assert len(fracs) == 2 and all(0 < x < 1 for x in fracs)
