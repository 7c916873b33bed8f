"""The design space as a whole: the gradient does not depend on micro-batching, and every preset
runs in the real loop. (Invalid combinations of choices: the table in config_cases.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import algos
from harness.config import load_config


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors on a shared 2-core machine: one thread is ~100x faster than contended two."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ---- micro-batch invariance ---------------------------------------------------------------------
def _tiny_lm(seed=0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=32,
                      tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).float()


def _fake_batch(seed=1, P=2, G=4, Tp=3, T=6):
    """2 prompts x G=4 responses of unequal lengths (one fully masked), random advantages, and a
    pi_old / pi_ref that differ from pi so ratios, clips and KL are all non-trivial."""
    import torch
    from harness.batch import StepBatch
    g = torch.Generator().manual_seed(seed)
    B = P * G
    lengths = torch.tensor([6, 2, 4, 1, 5, 3, 6, 2])
    rmask = (torch.arange(T) < lengths.unsqueeze(-1)).long()
    loss_mask = rmask.float()
    loss_mask[3] = 0.0   # e.g. a truncated response under overlong filtering
    return StepBatch(
        prompt_ids=torch.randint(0, 16, (B, Tp), generator=g), prompt_mask=torch.ones(B, Tp, dtype=torch.long),
        response_ids=torch.randint(0, 16, (B, T), generator=g), response_mask=rmask, loss_mask=loss_mask,
        adv=torch.randn(B, 1, generator=g).expand(B, T) * rmask,
        logp_old=-2.8 + 0.3 * torch.randn(B, T, generator=g),
        correct=torch.tensor([1, 0, 1, 0, 0, 1, 1, 0], dtype=torch.bool),
        logp_ref=-2.8 + 0.3 * torch.randn(B, T, generator=g))


def _grads(model, batch, algo):
    import torch
    from harness.loop.update import policy_backward
    model.zero_grad(set_to_none=True)
    st = policy_backward(model, batch, algo, group_size=4, max_new_tokens=8, temperature=1.0)
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]), st


AGG_RATIO = [("seq_mean_token_mean", "token"), ("seq_mean_token_mean", "sequence"),
             ("token_mean", "token"), ("seq_sum_constant", "prefix_min"), ("prompt_mean", "token")]


@pytest.mark.parametrize("aggregation,ratio", AGG_RATIO)
@pytest.mark.parametrize("surrogate", ["ppo_clip", "cispo"])
def test_gradient_does_not_depend_on_micro_batches(aggregation, ratio, surrogate):
    import torch
    from harness.config import AlgoCfg
    model, batch = _tiny_lm(), _fake_batch()
    ref = None
    for n in (1, 2, 4, 8):
        algo = AlgoCfg(aggregation=aggregation, ratio=ratio, surrogate=surrogate, micro_batches=n,
                       kl="k3", kl_coef=0.1, pos_nll_coef=0.1, clip_low=0.1, clip_high=0.1)
        g, st = _grads(model, batch, algo)
        if ref is None:
            ref, ref_loss = g, st["loss"]
            assert g.abs().sum() > 0
        else:
            torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-7)
            assert st["loss"] == pytest.approx(ref_loss, rel=1e-5)


def test_micro_batched_gradient_equals_the_full_minibatch_formula():
    """Against an independent computation: sum(w * loss_t) over the whole minibatch, one pass."""
    import torch
    from harness import algos
    from harness.config import AlgoCfg
    from harness.models import sequence_logprobs
    model, b = _tiny_lm(), _fake_batch()
    g4, _ = _grads(model, b, AlgoCfg(aggregation="token_mean", micro_batches=4))
    model.zero_grad(set_to_none=True)
    logp, _ = sequence_logprobs(model, b.prompt_ids, b.prompt_mask, b.response_ids, b.response_mask)
    out = algos.SURROGATES["ppo_clip"](algos.RATIOS["token"](logp, b.logp_old, b.loss_mask), b.adv, logp,
                                       clip_low=0.2, clip_high=0.2)
    (out.loss * algos.AGGREGATIONS["token_mean"](b.loss_mask, group_size=4, max_new_tokens=8)).sum().backward()
    g_full = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(g4, g_full, rtol=1e-5, atol=1e-7)
    # and the naive per-micro-batch token mean (what the invariance guards against) differs
    model.zero_grad(set_to_none=True)
    for j in torch.arange(8).chunk(4):
        bj = b.rows(j)
        lp, _ = sequence_logprobs(model, bj.prompt_ids, bj.prompt_mask, bj.response_ids, bj.response_mask)
        o = algos.SURROGATES["ppo_clip"](algos.RATIOS["token"](lp, bj.logp_old, bj.loss_mask), bj.adv, lp,
                                         clip_low=0.2, clip_high=0.2)
        ((o.loss * algos.AGGREGATIONS["token_mean"](bj.loss_mask, group_size=2, max_new_tokens=8)).sum() / 4).backward()
    g_naive = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    assert not torch.allclose(g_naive, g_full, rtol=1e-3)


# ---- KL to the frozen reference ------------------------------------------------------------------
def _train_rows(overrides):
    import json
    from harness.loop import train
    cfg = load_config(None, overrides)
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished", summary.get("error")
    rows = [json.loads(l) for l in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == "train"], cfg


@pytest.mark.parametrize("kl,n_loads", [(["algo.kl=none"], 1),
                                        (["algo.kl=k3", "algo.kl_coef=0.04"], 2),
                                        (["algo.kl=k1", "algo.kl_coef=0.05", "algo.kl_mode=reward",
                                          "algo.advantage=batch_norm"], 2)])
def test_reference_model_is_loaded_only_when_kl_is_on(tiny_overrides, monkeypatch, kl, n_loads):
    import math
    from harness.loop import parts as parts_mod
    calls = []
    real = parts_mod.load_warm_model
    monkeypatch.setattr(parts_mod, "load_warm_model", lambda *a, **k: calls.append(1) or real(*a, **k))
    # one minibatch per step: step 1's only update is computed at the reference policy itself
    rows, _ = _train_rows(tiny_overrides + ["train.steps=2", "algo.minibatches=1"] + kl)
    assert len(calls) == n_loads
    kls = [r["loss/kl"] for r in rows]
    if n_loads == 1:
        assert kls == [None, None]
    else:
        assert all(x is not None and math.isfinite(x) for x in kls)
        assert kls[0] == pytest.approx(0.0, abs=1e-4)   # step 1 starts at the reference policy


# ---- filters ------------------------------------------------------------------------------------
def _fake_rollout(texts, tp=2, tr=3):
    import torch
    from harness.batch import Rollout
    B = len(texts)
    return Rollout(torch.full((B, tp), 7), torch.ones(B, tp, dtype=torch.long), torch.full((B, tr), 5),
                   torch.ones(B, tr, dtype=torch.long), torch.full((B, tr), -1.0),
                   torch.full((B,), tr), torch.zeros(B, dtype=torch.bool), list(texts))


def test_informative_groups():
    import torch
    from harness.algos import informative_groups
    s = torch.tensor([1.0, 0, 1, 0, 0, 0, 1, 1, 0])
    assert informative_groups(s, 3).tolist() == [True, False, True]


def test_cat_rollouts_pads_prompts_left_and_responses_right():
    from harness.batch import cat_rollouts
    a, b = _fake_rollout(["x"], tp=1, tr=2), _fake_rollout(["y"], tp=3, tr=4)
    c = cat_rollouts([a, b], pad_id=0)
    assert c.prompt_ids.tolist() == [[0, 0, 7], [7, 7, 7]] and c.prompt_mask[0].tolist() == [0, 0, 1]
    assert c.response_ids.tolist() == [[5, 5, 0, 0], [5, 5, 5, 5]] and c.response_mask[0].tolist() == [1, 1, 0, 0]
    assert c.logprobs[0].tolist() == [-1.0, -1.0, 0.0, 0.0] and c.texts == ["x", "y"]


def _collect(rounds_scores, *, group_filter="zero_variance", max_rounds=5, n_groups=2, G=2):
    """Each round's scores are given; the fake sampler writes the score into the response text."""
    from harness.loop.sample import collect_groups
    it = iter(rounds_scores)
    drawn = []

    def draw(n):
        drawn.append(n)
        return [SimpleNamespace(prompt="p")] * n

    return collect_groups(lambda prompts: _fake_rollout([str(x) for x in next(it)]), draw,
                          lambda text, item: float(text), n_groups=n_groups, group_size=G,
                          group_filter=algos.GROUP_FILTERS[group_filter], max_rounds=max_rounds, pad_id=0), drawn


def test_dynamic_sampling_refills_until_the_batch_is_full():
    # round 1: groups (1,1) all-correct, (1,0) informative; round 2: (0,1) informative, (0,0)
    (ro, _, scores, rows, rounds), drawn = _collect([[1, 1, 1, 0], [0, 1, 0, 0], [9, 9, 9, 9]])
    assert rounds == 2 and drawn == [2, 2]
    assert rows.tolist() == [2, 3, 4, 5]            # group 1 of round 1, group 0 of round 2
    assert scores[rows].tolist() == [1, 0, 0, 1] and len(ro.texts) == 8


def test_dynamic_sampling_drops_surplus_and_stops_at_the_cap():
    (_, _, _, rows, rounds), _ = _collect([[1, 0, 0, 1]], n_groups=1, G=2, max_rounds=3)
    assert rounds == 1 and rows.tolist() == [0, 1]  # two passed, one needed: the first is kept
    (_, _, _, rows, rounds), _ = _collect([[1, 1, 0, 0], [1, 1, 1, 0]], max_rounds=2)
    assert rounds == 2 and rows.tolist() == [6, 7]  # cap hit with one group: train on it
    (_, _, _, rows, rounds), _ = _collect([[1, 1, 0, 0]], max_rounds=1)
    assert rounds == 1 and rows.tolist() == []      # zero-variance filtering, nothing left


def test_no_filter_keeps_everything_in_one_round():
    (_, _, _, rows, rounds), _ = _collect([[1, 1, 0, 0]], group_filter="none", max_rounds=1)
    assert rounds == 1 and rows.tolist() == [0, 1, 2, 3]


def test_masked_rows_contribute_no_gradient():
    import torch
    from harness.config import AlgoCfg
    model, b = _tiny_lm(), _fake_batch()
    g1, _ = _grads(model, b, AlgoCfg(aggregation="token_mean"))
    b.adv[3] = 100.0                      # row 3 is masked out of the loss (loss_mask 0)
    g2, _ = _grads(model, b, AlgoCfg(aggregation="token_mean"))
    torch.testing.assert_close(g1, g2)


def test_dynamic_sampling_and_overlong_shaping_in_the_loop(tiny_overrides):
    rows, cfg = _train_rows(tiny_overrides + [
        "train.steps=2", "algo.group_filter=zero_variance", "algo.max_gen_rounds=3",
        "algo.mask_truncated=true", "algo.overlong_cache=8", "algo.aggregation=token_mean"])
    for r in rows:
        assert 1 <= r["rollout/gen_rounds"] <= 3
        assert 0 <= r["rollout/kept_groups"] <= cfg.rollout.prompts_per_step
        assert (r["loss/policy"] is None) == (r["rollout/kept_groups"] == 0)
    # generated tokens of every round are counted, kept or not
    assert rows[0]["compute/tokens"] >= rows[0]["rollout/gen_rounds"] * 16


# ---- numerics -----------------------------------------------------------------------------------
def test_fp32_lm_head_gives_fp32_logits_for_a_bf16_model():
    import torch
    from harness.numerics import use_fp32_lm_head
    ids = torch.randint(0, 16, (2, 5))
    plain = _tiny_lm().to(torch.bfloat16)
    assert plain(input_ids=ids).logits.dtype == torch.bfloat16
    model = use_fp32_lm_head(_tiny_lm().to(torch.bfloat16))
    out = model(input_ids=ids, output_hidden_states=True)
    assert out.logits.dtype == torch.float32
    h = out.hidden_states[-1]                               # bf16 final hidden state
    want = h.float() @ model.get_output_embeddings().weight.float().T
    torch.testing.assert_close(out.logits, want)
    # and it differs from the bf16 head (the point of the fix)
    assert not torch.equal(plain(input_ids=ids).logits.float(), out.logits)
    assert set(model.state_dict()) == set(plain.state_dict())  # checkpoints unchanged


def test_fp32_lm_head_is_an_exact_no_op_for_fp32_models():
    import torch
    from harness.numerics import use_fp32_lm_head
    ids = torch.randint(0, 16, (2, 5))
    a = _tiny_lm()(input_ids=ids).logits
    b = use_fp32_lm_head(_tiny_lm())(input_ids=ids).logits
    assert torch.equal(a, b)


def test_fp32_lm_head_in_the_loop(tiny_overrides, tmp_path):
    """The switch reaches the loop: under bf16 compute, the policy the loop builds, the model its
    sampler samples with, and the lagged sampler's copy all return fp32 logits with it and bf16
    logits without it (a flag that were ignored would leave them bf16); a run with it trains."""
    import torch
    from harness import distributed
    from harness.loop.parts import build_parts
    base = tiny_overrides + ["train.steps=2", "model.dtype=bf16", "algo.rollout_lag=1"]
    ids = torch.tensor([[1, 5, 6, 7]])
    for head, want in (("true", torch.float32), ("false", torch.bfloat16)):
        over = base + [f"algo.fp32_lm_head={head}", f"run.results_dir={tmp_path / head}"]
        p = build_parts(load_config(None, over), distributed.DistInfo(), progress=False)
        for m in (p.policy, p.engine.model, p.sampler.model):
            assert m(input_ids=ids).logits.dtype == want, (head, m)
    rows, _ = _train_rows(base + ["algo.fp32_lm_head=true", f"run.results_dir={tmp_path / 'run'}"])
    assert [r["step"] for r in rows] == [1, 2] and all(r["rollout/response_len"] > 0 for r in rows)


# ---- the critic (gae) ---------------------------------------------------------------------------
@pytest.fixture
def parity_reward(monkeypatch):
    """A test-only verifier: reward 1 for responses of odd length. A random-init tiny model never
    solves the task, so without this every advantage (and every gradient) would be zero."""
    from harness.tasks.chain_sum import ChainSumTask
    monkeypatch.setattr(ChainSumTask, "score", lambda self, text, item: float(len(text) % 2))


def test_value_model_starts_at_zero_and_reads_the_state_before_each_token():
    import torch
    from harness.models import ValueModel
    b = _fake_batch()
    critic = ValueModel(_tiny_lm())
    v = critic(b.prompt_ids, b.prompt_mask, b.response_ids, b.response_mask)
    assert v.shape == b.response_ids.shape and (v == 0).all()
    torch.nn.init.normal_(critic.head.weight)
    v1 = critic(b.prompt_ids, b.prompt_mask, b.response_ids, b.response_mask)
    ids = b.response_ids.clone()
    ids[0, 2] = (ids[0, 2] + 1) % 16          # change response token 2 of row 0
    v2 = critic(b.prompt_ids, b.prompt_mask, ids, b.response_mask)
    assert torch.equal(v1[0, :3], v2[0, :3])  # V(s_0..s_2) do not see token 2
    assert not torch.equal(v1[0, 3:], v2[0, 3:])


def test_value_loss_gradient_does_not_depend_on_micro_batches():
    import torch
    from harness.models import ValueModel
    from harness.loop.critic import value_backward
    b = _fake_batch()
    b.value_targets = torch.randn(b.response_ids.shape) * b.response_mask
    critic = ValueModel(_tiny_lm())
    torch.nn.init.normal_(critic.head.weight)
    grads = []
    for n in (1, 3, 8):
        critic.zero_grad(set_to_none=True)
        value_backward(critic, b, n)
        grads.append(torch.cat([p.grad.reshape(-1) for p in critic.parameters() if p.grad is not None]))
    tol = 1e-6 * grads[0].abs().max().item()   # float rounding of a different summation order
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=tol)
    torch.testing.assert_close(grads[0], grads[2], rtol=1e-4, atol=tol)


def test_explained_variance_by_hand():
    import torch
    from harness.loop.critic import explained_variance
    t, m = torch.tensor([[1.0, 2.0, 3.0, 9.0]]), torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    assert explained_variance(t, t, m) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(t, 2.0), t, m) == pytest.approx(0.0)
    # residual (0, 0, 1): var 1/3 against var(1,2,3) = 1 -> 2/3
    assert explained_variance(torch.tensor([[1.0, 2.0, 2.0, 0.0]]), t, m) == pytest.approx(2 / 3)


GAE = ["algo.advantage=gae", "algo.lam_critic=1.0", "algo.lam_alpha=0.05", "algo.value_pretrain_steps=2",
       "algo.pos_nll_coef=0.1", "algo.aggregation=token_mean"]


LAG = ["algo.rollout_lag=3", "algo.preset=cispo"]


@pytest.mark.parametrize("extra", [GAE, LAG], ids=["gae", "rollout_lag"])
def test_stateful_choices_resume_exactly(tiny_overrides, tmp_path, monkeypatch, parity_reward, extra):
    """Killed after step 3 was logged (checkpoint at 2), the resumed run replays 3 and 4 exactly:
    the critic, its optimizer, the value-pretraining progress and the lagged policy versions are
    all in the checkpoint."""
    from harness.loop.metrics import TensorBoard
    common = tiny_overrides + extra + ["train.steps=4", "train.checkpoint_every=2"]
    want, _ = _train_rows(common + [f"run.results_dir={tmp_path / 'ref'}"])

    class Killed(Exception):
        pass

    real_log = TensorBoard.log

    def log(self, row):
        if row.get("kind") == "train" and row["step"] == 3 and not getattr(log, "done", False):
            log.done = True
            raise Killed
        real_log(self, row)
    monkeypatch.setattr(TensorBoard, "log", log)
    cut = common + [f"run.results_dir={tmp_path / 'cut'}"]
    with pytest.raises(Killed):
        _train_rows(cut)
    got, _ = _train_rows(cut)
    keep = lambda rs: [{k: v for k, v in r.items() if not k.startswith(("perf/", "compute/wall_s"))} for r in rs]
    assert keep(got) == keep(want)
    if extra is GAE:
        assert want[0]["value/pretrain_loss_first"] > want[0]["value/pretrain_loss_last"] > 0
        assert all(r["loss/value"] > 0 and r["value/explained_var"] is not None for r in want)
    else:  # 2 updates per step: the sampler is 0, 2, 3, 3 updates behind
        assert [r["rollout/policy_lag"] for r in want] == [0, 2, 3, 3]
        drift = [r["policy/log_ratio_abs_mean"] for r in want]
        assert drift[1] > drift[0] and drift[3] > drift[0]   # stale rollouts: larger ratios


# ---- presets ------------------------------------------------------------------------------------
def _presets():
    from harness.config import list_presets
    return list_presets()


EXPECTED_PRESETS = {"ppo", "rloo", "grpo", "reinforce_pp", "reinforce_pp_baseline", "dr_grpo", "dapo",
                    "vapo", "gspo", "cispo", "minpro", "scalerl", "sapo", "gmpo", "dppo_tv", "dppo_kl",
                    "luspo", "vespo"}


def test_every_seed_algorithm_is_a_preset_citing_its_paper():
    from harness.config import PRESET_DIR
    assert EXPECTED_PRESETS <= set(_presets())
    for name in _presets():
        head = (PRESET_DIR / f"{name}.yaml").read_text().split("\n\n")[0]
        assert head.startswith("#") and "arXiv" in head, name


def test_docs_table_lists_every_preset():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "algorithms.md").read_text()
    for name in _presets():
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize("preset", sorted(EXPECTED_PRESETS))
def test_preset_runs_the_loop_and_changes_the_parameters(preset, tiny_overrides, parity_reward):
    import math
    import torch
    rows, cfg = _train_rows(tiny_overrides + [f"algo.preset={preset}", "train.steps=2"])
    assert cfg.algo.deviates_from_preset == []
    assert all(r["loss/policy"] is not None and math.isfinite(r["loss/policy"]) for r in rows)
    ck = cfg.run_dir() / "checkpoints"
    start = torch.load(ck / "prev.pt", weights_only=True)["model"]   # before any policy update
    end = torch.load(ck / "last.pt", weights_only=True)["model"]
    assert any(not torch.equal(start[k], end[k]) for k in start), preset
