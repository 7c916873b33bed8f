"""Each registered design choice against values computed by hand from its paper's formula."""

from __future__ import annotations

import math

import pytest
import torch

from harness import algos
from harness.registry import Registry, RegistryError

R = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0])  # 2 prompts x G=4
MASK = torch.ones(8, 3)


def seq(adv):  # (B, T) -> per-sequence value (constant over tokens)
    return adv[:, 0].tolist()


def test_group_norm_matches_grpo_formula():
    # group 1: r = 1,0,0,1 -> mean 0.5, unbiased std sqrt(1/3)
    s = math.sqrt(1 / 3)
    a = seq(algos.ADVANTAGES["group_norm"](R, MASK, group_size=4, eps=1e-6))
    assert a[:4] == pytest.approx([0.5 / (s + 1e-6), -0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.5 / (s + 1e-6)])
    # group 2: 1,1,0,1 -> mean .75, std = sqrt(((.25^2)*3 + .75^2)/3) = 0.5
    assert a[4:] == pytest.approx([0.25 / 0.500001, 0.25 / 0.500001, -0.75 / 0.500001, 0.25 / 0.500001], rel=1e-5)


def test_group_norm_all_equal_group_gives_zero_not_nan():
    a = algos.ADVANTAGES["group_norm"](torch.ones(4), torch.ones(4, 2), group_size=4, eps=1e-6)
    assert torch.equal(a, torch.zeros(4, 2))


def test_group_mean_is_dr_grpo():
    a = seq(algos.ADVANTAGES["group_mean"](R, MASK, group_size=4, eps=1e-6))
    assert a == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.25, 0.25, -0.75, 0.25])


def test_rloo_leave_one_out():
    a = seq(algos.ADVANTAGES["rloo"](R, MASK, group_size=4, eps=1e-6))
    # r_0 = 1, others (0, 0, 1) mean 1/3 -> 2/3; r_1 = 0, others (1, 0, 1) -> -2/3
    assert a[:2] == pytest.approx([2 / 3, -2 / 3])
    # identity: rloo = G/(G-1) * (r - mean)
    gm = seq(algos.ADVANTAGES["group_mean"](R, MASK, group_size=4, eps=1e-6))
    assert a == pytest.approx([4 / 3 * x for x in gm])


def test_batch_norm_whitens_globally():
    a = algos.ADVANTAGES["batch_norm"](R, MASK, group_size=4, eps=0.0 + 1e-12)
    # the unit is the token (verl/OpenRLHF masked_whiten): mean 0, unbiased std 1 over the 24 tokens
    assert a.mean().item() == pytest.approx(0, abs=1e-6)
    assert a.reshape(-1).std().item() == pytest.approx(1, abs=1e-5)
    # r=1 values: (1 - 0.625) / std over tokens
    assert a[0, 0].item() == pytest.approx((1 - 0.625) / R.repeat_interleave(3).std().item(), rel=1e-5)


def test_advantage_is_zero_on_padding():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.float)
    a = algos.ADVANTAGES["group_mean"](torch.tensor([1.0, 0.0]), mask, group_size=2, eps=1e-6)
    assert a.tolist() == [[0.5, 0.5, 0.0], [-0.5, 0.0, 0.0]]


def test_token_ratio():
    lp, old = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -2.0]])
    assert algos.RATIOS["token"](lp, old, torch.tensor([[1.0, 0.0]])).tolist() == [[0.5, 0.0]]


@pytest.mark.parametrize("ratio,adv,lo,hi,expected,clipped", [
    (1.5, 1.0, 0.2, 0.2, -1.2, True),      # positive A: capped at 1+eps_high
    (1.5, 1.0, 0.2, 0.28, -1.28, True),    # clip-higher raises the cap
    (1.1, 1.0, 0.2, 0.28, -1.1, False),
    (0.5, 1.0, 0.2, 0.2, -0.5, False),     # positive A, low ratio: unclipped (min picks it)
    (0.5, -1.0, 0.2, 0.2, 0.8, True),      # negative A: floored at 1-eps_low
    (1.5, -1.0, 0.2, 0.2, 1.5, False),     # negative A, high ratio: pessimistic unclipped term
])
def test_ppo_clip_by_hand(ratio, adv, lo, hi, expected, clipped):
    out = algos.SURROGATES["ppo_clip"](torch.tensor([[math.log(ratio)]]), torch.tensor([[adv]]),
                                       torch.tensor([[-1.0]]), clip_low=lo, clip_high=hi)
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert bool(out.clipped.item()) is clipped


def test_ppo_clip_gradient_vanishes_when_clipped():
    lr = torch.tensor([[math.log(1.5), math.log(1.1)]], requires_grad=True)
    out = algos.SURROGATES["ppo_clip"](lr, torch.ones(1, 2), torch.zeros(1, 2), clip_low=0.2, clip_high=0.2)
    out.loss.sum().backward()
    assert lr.grad[0, 0].item() == 0.0
    assert lr.grad[0, 1].item() == pytest.approx(-1.1)  # d(-rho A)/d log rho = -rho A


def test_reinforce_is_minus_adv_logp():
    out = algos.SURROGATES["reinforce"](torch.zeros(1, 2), torch.tensor([[2.0, -1.0]]),
                                        torch.tensor([[-0.5, -1.0]]))
    assert out.loss.tolist() == [[1.0, -1.0]]


LOSS = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]])
LMASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])


def agg(name, loss=LOSS, mask=LMASK, group_size=2, max_new_tokens=10):
    w = algos.AGGREGATIONS[name](mask, group_size=group_size, max_new_tokens=max_new_tokens)
    return (loss * w).sum().item()


def test_seq_mean_token_mean():
    # (1+2+3)/3 = 2, 4/1 = 4 -> mean 3
    assert agg("seq_mean_token_mean") == pytest.approx(3.0)


def test_token_mean():
    # (1+2+3+4)/4 tokens
    assert agg("token_mean") == pytest.approx(2.5)


def test_seq_sum_constant_uses_max_new_tokens_not_padded_width():
    # (6/10 + 4/10) / 2; the padded width (4) must not appear
    assert agg("seq_sum_constant") == pytest.approx(0.5)


# two prompts x G=2; the last response is fully masked (e.g. a truncated one under overlong filtering)
L4 = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0], [5.0, 6.0, 0.0, 0.0], [9.0, 9.0, 0.0, 0.0]])
M4 = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


def test_prompt_mean_is_token_mean_within_prompt_then_mean_over_prompts():
    # prompt 1: (1+2+3+4)/4 = 2.5; prompt 2: (5+6)/2 = 5.5 -> 4.0
    assert agg("prompt_mean", L4, M4) == pytest.approx(4.0)


def test_masked_rows_are_not_counted_as_responses():
    # row means 2, 4, 5.5; the fully masked row is not a response of the mean -> 11.5 / 3
    assert agg("seq_mean_token_mean", L4, M4) == pytest.approx(11.5 / 3)
    assert agg("token_mean", L4, M4) == pytest.approx(21 / 6)
    assert agg("seq_sum_constant", L4, M4) == pytest.approx((6 + 4 + 11) / 10 / 3)


@pytest.mark.parametrize("name", ["seq_mean_token_mean", "token_mean", "prompt_mean"])
def test_mean_aggregations_have_weights_summing_to_one(name):
    w = algos.AGGREGATIONS[name](M4, group_size=2, max_new_tokens=10)
    assert w.sum().item() == pytest.approx(1.0)
    assert (w[M4 == 0] == 0).all()


# ---- advantages added by the design-space issue ------------------------------------------------
def test_group_mean_batch_std_centres_per_group_then_whitens_over_the_batch():
    a = seq(algos.ADVANTAGES["group_mean_batch_std"](R, MASK, group_size=4, eps=1e-6))
    centred = [0.5, -0.5, -0.5, 0.5, 0.25, 0.25, -0.75, 0.25]   # sums to 0: batch mean 0
    # unbiased std over the 24 tokens (3 per response): sum of squares 1.75 per token column
    std = math.sqrt(3 * 1.75 / 23)
    assert a == pytest.approx([c / (std + 1e-6) for c in centred], rel=1e-5)


def test_batch_norm_whitens_over_tokens():
    # response 1 has 3 tokens of return 1, response 2 one token of 0: token mean .75, unbiased var
    # (3 * .25^2 + .75^2) / 3 = .25 -> std .5
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    a = algos.ADVANTAGES["batch_norm"](torch.tensor([1.0, 0.0]), mask, group_size=1, eps=0.0)
    assert a.reshape(-1).tolist() == pytest.approx([0.5, 0.5, 0.5, -1.5, 0.0, 0.0])


def test_batch_norm_with_kl_in_the_reward_uses_returns_to_go():
    tr = torch.tensor([[-0.1, -0.2], [0.0, -0.4]])
    a = algos.ADVANTAGES["batch_norm"](torch.tensor([1.0, 0.0]), torch.ones(2, 2), group_size=1,
                                       eps=0.0, token_rewards=tr)
    ret = [0.7, 0.8, -0.4, -0.4]          # r + sum_{i>=t} tr_i
    mean = sum(ret) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in ret) / 3)
    assert a.reshape(-1).tolist() == pytest.approx([(x - mean) / std for x in ret], rel=1e-5)


def test_response_level_estimators_sum_token_rewards_into_the_reward():
    tr = torch.tensor([[-0.5, 0.0], [0.0, 0.0]])
    m = torch.ones(2, 2)
    # r = (1 - .5, 0) = (.5, 0): mean .25, unbiased std sqrt(2 * .25^2) = .3536
    g = algos.ADVANTAGES["group_norm"](torch.tensor([1.0, 0.0]), m, group_size=2, eps=0.0, token_rewards=tr)
    assert g[:, 0].tolist() == pytest.approx([0.25 / math.sqrt(0.125), -0.25 / math.sqrt(0.125)])
    r = algos.ADVANTAGES["rloo"](torch.tensor([1.0, 0.0]), m, group_size=2, eps=0.0, token_rewards=tr)
    assert r[:, 0].tolist() == pytest.approx([0.5, -0.5])


V = torch.tensor([[0.2, 0.5, 0.9]])


@pytest.mark.parametrize("gamma,lam,expected", [
    (1.0, 1.0, [0.8, 0.5, 0.1]),      # lam = 1: return - V = 1 - V_t
    (1.0, 0.5, [0.525, 0.45, 0.1]),   # deltas .3, .4, .1: A1 = .4 + .5*.1, A0 = .3 + .5*A1
    (0.9, 1.0, [0.61, 0.4, 0.1]),     # discounted return .81, .9, 1 minus V
    (1.0, 0.0, [0.3, 0.4, 0.1]),      # TD(0): the deltas
])
def test_gae_by_hand(gamma, lam, expected):
    tr = algos.outcome_token_rewards(torch.tensor([1.0]), torch.ones(1, 3), None)
    assert tr.tolist() == [[0.0, 0.0, 1.0]]
    a = algos.compute_gae(tr, V, torch.ones(1, 3), gamma=gamma, lam=lam)
    assert a[0].tolist() == pytest.approx(expected)


def test_gae_bootstraps_zero_after_the_last_token_and_takes_a_lambda_per_response():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    vals = torch.tensor([[0.2, 0.5, 99.0], [0.2, 0.5, 0.9]])
    tr = algos.outcome_token_rewards(torch.tensor([1.0, 1.0]), mask, None)
    a = algos.compute_gae(tr, vals, mask, gamma=1.0, lam=torch.tensor([1.0, 0.0]))
    assert a[0].tolist() == pytest.approx([0.8, 0.5, 0.0])   # pad value 99 never used
    assert a[1].tolist() == pytest.approx([0.3, 0.4, 0.1])   # lam 0 for this response


def test_gae_advantage_is_whitened_gae_and_value_targets_are_lambda_returns():
    mask = torch.ones(1, 3)
    adv = algos.ADVANTAGES["gae"](torch.tensor([1.0]), mask, group_size=1, eps=0.0, values=V,
                                  gamma=1.0, lam=1.0)
    raw = torch.tensor([0.8, 0.5, 0.1])
    assert adv[0].tolist() == pytest.approx(((raw - raw.mean()) / raw.std()).tolist(), rel=1e-5)
    tgt = algos.compute_value_targets(torch.tensor([1.0]), mask, V, gamma=1.0, lam=1.0)
    assert tgt[0].tolist() == pytest.approx([1.0, 1.0, 1.0])  # Monte Carlo return (lam_critic = 1)
    with pytest.raises(ValueError, match="critic"):
        algos.ADVANTAGES["gae"](torch.tensor([1.0]), mask, group_size=1, eps=0.0)


def test_length_adaptive_lambda_vapo():
    lam = algos.length_adaptive_lambda(torch.tensor([100, 1000, 10]), 0.05)
    assert lam.tolist() == pytest.approx([0.8, 0.98, 0.0])   # 1 - 1/(0.05 l); 10 tokens -> clamp 0


def test_dapo_soft_overlong_punishment():
    pen = algos.overlong_penalty(torch.tensor([10, 15, 16, 18, 20]), max_len=20, cache=5)
    assert pen.tolist() == pytest.approx([0.0, 0.0, -0.2, -0.6, -1.0])
    assert algos.overlong_penalty(torch.tensor([20]), max_len=20, cache=0).tolist() == [0.0]


# ---- ratios ------------------------------------------------------------------------------------
def test_sequence_ratio_is_length_normalised_with_token_gradients():
    lp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    old = torch.tensor([[-1.5, -2.5, -2.0]])
    lr = algos.RATIOS["sequence"](lp, old, torch.tensor([[1.0, 1.0, 0.0]]))
    assert lr[0].tolist() == pytest.approx([0.5, 0.5, 0.0])      # (0.5 + 0.5) / 2 on each token
    (lr * torch.tensor([[2.0, 3.0, 5.0]])).sum().backward()
    assert lp.grad.tolist() == [[2.0, 3.0, 0.0]]                 # d log s_{i,t} / d log pi_t = 1


def test_gspo_clips_whole_responses():
    # log rho = (0.6, 0.0): the sequence ratio exp(0.3) = 1.35 > 1.2 clips BOTH tokens (A > 0);
    # the token ratio clips only the first.
    old = torch.zeros(1, 2)
    for ratio, grads in (("sequence", [0.0, 0.0]), ("token", [0.0, -1.0])):
        lp = torch.tensor([[0.6, 0.0]], requires_grad=True)
        lr = algos.RATIOS[ratio](lp, old, torch.ones(1, 2))
        out = algos.SURROGATES["ppo_clip"](lr, torch.ones(1, 2), lp, clip_low=0.2, clip_high=0.2)
        out.loss.sum().backward()
        assert lp.grad[0].tolist() == pytest.approx(grads), ratio


def test_prefix_min_ratio_by_hand():
    lp = torch.tensor([[0.1, -0.3, 0.2, -0.1, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    lr = algos.RATIOS["prefix_min"](lp, torch.zeros(1, 5), mask)
    # prefix minima over j < t: (empty -> 0), .1, -.3, -.3; padding stays 0
    assert lr[0].tolist() == pytest.approx([0.1, -0.2, -0.1, -0.4, 0.0])
    lr.sum().backward()
    assert lp.grad[0].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]   # the prefix weight is stop-gradient


# ---- surrogates --------------------------------------------------------------------------------
@pytest.mark.parametrize("ratio,adv,zero_grad", [
    (1.5, 1.0, True),     # A > 0 above the band: clipped, no gradient
    (0.5, 1.0, False),    # A > 0 below the band: still pushed up
    (0.5, -1.0, True),    # A < 0 below the band: clipped
    (1.5, -1.0, False),   # A < 0 above the band: still pushed down
])
def test_ppo_clip_zeroes_the_gradient_only_on_the_clipped_side(ratio, adv, zero_grad):
    lr = torch.tensor([[math.log(ratio)]], requires_grad=True)
    out = algos.SURROGATES["ppo_clip"](lr, torch.tensor([[adv]]), torch.zeros(1, 1), clip_low=0.2,
                                       clip_high=0.2)
    out.loss.sum().backward()
    assert (lr.grad.item() == 0.0) is zero_grad
    if not zero_grad:
        assert lr.grad.item() == pytest.approx(-ratio * adv)


@pytest.mark.parametrize("ratio,adv,expected,grad", [
    (5.0, -1.0, 3.0, 0.0),     # rho > c with A < 0: floored at -c A, no gradient
    (2.0, -1.0, 2.0, 2.0),     # 1 + eps < rho < c: the ordinary pessimistic term, -rho A
    (5.0, 1.0, -1.2, 0.0),     # A > 0: the dual clip does not apply
])
def test_ppo_dual_clip_by_hand(ratio, adv, expected, grad):
    lr = torch.tensor([[math.log(ratio)]], requires_grad=True)
    out = algos.SURROGATES["ppo_clip"](lr, torch.tensor([[adv]]), torch.zeros(1, 1), clip_low=0.2,
                                       clip_high=0.2, dual_clip=3.0)
    out.loss.sum().backward()
    assert out.loss.item() == pytest.approx(expected)
    assert lr.grad.item() == pytest.approx(grad)
    assert bool(out.clipped.item()) is (grad == 0.0)


def test_cispo_band_by_hand():
    lr = torch.tensor([[math.log(1.5), math.log(0.5), math.log(1.1)]], requires_grad=True)
    lp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    out = algos.SURROGATES["cispo_band"](lr, adv, lp, clip_low=0.2, clip_high=0.2)
    # weights clip(rho, .8, 1.2) = 1.2, 0.8, 1.1; loss = -w A log pi
    assert out.loss[0].tolist() == pytest.approx([1.2, -1.6, 1.1])
    assert out.clipped[0].tolist() == [True, True, False]
    out.loss.sum().backward()
    assert lp.grad[0].tolist() == pytest.approx([-1.2, 0.8, -2.2])   # every token keeps a gradient
    assert lr.grad is None or (lr.grad == 0).all()                    # the weight is detached


def test_cispo_gives_every_token_a_gradient_where_ppo_clip_gives_none():
    torch.manual_seed(0)
    lr = torch.randn(4, 6) * 0.8             # many ratios far outside a 0.2 band
    adv = torch.randn(4, 6).sign()
    grads = {}
    for name, knobs in (("cispo", {"weight_cap": 1.2}), ("cispo_band", {"clip_low": 0.2, "clip_high": 0.2}),
                        ("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2})):
        lp = torch.randn(4, 6).requires_grad_()
        x = (lr + lp - lp.detach())          # log ratio that depends on log pi, as in the loop
        algos.SURROGATES[name](x, adv, lp, **knobs).loss.sum().backward()
        grads[name] = lp.grad
    assert (grads["cispo"] != 0).all() and (grads["cispo_band"] != 0).all()
    assert (grads["ppo_clip"] == 0).any()


def test_cispo_minimax_semantics_no_lower_bound():
    out = algos.SURROGATES["cispo"](torch.tensor([[math.log(0.1)]]), torch.tensor([[1.0]]),
                                    torch.tensor([[-1.0]]), weight_cap=4.0)
    assert out.loss.item() == pytest.approx(0.1)   # weight 0.1 kept: no lower bound at all
    assert not out.clipped.item()
    band = algos.SURROGATES["cispo_band"](torch.tensor([[math.log(0.1)]]), torch.tensor([[1.0]]),
                                          torch.tensor([[-1.0]]), clip_low=1.0, clip_high=4.0)
    assert band.loss.item() == pytest.approx(0.1)  # the band with clip_low = 1: no floor either


# ---- KL estimators -------------------------------------------------------------------------------
def test_kl_estimators_by_hand():
    lp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])    # u = log pi_ref - log pi = -0.5
    assert algos.KL_ESTIMATORS["k1"](lp, ref).item() == pytest.approx(0.5)
    assert algos.KL_ESTIMATORS["k2"](lp, ref).item() == pytest.approx(0.125)
    assert algos.KL_ESTIMATORS["k3"](lp, ref).item() == pytest.approx(math.exp(-0.5) - 1 + 0.5)


def test_kl_estimators_are_unbiased_or_not_as_documented():
    # pi = (.7, .3), pi_ref = (.4, .6): exact KL(pi || pi_ref) = sum pi log(pi / pi_ref)
    p, q = torch.tensor([0.7, 0.3]), torch.tensor([0.4, 0.6])
    exact = (p * (p / q).log()).sum().item()
    for name, unbiased in (("k1", True), ("k3", True), ("k2", False)):
        est = (p * algos.KL_ESTIMATORS[name](p.log(), q.log())).sum().item()
        assert (est == pytest.approx(exact)) is unbiased, name


def test_registry_rejects_duplicates_and_suggests():
    reg = Registry("axis")
    reg.register("alpha")(lambda: 1)
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("alpha")(lambda: 2)
    with pytest.raises(RegistryError, match="did you mean 'alpha'"):
        reg["alpah"]


def test_every_choice_has_a_docstring_citing_its_source():
    for axis, reg in algos.REGISTRIES.items():
        for name in reg.names():
            if not reg[name].__module__.startswith("harness."):
                continue  # a test-only entry (e.g. test_train's non-finite estimator)
            doc = reg[name].__doc__ or ""
            assert any(w in doc for w in ("arXiv", "Williams", "et al.", "Schulman 2020")), (axis, name)


def test_vapo_positive_example_nll_weights_are_a_token_mean_over_correct_responses():
    w = algos.positive_nll_weights(LMASK, torch.tensor([True, False]))
    # only response 1 (3 tokens) is correct: each of its tokens weighs 1/3
    assert w[0].tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0]) and w[1].tolist() == [0.0] * 4
    assert algos.positive_nll_weights(LMASK, torch.tensor([False, False])).sum().item() == 0.0
