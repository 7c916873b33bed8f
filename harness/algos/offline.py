"""offline_loss: the offline paradigm's objectives (OXRL's SFT, DPO, IPO, SimPO, KTO arms), each a
small pure function of per-response summed log-probabilities.

Signature: (lp: PairLogps, *, <the algo keys in its `keys` property>, state: dict) -> OfflineOut.
`lp` holds, per preference pair i of the minibatch (B pairs), the summed log-probabilities
log pi(y|x) = sum_t log pi(y_t | x, y_<t) of the chosen response y_w (`pol_c`) and the rejected one
y_l (`pol_r`) under the policy, the same under the frozen reference (`ref_c`, `ref_r`: the warm
start), the response lengths |y| (`len_c`, `len_r`, tokens incl. EOS), and for KTO the summed
log-probs of mismatched pairs (x_i, y_j), j != i (`pol_kl`, `ref_kl`). The log-ratio of a response
is r(y) = log pi(y|x) - log pi_ref(y|x). `state` carries what a loss keeps across updates (oxRL's
KTO moving average) and is checkpointed by the loop; every other loss returns it unchanged.

Properties: `active` (false only for `none`: the online paradigm), `needs_reference` (the frozen
warm start is loaded and forwarded), `needs_rejected` (the pair's worst response is forwarded; false
for the SFT losses), `needs_mismatched` (KTO's reference point), `selfplay` (true: pairs of the
self-play stage; false for `sft_gold`: the training split's reference answers, OXRL's later
gold-SFT control),
`keys` (the algo.* knobs it reads; any other offline knob must keep its default: config rules).

`dpop` (DPO-Positive) is DPO with a penalty that keeps the chosen response's log-ratio from
falling, the failure the offline learning test measures under dpo and kto here.

Where implementations disagree the difference is a named value: IPO on summed log-ratios (`ipo`,
the paper's Eq. 17 and oxRL) or per-token means (`ipo_token_mean`, TRL); KTO's reference point
from mismatched pairs (`kto`, the paper and TRL) or oxRL's moving average of the chosen log-ratio
with a log-sigmoid value (`kto_ema`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

OFFLINE_LOSSES = Registry("algo.offline_loss", active=True, needs_reference=True,
                          needs_rejected=True, needs_mismatched=False, selfplay=True, keys=())

# every algo.* knob some offline loss reads, in the order the schema declares them
OFFLINE_KEYS = ("beta", "simpo_gamma", "dpop_lambda", "kto_lambda_d", "kto_lambda_u", "kto_ema_alpha")


@dataclass
class PairLogps:
    """Per-pair summed log-probabilities of one minibatch (see the module docstring); (B,) each,
    `pol_kl`/`ref_kl` (M,) over the mismatched pairs."""
    pol_c: "torch.Tensor"
    len_c: "torch.Tensor"
    pol_r: Optional["torch.Tensor"] = None
    len_r: Optional["torch.Tensor"] = None
    ref_c: Optional["torch.Tensor"] = None
    ref_r: Optional["torch.Tensor"] = None
    pol_kl: Optional["torch.Tensor"] = None
    ref_kl: Optional["torch.Tensor"] = None


@dataclass
class OfflineOut:
    loss: "torch.Tensor"                        # scalar
    stats: dict = field(default_factory=dict)   # floats for the train row (offline/<name>)
    state: dict = field(default_factory=dict)


def _pair_stats(h, beta: float) -> dict:
    """The implicit-reward margin beta * h and the fraction of pairs it orders correctly."""
    h = h.detach()
    return {"margin": float((beta * h).mean()), "pair_accuracy": float((h > 0).float().mean())}


@OFFLINE_LOSSES.register("none", active=False, needs_reference=False, needs_rejected=False, selfplay=False)
def offline_none(lp: PairLogps, *, state: dict) -> OfflineOut:
    """No offline loss: the online paradigm (algo.paradigm = online; OXRL's online arms, Li 2026,
    arXiv 2603.19335), where the RL surrogate of the shared loop is the objective. Never called
    by the loop."""
    raise RuntimeError("offline_loss 'none' is the online paradigm: it has no offline objective")


@OFFLINE_LOSSES.register("dpo", keys=("beta",))
def dpo(lp: PairLogps, *, beta: float, state: dict) -> OfflineOut:
    """DPO (Rafailov et al. 2023, arXiv 2305.18290, Eq. 7):
    L = -mean_i log sigmoid(beta * (r(y_w) - r(y_l))), r(y) = log pi(y|x) - log pi_ref(y|x) summed
    over the response's tokens. TRL `loss_type=sigmoid` and oxRL `algs/dpo.py` agree."""
    h = (lp.pol_c - lp.ref_c) - (lp.pol_r - lp.ref_r)
    loss = -torch.nn.functional.logsigmoid(beta * h).mean()
    return OfflineOut(loss, _pair_stats(h, beta), state)


@OFFLINE_LOSSES.register("dpop", keys=("beta", "dpop_lambda"))
def dpop(lp: PairLogps, *, beta: float, dpop_lambda: float, state: dict) -> OfflineOut:
    """DPO-Positive (Pal et al. 2024, "Smaug", arXiv 2402.13228): DPO with a penalty, inside the
    sigmoid, on the chosen response's log-ratio falling below 0:
    L = -mean_i log sigmoid(beta * (r(y_w) - r(y_l) - lambda * max(0, -r(y_w)))),
    r(y) = log pi(y|x) - log pi_ref(y|x) summed over the response's tokens. The paper proves that
    DPO can lower log pi(y_w|x) while it widens the margin, most of all for pairs at a small edit
    distance (a verifier's pairs here differ in one answer token); lambda = 0 is DPO. lambda = 50
    as PaddleNLP's `dpop_lambda` default; an independent closed-form test of NeMo-RL-style losses
    writes the same formula. The logged margin and pair accuracy are DPO's (lambda left out)."""
    h = (lp.pol_c - lp.ref_c) - (lp.pol_r - lp.ref_r)
    drop = (lp.ref_c - lp.pol_c).clamp(min=0)
    loss = -torch.nn.functional.logsigmoid(beta * (h - dpop_lambda * drop)).mean()
    return OfflineOut(loss, {**_pair_stats(h, beta), "chosen_drop": float(drop.detach().mean())},
                      state)


def _ipo(h, beta: float, state: dict) -> OfflineOut:
    loss = ((h - 1.0 / (2.0 * beta)) ** 2).mean()
    return OfflineOut(loss, _pair_stats(h, beta), state)


@OFFLINE_LOSSES.register("ipo", keys=("beta",))
def ipo(lp: PairLogps, *, beta: float, state: dict) -> OfflineOut:
    """IPO (Azar et al. 2023, arXiv 2310.12036, Eq. 17, tau = beta) on summed log-ratios:
    L = mean_i (h_i - 1/(2 beta))^2, h = r(y_w) - r(y_l), r summed over tokens (the paper's
    sequence log-likelihoods; oxRL `algs/ipo.py`). `ipo_token_mean` is TRL's variant."""
    return _ipo((lp.pol_c - lp.ref_c) - (lp.pol_r - lp.ref_r), beta, state)


@OFFLINE_LOSSES.register("ipo_token_mean", keys=("beta",))
def ipo_token_mean(lp: PairLogps, *, beta: float, state: dict) -> OfflineOut:
    """IPO as TRL computes it (`loss_type=ipo`: each completion's log-probs averaged over its
    tokens before the ratio): L = mean_i (h_i - 1/(2 beta))^2 with
    h = (log pi(y_w) - log pi_ref(y_w)) / |y_w| - (log pi(y_l) - log pi_ref(y_l)) / |y_l|
    (Azar et al. 2023, arXiv 2310.12036, Eq. 17, per-token log-ratios)."""
    h = (lp.pol_c - lp.ref_c) / lp.len_c - (lp.pol_r - lp.ref_r) / lp.len_r
    return _ipo(h, beta, state)


@OFFLINE_LOSSES.register("simpo", needs_reference=False, keys=("beta", "simpo_gamma"))
def simpo(lp: PairLogps, *, beta: float, simpo_gamma: float, state: dict) -> OfflineOut:
    """SimPO (Meng et al. 2024, arXiv 2405.14734, Eq. 6): no reference model, length-normalised
    implicit reward and a target margin gamma:
    L = -mean_i log sigmoid(beta/|y_w| log pi(y_w|x) - beta/|y_l| log pi(y_l|x) - gamma).
    oxRL `algs/simpo.py` writes the same (gamma absolute; TRL takes gamma/beta instead)."""
    h = lp.pol_c / lp.len_c - lp.pol_r / lp.len_r
    loss = -torch.nn.functional.logsigmoid(beta * h - simpo_gamma).mean()
    return OfflineOut(loss, _pair_stats(h, beta), state)


def _kto_examples(lp: PairLogps):
    """The pairs as 2B unpaired KTO examples: (log-ratios, desirable?) with chosen = desirable."""
    r = torch.cat([lp.pol_c - lp.ref_c, lp.pol_r - lp.ref_r])
    desirable = torch.cat([torch.ones_like(lp.pol_c, dtype=torch.bool),
                           torch.zeros_like(lp.pol_r, dtype=torch.bool)])
    return r, desirable


@OFFLINE_LOSSES.register("kto", needs_mismatched=True, keys=("beta", "kto_lambda_d", "kto_lambda_u"))
def kto(lp: PairLogps, *, beta: float, kto_lambda_d: float, kto_lambda_u: float,
        state: dict) -> OfflineOut:
    """KTO (Ethayarajh et al. 2024, arXiv 2402.01306, Eq. 8) on the pairs as unpaired examples
    (chosen desirable, rejected undesirable), with the paper's reference point
    z0 = sg(max(0, mean_j (log pi(y'_j|x_j) - log pi_ref(y'_j|x_j)))) over mismatched pairs
    (x_j, y'_j) of the batch (TRL `KTOTrainer`: completions shifted by one):
    v(x,y) = lambda_D sigmoid(beta (r(y) - z0)) if desirable, lambda_U sigmoid(beta (z0 - r(y)))
    if not; L = mean over examples of (lambda_y - v(x, y))."""
    r, good = _kto_examples(lp)
    z0 = (lp.pol_kl - lp.ref_kl).mean().clamp(min=0).detach()
    lam = torch.where(good, torch.full_like(r, kto_lambda_d), torch.full_like(r, kto_lambda_u))
    v = torch.where(good, torch.sigmoid(beta * (r - z0)), torch.sigmoid(beta * (z0 - r)))
    loss = (lam * (1 - v)).mean()
    return OfflineOut(loss, {"kto_z0": float(z0)}, state)


@OFFLINE_LOSSES.register("kto_ema", keys=("beta", "kto_lambda_d", "kto_lambda_u", "kto_ema_alpha"))
def kto_ema(lp: PairLogps, *, beta: float, kto_lambda_d: float, kto_lambda_u: float,
            kto_ema_alpha: float, state: dict) -> OfflineOut:
    """KTO as oxRL writes it (`algs/kto.py`; Ethayarajh et al. 2024, arXiv 2402.01306): the
    reference point is a moving average of the batch's mean chosen log-ratio,
    z_k = (1 - alpha) z_{k-1} + alpha sg(mean_i r(y_w,i)), z_0 = 0 (alpha = 0.1 in oxRL), not
    clamped at 0; and the value is a log-sigmoid:
    L = mean over examples of lambda_y * -log sigmoid(s_y beta (r(y) - z_k)), s = +1 desirable,
    -1 undesirable. The average is carried in `state['kto_ema']` (checkpointed)."""
    r, good = _kto_examples(lp)
    batch_kl = (lp.pol_c - lp.ref_c).mean().detach()
    z = (1 - kto_ema_alpha) * float(state.get("kto_ema", 0.0)) + kto_ema_alpha * float(batch_kl)
    sign = good.to(r.dtype) * 2 - 1
    lam = torch.where(good, torch.full_like(r, kto_lambda_d), torch.full_like(r, kto_lambda_u))
    loss = (lam * -torch.nn.functional.logsigmoid(sign * beta * (r - z))).mean()
    return OfflineOut(loss, {"kto_z0": z}, {**state, "kto_ema": z})


@OFFLINE_LOSSES.register("sft", needs_reference=False, needs_rejected=False)
def sft(lp: PairLogps, *, state: dict) -> OfflineOut:
    """SFT on the chosen responses (rejection-sampling fine-tuning: OXRL's SFT arm, oxRL
    `data/extract_sft.py`; RFT, Yuan et al. 2023, arXiv 2308.01825): the token-mean NLL
    L = -sum_i log pi(y_w,i | x_i) / sum_i |y_w,i| over the minibatch's chosen tokens."""
    return OfflineOut(-lp.pol_c.sum() / lp.len_c.sum(), {}, state)


@OFFLINE_LOSSES.register("sft_gold", needs_reference=False, needs_rejected=False, selfplay=False)
def sft_gold(lp: PairLogps, *, state: dict) -> OfflineOut:
    """SFT on the training split's reference (gold) answers, OXRL's later gold-answer control
    (Li 2026, arXiv 2603.19335, repository draft): the same token-mean NLL as `sft`,
    L = -sum_i log pi(y*_i | x_i) / sum_i |y*_i|, with y* the reference answer (no self-play)."""
    return OfflineOut(-lp.pol_c.sum() / lp.len_c.sum(), {}, state)


def offline_knobs(name: str, a) -> dict:
    """The algo.* knobs the named loss reads, from an AlgoCfg (or any object with those fields)."""
    return {k: getattr(a, k) for k in OFFLINE_LOSSES.meta(name).keys}


PARADIGMS = Registry("algo.paradigm", offline=False)


@PARADIGMS.register("online")
def paradigm_online():
    """Online RL: every step samples fresh rollouts from the current policy and trains on them
    with the RL surrogate of the shared loop (OXRL's SGRPO, GSPO and CISPO arms; Li 2026,
    arXiv 2603.19335). No algo.offline_loss."""


@PARADIGMS.register("offline", offline=True)
def paradigm_offline():
    """Offline: a fixed data set built once from the warm start (the self-play stage: best and
    worst of offline.samples responses per prompt of a finite training split, tied groups skipped,
    as oxRL `data/generate_prefs.py`), trained on with algo.offline_loss (OXRL's SFT, DPO, IPO,
    KTO, SimPO arms; Li 2026, arXiv 2603.19335). Same eval, logging and checkpoints as online."""
