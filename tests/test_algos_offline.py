"""The offline losses (harness/algos/offline.py) against their paper formulas on hand-computed
cases, with gradients checked (analytic derivatives and torch.autograd.gradcheck)."""

from __future__ import annotations

import math

import pytest
import torch

from harness import algos
from harness.algos.offline import OFFLINE_LOSSES, PairLogps


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def pair(**kw) -> PairLogps:
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k.startswith("pol"))
         for k, v in kw.items()}
    return PairLogps(**t)


ONE = dict(pol_c=[-2.0], ref_c=[-3.0], pol_r=[-4.0], ref_r=[-3.5], len_c=[2.0], len_r=[4.0])


def grads(out, lp: PairLogps) -> dict:
    names = [k for k in ("pol_c", "pol_r", "pol_kl") if getattr(lp, k) is not None]
    g = torch.autograd.grad(out.loss, [getattr(lp, k) for k in names], allow_unused=True)
    return {k: (None if x is None else x.tolist()) for k, x in zip(names, g)}


def test_dpo_is_minus_log_sigmoid_of_beta_times_the_log_ratio_margin():
    lp = pair(**ONE)
    out = OFFLINE_LOSSES["dpo"](lp, beta=0.1, state={})
    h = (-2 + 3) - (-4 + 3.5)                                       # 1.5
    assert out.loss.item() == pytest.approx(math.log(1 + math.exp(-0.15)))
    assert out.stats["margin"] == pytest.approx(0.1 * h) and out.stats["pair_accuracy"] == 1.0
    g = grads(out, lp)  # dL/dh = -beta sigmoid(-beta h)
    assert g["pol_c"] == pytest.approx([-0.1 * sig(-0.15)])
    assert g["pol_r"] == pytest.approx([0.1 * sig(-0.15)])


def test_dpop_penalises_the_chosen_log_ratio_falling_below_zero_inside_the_sigmoid():
    """Pal et al. 2024 (arXiv 2402.13228): z = beta (r_w - r_l - lambda max(0, -r_w))."""
    lp = pair(pol_c=[-3.5], ref_c=[-3.0], pol_r=[-4.0], ref_r=[-3.5], len_c=[2.0], len_r=[4.0])
    out = OFFLINE_LOSSES["dpop"](lp, beta=0.1, dpop_lambda=50.0, state={})
    z = 0.1 * ((-0.5) - (-0.5) - 50 * 0.5)                          # -2.5
    assert out.loss.item() == pytest.approx(math.log(1 + math.exp(-z)))
    assert out.stats["chosen_drop"] == pytest.approx(0.5)
    assert out.stats["margin"] == 0.0 and out.stats["pair_accuracy"] == 0.0  # DPO's, lambda left out
    g = grads(out, lp)  # dz/dpol_c = beta (1 + lambda), dz/dpol_r = -beta
    assert g["pol_c"] == pytest.approx([-sig(-z) * 0.1 * 51])
    assert g["pol_r"] == pytest.approx([sig(-z) * 0.1])
    # above the reference, or at lambda = 0, it is DPO exactly
    dpo = OFFLINE_LOSSES["dpo"](pair(**ONE), beta=0.1, state={}).loss.item()
    assert OFFLINE_LOSSES["dpop"](pair(**ONE), beta=0.1, dpop_lambda=50.0, state={}).loss.item() == dpo
    assert OFFLINE_LOSSES["dpop"](lp, beta=0.1, dpop_lambda=0.0, state={}).loss.item() == \
        pytest.approx(math.log(2))


def test_ipo_summed_and_token_mean_variants_differ_as_their_formulas_say():
    lp = pair(**ONE)
    out = OFFLINE_LOSSES["ipo"](lp, beta=0.1, state={})
    assert out.loss.item() == pytest.approx((1.5 - 5.0) ** 2)     # 12.25
    g = grads(out, lp)
    assert g["pol_c"] == pytest.approx([2 * (1.5 - 5)]) and g["pol_r"] == pytest.approx([-2 * (1.5 - 5)])
    lp = pair(**ONE)
    out = OFFLINE_LOSSES["ipo_token_mean"](lp, beta=0.1, state={})
    h = 1 / 2 - (-0.5) / 4                                          # 0.625
    assert out.loss.item() == pytest.approx((h - 5) ** 2)           # 19.140625
    g = grads(out, lp)
    assert g["pol_c"] == pytest.approx([2 * (h - 5) / 2]) and g["pol_r"] == pytest.approx([-2 * (h - 5) / 4])


def test_simpo_uses_length_normalised_policy_logprobs_and_the_margin_gamma_without_reference():
    lp = pair(pol_c=[-2.0], pol_r=[-8.0], len_c=[2.0], len_r=[4.0])   # no reference at all
    out = OFFLINE_LOSSES["simpo"](lp, beta=0.1, simpo_gamma=0.5, state={})
    z = 0.1 * (-1 - (-2)) - 0.5                                      # -0.4
    assert out.loss.item() == pytest.approx(math.log(1 + math.exp(-z)))
    g = grads(out, lp)
    assert g["pol_c"] == pytest.approx([-sig(-z) * 0.1 / 2]) and g["pol_r"] == pytest.approx([sig(-z) * 0.1 / 4])
    assert not OFFLINE_LOSSES.meta("simpo").needs_reference


def test_kto_reference_point_from_mismatched_pairs_is_clamped_and_detached():
    lp = pair(**ONE, pol_kl=[-1.0, -2.0], ref_kl=[-1.2, -2.6])       # mismatched log-ratios 0.2, 0.6
    out = OFFLINE_LOSSES["kto"](lp, beta=0.1, kto_lambda_d=2.0, kto_lambda_u=0.5, state={})
    z0, rc, rr = 0.4, 1.0, -0.5
    want = (2.0 * (1 - sig(0.1 * (rc - z0))) + 0.5 * (1 - sig(0.1 * (z0 - rr)))) / 2
    assert out.loss.item() == pytest.approx(want) and out.stats["kto_z0"] == pytest.approx(z0)
    g = grads(out, lp)
    s_c, s_r = sig(0.1 * (rc - z0)), sig(0.1 * (z0 - rr))
    assert g["pol_c"] == pytest.approx([-2.0 * 0.1 * s_c * (1 - s_c) / 2])
    assert g["pol_r"] == pytest.approx([0.5 * 0.1 * s_r * (1 - s_r) / 2])
    assert g["pol_kl"] is None or g["pol_kl"] == [0.0, 0.0]         # z0 is detached
    lp = pair(**ONE, pol_kl=[-1.0], ref_kl=[0.0])                    # mean log-ratio -1 -> z0 = 0
    out = OFFLINE_LOSSES["kto"](lp, beta=0.1, kto_lambda_d=1.0, kto_lambda_u=1.0, state={})
    assert out.stats["kto_z0"] == 0.0
    assert out.loss.item() == pytest.approx(((1 - sig(0.1)) + (1 - sig(0.05))) / 2)


def test_kto_ema_keeps_a_moving_average_of_the_chosen_log_ratio_and_uses_log_sigmoid():
    lp = pair(**ONE)
    out = OFFLINE_LOSSES["kto_ema"](lp, beta=0.1, kto_lambda_d=1.0, kto_lambda_u=1.0,
                                    kto_ema_alpha=0.1, state={"kto_ema": 0.2})
    z = 0.9 * 0.2 + 0.1 * 1.0                                        # 0.28
    assert out.state == {"kto_ema": pytest.approx(z)}
    want = (-math.log(sig(0.1 * (1.0 - z))) - math.log(sig(-0.1 * (-0.5 - z)))) / 2
    assert out.loss.item() == pytest.approx(want)
    g = grads(out, lp)
    assert g["pol_c"] == pytest.approx([-0.1 * sig(-0.1 * (1 - z)) / 2])
    assert g["pol_r"] == pytest.approx([0.1 * sig(0.1 * (-0.5 - z)) / 2])
    first = OFFLINE_LOSSES["kto_ema"](pair(**ONE), beta=0.1, kto_lambda_d=1.0, kto_lambda_u=1.0,
                                      kto_ema_alpha=0.1, state={})   # z starts at 0 (oxRL)
    assert first.state["kto_ema"] == pytest.approx(0.1)


@pytest.mark.parametrize("name", ["sft", "sft_gold"])
def test_sft_is_the_token_mean_nll_of_the_chosen_responses(name):
    lp = pair(pol_c=[-2.0, -6.0], len_c=[2.0, 4.0])
    out = OFFLINE_LOSSES[name](lp, state={})
    assert out.loss.item() == pytest.approx(8 / 6)
    assert grads(out, lp)["pol_c"] == pytest.approx([-1 / 6, -1 / 6])


def test_losses_average_over_pairs():
    two = {k: v + v for k, v in ONE.items()}
    for name in ("dpo", "dpop", "ipo", "ipo_token_mean"):
        kw = {"dpop_lambda": 50.0} if name == "dpop" else {}
        a = OFFLINE_LOSSES[name](pair(**ONE), beta=0.1, state={}, **kw).loss.item()
        assert OFFLINE_LOSSES[name](pair(**two), beta=0.1, state={}, **kw).loss.item() == pytest.approx(a)


@pytest.mark.parametrize("name", [n for n in OFFLINE_LOSSES.names() if OFFLINE_LOSSES.meta(n).active])
def test_gradcheck_every_offline_loss(name):
    """torch.autograd.gradcheck on the policy log-probs, in float64, at random points. kto_ema's
    reference point is a detached function of pol_c, which finite differences would see: its
    step alpha is made negligible here (the hand-computed test above checks it)."""
    meta = OFFLINE_LOSSES.meta(name)
    g = torch.Generator().manual_seed(0)
    B = 3
    fixed = {"len_c": torch.tensor([2.0, 5.0, 3.0], dtype=torch.float64),
             "len_r": torch.tensor([4.0, 1.0, 6.0], dtype=torch.float64),
             "ref_c": -torch.rand(B, generator=g, dtype=torch.float64) * 5,
             "ref_r": -torch.rand(B, generator=g, dtype=torch.float64) * 5,
             "pol_kl": -torch.rand(2 * B, generator=g, dtype=torch.float64),
             "ref_kl": -torch.rand(2 * B, generator=g, dtype=torch.float64)}
    pol_c = (-torch.rand(B, generator=g, dtype=torch.float64) * 5).requires_grad_()
    pol_r = (-torch.rand(B, generator=g, dtype=torch.float64) * 5).requires_grad_()
    knobs = {k: {"beta": 0.7, "simpo_gamma": 0.3, "dpop_lambda": 2.0, "kto_lambda_d": 1.5, "kto_lambda_u": 0.8,
                 "kto_ema_alpha": 1e-12}[k] for k in meta.keys}

    def f(pc, pr):
        lp = PairLogps(pol_c=pc, pol_r=pr if meta.needs_rejected else None, **fixed)
        return OFFLINE_LOSSES[name](lp, state={"kto_ema": 0.1}, **knobs).loss
    assert torch.autograd.gradcheck(f, (pol_c, pol_r))


def test_registry_properties_match_what_each_loss_reads():
    m = OFFLINE_LOSSES.meta
    assert [n for n in OFFLINE_LOSSES.names() if m(n).needs_reference] == ["dpo", "dpop", "ipo", "ipo_token_mean", "kto", "kto_ema"]
    assert [n for n in OFFLINE_LOSSES.names() if m(n).needs_mismatched] == ["kto"]
    assert [n for n in OFFLINE_LOSSES.names() if not m(n).needs_rejected] == ["none", "sft", "sft_gold"]
    assert OFFLINE_LOSSES.where(active=False) == ["none"] and algos.PARADIGMS.where(offline=True) == ["offline"]
    for n in OFFLINE_LOSSES.names():  # every knob a loss reads is a declared offline key
        assert set(m(n).keys) <= set(algos.OFFLINE_KEYS)
