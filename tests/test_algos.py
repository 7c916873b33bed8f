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
    a = torch.tensor(seq(algos.ADVANTAGES["batch_norm"](R, MASK, group_size=4, eps=0.0 + 1e-12)))
    assert a.mean().item() == pytest.approx(0, abs=1e-6)
    assert a.std().item() == pytest.approx(1, abs=1e-5)
    # r=1 values: (1 - 0.625) / std(R)
    assert a[0].item() == pytest.approx((1 - 0.625) / R.std().item(), rel=1e-5)


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
                                        torch.tensor([[-0.5, -1.0]]), clip_low=0.2, clip_high=0.2)
    assert out.loss.tolist() == [[1.0, -1.0]]


LOSS = torch.tensor([[1.0, 2.0, 3.0, 0.0], [4.0, 0.0, 0.0, 0.0]])
LMASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])


def test_seq_mean_token_mean():
    # (1+2+3)/3 = 2, 4/1 = 4 -> mean 3
    assert algos.AGGREGATIONS["seq_mean_token_mean"](LOSS, LMASK, max_new_tokens=10).item() == pytest.approx(3.0)


def test_token_mean():
    # (1+2+3+4)/4 tokens
    assert algos.AGGREGATIONS["token_mean"](LOSS, LMASK, max_new_tokens=10).item() == pytest.approx(2.5)


def test_seq_sum_constant_uses_max_new_tokens_not_padded_width():
    # (6/10 + 4/10) / 2; the padded width (4) must not appear
    assert algos.AGGREGATIONS["seq_sum_constant"](LOSS, LMASK, max_new_tokens=10).item() == pytest.approx(0.5)


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
            doc = reg[name].__doc__ or ""
            assert any(w in doc for w in ("arXiv", "Williams", "et al.")), (axis, name)
