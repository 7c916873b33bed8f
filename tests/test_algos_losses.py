"""The loss types, corrections and normalisations of issue 18 against values and gradients computed
by hand from each paper's formula: CISPO's absolute cap (cap = eps_max exactly) vs verl's band, SAPO,
GMPO, DPPO-Binary-TV/KL, LUSPO's aggregation, sequence-level truncated IS and masking, DeepSeek-V3.2's
off-policy sequence mask, the response-unit batch std, MinPRO's prefix weight and the entropy bonus.
Edge cases: all-equal groups, length-1 responses, ratios far from 1."""

from __future__ import annotations

import math

import pytest
import torch

from harness import algos
from harness.batch import StepBatch
from harness.config import load_config
from harness.engines.hf import HFEngine
from harness.loop.update import inert_rows, policy_backward

S = algos.SURROGATES


def _lr_lp(ratios, logps):
    """(log ratio that depends on log pi as in the loop, log pi) with gradients on log pi."""
    lp = torch.tensor([logps], requires_grad=True)
    lr = torch.log(torch.tensor([ratios])) + lp - lp.detach()
    return lr, lp


# ---- CISPO: absolute cap vs band ------------------------------------------------------------------
def test_cispo_cap_is_eps_max_exactly():
    lr, lp = _lr_lp([10.0, 3.0, 0.5], [-1.0, -2.0, -0.5])
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    out = S["cispo"](lr, adv, lp, weight_cap=4.0)
    # w = min(rho, 4) = 4, 3, 0.5; L = -w A log pi
    assert out.loss[0].tolist() == pytest.approx([4.0, -6.0, 0.5])
    assert out.clipped[0].tolist() == [True, False, False]
    out.loss.sum().backward()
    assert lp.grad[0].tolist() == pytest.approx([-4.0, 3.0, -1.0])   # -w A, every token a gradient
    assert (-lp.grad[0, 0] / adv[0, 0]).item() == 4.0                 # the weight is eps_max, exactly
    # verl's band with the old preset's numbers (clip_low 1, clip_high 4) caps at 1 + 4 = 5
    lr2, lp2 = _lr_lp([10.0], [-1.0])
    band = S["cispo_band"](lr2, torch.ones(1, 1), lp2, clip_low=1.0, clip_high=4.0)
    band.loss.sum().backward()
    assert lp2.grad.item() == -5.0


def test_cispo_preset_and_scalerl_cap_at_four():
    for preset in ("cispo", "scalerl"):
        a = load_config(None, [f"algo.preset={preset}"]).algo
        assert (a.surrogate, a.weight_cap) == ("cispo", 4.0)
        assert algos.surrogate_knobs(a.surrogate, a) == {"weight_cap": 4.0}


# ---- SAPO -----------------------------------------------------------------------------------------
def _sapo_by_hand(rho, adv, tau):
    s = 1 / (1 + math.exp(-tau * (rho - 1)))
    return -(4 / tau) * s * adv, -adv * 4 * s * (1 - s) * rho   # loss, d loss / d log pi


@pytest.mark.parametrize("rho, adv", [(1.5, 1.0), (0.5, -1.0), (1.0, 2.0), (1.0, -0.5),
                                      (math.e, 1.0), (math.exp(5.0), 1.0), (math.exp(-5.0), -1.0)])
def test_sapo_gate_and_gradient_by_hand(rho, adv):
    lr, lp = _lr_lp([rho], [-0.7])
    out = S["sapo"](lr, torch.tensor([[adv]]), lp, tau_pos=1.0, tau_neg=1.05)
    want, grad = _sapo_by_hand(rho, adv, 1.0 if adv > 0 else 1.05)
    assert out.loss.item() == pytest.approx(want, rel=1e-6)
    out.loss.sum().backward()
    assert lp.grad.item() == pytest.approx(grad, rel=1e-5, abs=1e-12)
    if rho == 1.0:
        assert lp.grad.item() == pytest.approx(-adv)   # the plain policy gradient on-policy
    if abs(grad) > 1e-30:                              # soft: not cut to zero at a band edge (at
        assert lp.grad.item() != 0.0                   # rho = e^5 the gate's slope is ~e^-147)
    assert not out.clipped.any()


def test_sapo_zero_advantage_gives_zero_loss_and_gradient():
    lr, lp = _lr_lp([1.3, 0.2], [-1.0, -2.0])
    out = S["sapo"](lr, torch.zeros(1, 2), lp, tau_pos=1.0, tau_neg=1.05)
    out.loss.sum().backward()
    assert (out.loss == 0).all() and (lp.grad == 0).all()


# ---- GMPO -----------------------------------------------------------------------------------------
def test_gmpo_geometric_mean_sign_aware_clip_by_hand():
    lp = torch.tensor([[-1.0, -1.0, -1.0], [-0.5, 0.0, 0.0], [-1.0, -1.0, -1.0]], requires_grad=True)
    base = torch.tensor([[0.1, 0.6, -0.6], [0.2, 0.0, 0.0], [0.1, 0.6, -0.6]])
    lr = base + lp - lp.detach()
    mask = torch.tensor([[1.0, 1, 1], [1, 0, 0], [1, 1, 1]])          # row 1: a length-1 response
    adv = torch.tensor([[1.0] * 3, [1.0] * 3, [-1.0] * 3]) * mask
    out = S["gmpo"](lr, adv, lp, mask=mask, clip_low=0.4, clip_high=0.4)
    g0 = math.exp((0.1 + 0.4 - 0.6) / 3)    # A > 0: only log rho above +0.4 is clipped
    g1 = math.exp(0.2)
    g2 = math.exp((0.1 + 0.6 - 0.4) / 3)    # A < 0: only log rho below -0.4 is clipped
    assert out.loss[0].tolist() == pytest.approx([-g0] * 3)          # one value per response
    assert out.loss[1].tolist() == pytest.approx([-g1, 0.0, 0.0])
    assert out.loss[2].tolist() == pytest.approx([g2] * 3)
    assert out.clipped.tolist() == [[False, True, False], [False, False, False], [False, False, True]]
    w = algos.AGGREGATIONS["seq_mean_token_mean"](mask, group_size=3, max_new_tokens=3)
    loss = (out.loss * w).sum()
    assert loss.item() == pytest.approx((-g0 - g1 + g2) / 3)       # mean over responses of L_i
    loss.backward()
    # dL_i/d log pi_t = -A_i g_i / |o_i| on unclipped tokens, 0 on clipped ones; times 1/N_seq
    want = [[-g0 / 9, 0.0, -g0 / 9], [-g1 / 3, 0.0, 0.0], [g2 / 9, g2 / 9, 0.0]]
    for got, exp_ in zip(lp.grad.tolist(), want):
        assert got == pytest.approx(exp_, abs=1e-7)


# ---- DPPO -----------------------------------------------------------------------------------------
def _dppo_case(name, p_old, p, adv, cap=20.0, delta=0.15):
    lp = torch.tensor([[math.log(p)]], requires_grad=True)
    lr = (lp.detach() - math.log(p_old)) + lp - lp.detach()
    out = S[name](lr, torch.tensor([[adv]]), lp, div_low=delta, div_high=delta, weight_cap=cap)
    out.loss.sum().backward()
    return out.loss.item(), lp.grad.item(), bool(out.clipped.item())


@pytest.mark.parametrize("p_old, p, adv, kept", [
    (0.5, 0.7, 1.0, False),    # +0.2 in the advantage's direction: outside the TV region
    (0.5, 0.7, -1.0, True),    # moved against the advantage: kept
    (0.5, 0.4, 1.0, True),     # -0.1: inside
    (0.5, 0.3, -1.0, False),   # -0.2 in the advantage's direction: masked
    (1e-5, 1e-3, 1.0, True),   # ratio 100, yet |p - p_old| ~ 1e-3: DPPO keeps it (PPO would clip)
])
def test_dppo_tv_mask_and_gradient_by_hand(p_old, p, adv, kept):
    loss, grad, clipped = _dppo_case("dppo_tv", p_old, p, adv)
    w = min(p / p_old, 20.0)                         # the detached, truncated IS weight
    assert clipped is (not kept)
    assert loss == pytest.approx(-adv * w * math.log(p) if kept else 0.0, rel=1e-5)
    assert grad == pytest.approx(-adv * w if kept else 0.0, rel=1e-5)


def test_dppo_kl_binary_kl_by_hand():
    d = 0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / 0.3)      # 0.0872 > 0.05
    assert d > 0.05
    assert _dppo_case("dppo_kl", 0.5, 0.7, 1.0, delta=0.05)[2] is True            # masked
    assert _dppo_case("dppo_kl", 0.5, 0.7, -1.0, delta=0.05)[2] is False          # p >= p_old: kept
    d2 = 0.9 * math.log(0.9 / 0.8) + 0.1 * math.log(0.1 / 0.2)     # 0.0367 <= 0.05
    loss, grad, clipped = _dppo_case("dppo_kl", 0.9, 0.8, -1.0, delta=0.05)
    assert d2 <= 0.05 and not clipped and grad == pytest.approx(0.8 / 0.9, rel=1e-5)
    assert _dppo_case("dppo_kl", 0.9, 0.8, -1.0, delta=0.03)[2] is True           # tighter: masked
    # a ratio far from 1 is truncated at the cap C
    assert _dppo_case("dppo_kl", 1e-5, 1e-3, 1.0, cap=20.0)[1] == pytest.approx(-20.0)


# ---- LUSPO ----------------------------------------------------------------------------------------
def test_luspo_weights_each_response_loss_by_its_length():
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 0]])
    w = algos.AGGREGATIONS["seq_sum_mean"](mask, group_size=2, max_new_tokens=4)
    assert w.tolist() == [[0.5, 0.5, 0.5, 0.0], [0.5, 0.0, 0.0, 0.0]]
    per_response = torch.tensor([[2.0], [-1.0]]).expand(2, 4) * mask   # a GSPO-style constant loss
    assert (per_response * w).sum().item() == pytest.approx((3 * 2.0 + 1 * -1.0) / 2)


# ---- sequence-level rollout corrections -----------------------------------------------------------
def test_sequence_truncated_is_and_sequence_mask_by_hand():
    sampler = torch.zeros(3, 3)
    train = torch.tensor([[0.1, 0.2, -0.1], [1.0, 0.0, 0.0], [400.0, 400.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1], [1, 0, 0], [1, 1, 0]])      # row 1: length 1; row 2: overflow
    tis = algos.ROLLOUT_CORRECTIONS["seq_tis"](train, sampler, mask, cap=2.0, floor=0.5)
    assert tis[0].tolist() == pytest.approx([math.exp(0.2)] * 3)
    assert tis[1].tolist() == pytest.approx([2.0, 0.0, 0.0])          # e^1 truncated at C
    assert tis[2].tolist() == [2.0, 2.0, 0.0]                          # exp overflows to inf: C
    sm = algos.ROLLOUT_CORRECTIONS["seq_mask"](train, sampler, mask, cap=2.0, floor=0.5)
    assert sm[0].tolist() == pytest.approx([math.exp(0.2)] * 3)       # kept with its IS weight
    assert sm[1].tolist() == [0.0, 0.0, 0.0] and sm[2].tolist() == [0.0, 0.0, 0.0]
    assert torch.isfinite(sm).all() and torch.isfinite(tis).all()


def test_deepseek_v32_off_policy_sequence_mask_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.2, 1.0]]))
    sampler = torch.log(torch.tensor([[0.9, 0.9], [0.9, 0.9], [0.6, 0.6], [0.4, 1.0]]))
    mask = torch.tensor([[1.0, 1], [1, 1], [1, 1], [1, 0]])         # row 3: length 1
    adv = torch.tensor([[-1.0, -1], [1, 1], [-1, -1], [-1, 0]])
    keep = algos.OFF_POLICY_MASKS["dsv32"](logp, sampler, adv, mask, threshold=0.5)
    # mean log(pi_sampler / pi): log 1.8 = 0.588, 0.588, log 1.2 = 0.182, log 2 = 0.693
    assert keep.squeeze(-1).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert algos.OFF_POLICY_MASKS["dsv32"](logp, sampler, adv, mask, threshold=0.7).sum() == 4


# ---- batch-level normalisation: the unit of the std ------------------------------------------------
def test_group_mean_batch_std_over_responses_by_hand():
    r = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    lens = torch.tensor([1, 3, 3, 3, 2, 2, 2, 2])
    mask = (torch.arange(3) < lens.unsqueeze(-1)).float()
    a = algos.ADVANTAGES["group_mean_batch_std_seq"](r, mask, group_size=4, eps=0.0)
    # centred .75 -.25 -.25 -.25 .5 .5 -.5 -.5; unbiased std over the 8 responses = 0.5
    assert (a[:, 0]).tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5, 1.0, 1.0, -1.0, -1.0])
    assert (a * (1 - mask)).abs().sum() == 0
    tok = algos.ADVANTAGES["group_mean_batch_std"](r, mask, group_size=4, eps=0.0)
    assert not torch.allclose(tok[:, 0], a[:, 0])       # the token unit counts long responses more
    same = algos.ADVANTAGES["group_mean_batch_std_seq"](torch.ones(8), mask, group_size=4, eps=1e-6)
    assert (same == 0).all()                             # all-equal groups: zero, not NaN


# ---- MinPRO: the prefix weight inside the clip ----------------------------------------------------
def test_prefix_min_inside_the_clip_kills_later_negative_advantage_gradients():
    """The measured consequence of today's `prefix_min` (issue 18, item 7): one early low-ratio
    token (rho = 0.5) makes every later token's surrogate ratio <= 0.5 < 1 - eps, so under the
    PPO clip each later negative-advantage token gets no gradient, although its own ratio is 1."""
    lp = torch.zeros(1, 4, requires_grad=True)
    lr_tok = torch.tensor([[math.log(0.5), 0.0, 0.0, 0.0]]) + lp - lp.detach()
    mask = torch.ones(1, 4)
    r = algos.RATIOS["prefix_min"](lr_tok, torch.zeros(1, 4), mask)
    assert torch.exp(r).tolist()[0] == pytest.approx([0.5, 0.5, 0.5, 0.5])
    out = S["ppo_clip"](r, -torch.ones(1, 4), lp, clip_low=0.2, clip_high=0.2)
    out.loss.sum().backward()
    assert lp.grad.tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert out.clipped.all()


# ---- entropy bonus through the loop's backward ----------------------------------------------------
def test_entropy_bonus_gradient_is_the_aggregated_entropy_gradient(tmp_path):
    from harness.models import build_model, get_tokenizer, sequence_logprobs
    from harness.tasks import make_task
    cfg = load_config(None, ["model.scale=tiny-0.3m", f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    model = build_model(cfg, tok, 0)
    items, _ = task.take("train", 0, 2)
    torch.manual_seed(0)
    ro = HFEngine(model, tok).generate([it.prompt for it in items for _ in range(4)], max_new_tokens=8,
                                       temperature=1.0)
    mask = ro.response_mask.float()
    adv = torch.zeros_like(mask)                     # all-equal groups: only the bonus acts
    b = StepBatch(ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask, mask, adv,
                  ro.logprobs, torch.zeros(8, dtype=torch.bool))
    a = load_config(None, ["algo.entropy_coef=0.1"]).algo
    w = algos.AGGREGATIONS[a.aggregation](mask, group_size=4, max_new_tokens=8)
    assert not inert_rows(b, w, None, a).any()       # zero advantage, but the bonus has a gradient
    model.zero_grad(set_to_none=True)
    st = policy_backward(model, b, a, group_size=4, max_new_tokens=8, temperature=1.0)
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    model.zero_grad(set_to_none=True)
    _, ent = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids, ro.response_mask,
                               1.0, with_entropy=True)
    bonus = (ent * mask * w).sum()
    (-0.1 * bonus).backward()
    g_hand = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert g_hand.norm() > 0
    assert (g - g_hand).norm() / g_hand.norm() < 1e-5
    assert st["entropy_bonus"] == pytest.approx(bonus.item(), rel=1e-5)
    assert st["loss"] == pytest.approx(-0.1 * bonus.item(), rel=1e-5)


def test_prefix_min_weight_outside_the_clip_scales_instead_of_killing():
    """The other placement: the prefix weight multiplies the clipped token loss, so the later
    negative-advantage tokens keep a gradient, scaled by min_{j<t} rho_j = 0.5."""
    lp = torch.zeros(1, 4, requires_grad=True)
    logp_old = torch.tensor([[-math.log(0.5), 0.0, 0.0, 0.0]])       # rho_1 = 0.5, then 1
    mask = torch.ones(1, 4)
    r = algos.RATIOS["prefix_min_weight"](lp, logp_old, mask)
    w = algos.RATIOS.meta("prefix_min_weight").loss_weight(lp, logp_old, mask)
    assert torch.exp(r).tolist()[0] == pytest.approx([0.5, 1.0, 1.0, 1.0])   # the plain token ratio
    assert w.tolist()[0] == pytest.approx([1.0, 0.5, 0.5, 0.5])              # empty prefix -> 1
    out = S["ppo_clip"](r, -torch.ones(1, 4), lp, clip_low=0.2, clip_high=0.2)
    (out.loss * w).sum().backward()
    # token 1: rho = 0.5 < 0.8 with A < 0 is clipped (PPO); tokens 2-4: d(-rho A w)/d log pi = w
    assert lp.grad.tolist()[0] == pytest.approx([0.0, 0.5, 0.5, 0.5])
    assert algos.RATIOS.meta("prefix_min").loss_weight is None
    # a length-1 response: no prefix, weight 1, the token ratio itself
    one = algos.RATIOS.meta("prefix_min_weight").loss_weight(lp[:, :1], logp_old[:, :1], mask[:, :1])
    assert one.tolist() == [[1.0]]


def test_presets_and_choices_list_the_new_values():
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "harness.cli", "presets"], capture_output=True, text=True)
    assert p.returncode == 0
    head, *rows = [line.split() for line in p.stdout.splitlines()]
    table = {r[0]: dict(zip(head, r)) for r in rows}
    assert {"sapo", "gmpo", "dppo_tv", "dppo_kl", "luspo"} <= set(table)
    assert table["cispo"]["surrogate"] == "cispo" and table["cispo"]["weight_cap"] == "4.0"
    assert table["scalerl"]["weight_cap"] == "4.0" and table["cispo"]["clip_high"] == "."
    assert table["luspo"]["aggregation"] == "seq_sum_mean" and table["dppo_kl"]["div_high"] == "0.05"
    c = subprocess.run([sys.executable, "-m", "harness.cli", "choices"], capture_output=True, text=True)
    for name in ("cispo_band", "sapo", "gmpo", "dppo_tv", "dppo_kl", "seq_sum_mean", "seq_tis",
                 "seq_mask", "dsv32", "group_mean_batch_std_seq", "prefix_min_weight"):
        assert f"  {name} " in c.stdout, name


def test_batch_std_before_or_after_the_zero_variance_filter_in_prepare():
    """algo.adv_batch_scope: the batch std over the kept groups only (kept) or over every sampled
    group, the dropped zero-variance ones counting with advantage 0 (sampled). By hand: kept
    centred rewards +-0.5 (4 responses) -> std sqrt(1/3); with a dropped all-correct group (two
    zeros) -> std sqrt(1/5)."""
    from types import SimpleNamespace
    from harness.batch import Rollout
    from harness.loop.prepare import prepare
    ones = torch.ones(4, 2, dtype=torch.long)
    ro = Rollout(ones, ones, ones, ones, torch.zeros(4, 2), torch.full((4,), 2), torch.zeros(4, dtype=torch.bool),
                 [""] * 4)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    for scope, std in (("kept", math.sqrt(1 / 3)), ("sampled", math.sqrt(1 / 5))):
        cfg = load_config(None, ["algo.advantage=group_mean_batch_std_seq", "algo.group_filter=zero_variance",
                                 f"algo.adv_batch_scope={scope}", "rollout.group_size=2"])
        p = SimpleNamespace(cfg=cfg, reference=None, critic=None, lag=0, meter=None)
        dropped = (torch.ones(2, 2, dtype=torch.long), torch.tensor([1.0, 1.0])) if scope == "sampled" else None
        adv = prepare(p, ro, rewards, rewards, 1, dropped=dropped).batch.adv
        assert adv[:, 0].tolist() == pytest.approx([0.5 / std, -0.5 / std] * 2, rel=1e-5)


@pytest.mark.parametrize("name", ["cispo", "cispo_band", "sapo", "gmpo", "dppo_tv", "dppo_kl", "vespo"])
def test_all_equal_group_zero_advantage_gives_zero_loss_and_gradient(name):
    """A group whose rewards are all equal has A = 0 on every token: no loss, no gradient (so the
    loop may skip the row), for every new surrogate, at ratios near and far from 1."""
    a = load_config(None, [f"algo.surrogate={name}"] + (["algo.aggregation=seq_mean_token_mean"]
                                                         if name == "gmpo" else [])).algo
    lr, lp = _lr_lp([1.0, 1.1, 0.3, 30.0], [-0.2, -1.0, -2.0, -4.0])
    out = S[name](lr, torch.zeros(1, 4), lp, mask=torch.ones(1, 4), **algos.surrogate_knobs(name, a))
    out.loss.sum().backward()
    assert (out.loss == 0).all() and (lp.grad == 0).all()


def test_adv_batch_scope_is_a_registry_whose_entries_pick_the_dropped_rows():
    """algo.adv_batch_scope is a registry (the loop asks the entry, never the name): `kept` gives
    None, `sampled` (counts_dropped) gives the (response_mask, rewards) of the rows not kept;
    train._dropped hands those to prepare."""
    from types import SimpleNamespace
    from harness.loop.train import _dropped
    assert algos.ADV_BATCH_SCOPES.where(counts_dropped=True) == ["sampled"]
    mask = torch.arange(8).view(4, 2)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    sampled = SimpleNamespace(rewards=rewards, kept=torch.tensor([0, 1]),
                              rollout=SimpleNamespace(response_mask=mask))
    assert _dropped(sampled, SimpleNamespace(adv_batch_scope="kept")) is None
    m, r = _dropped(sampled, SimpleNamespace(adv_batch_scope="sampled"))
    assert m.tolist() == [[4, 5], [6, 7]] and r.tolist() == [1.0, 1.0]


def test_vespo_kernel_values_and_gradient_by_hand():
    """VESPO: phi(w) = exp(lam + k log w - lam w) of the response's summed log-ratio, detached;
    L_t = -phi A log pi_t. By hand: response 1 (A = +1, k 2, lam 3), log-ratios 0.1 and -0.3 ->
    log w = -0.2, phi = exp(3 - 0.4 - 3 e^-0.2); response 2 (A = -0.5, k 3, lam 2), on-policy ->
    phi = 1; a far-off response (sum 30 -> clamped to 20) has phi ~ 0. Gradient of the summed loss
    w.r.t. log pi_t is -phi A (the ratio carries no gradient)."""
    a = load_config(None, ["algo.preset=vespo"]).algo
    lp = torch.tensor([[-1.0, -2.0], [-0.5, -0.7], [-1.0, -1.0]], requires_grad=True)
    old = lp.detach() - torch.tensor([[0.1, -0.3], [0.0, 0.0], [15.0, 15.0]])
    lr = lp - old
    adv = torch.tensor([[1.0, 1.0], [-0.5, -0.5], [1.0, 1.0]])
    out = S["vespo"](lr, adv, lp, mask=torch.ones(3, 2), **algos.surrogate_knobs("vespo", a))
    phi1 = math.exp(3 - 0.4 - 3 * math.exp(-0.2))
    assert out.loss[0].tolist() == pytest.approx([-phi1 * -1.0, -phi1 * -2.0], rel=1e-5)
    assert out.loss[1].tolist() == pytest.approx([-1.0 * 0.5 * 0.5, -1.0 * 0.5 * 0.7], rel=1e-5)
    assert out.loss[2].abs().max() < 1e-30 and out.clipped[2].all() and not out.clipped[:2].any()
    out.loss.sum().backward()
    assert lp.grad[0].tolist() == pytest.approx([-phi1, -phi1], rel=1e-5)
    assert lp.grad[1].tolist() == pytest.approx([0.5, 0.5], rel=1e-5)
