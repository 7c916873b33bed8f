"""One step of the offline paradigm (algo.paradigm = offline): `rollout.prompts_per_step`
preference pairs of the fixed data set (loop/selfplay.py), in `algo.epochs` x `algo.minibatches`
optimizer updates of the registered offline loss (algo.offline_loss, harness/algos/offline.py).

The pairs are read in epochs over the data set, each epoch a fresh permutation seeded by
(run.seed, epoch): the step's pairs are a pure function of the cursor (pairs consumed so far,
checkpointed), so resuming is exact. The frozen reference (the warm start) is forwarded once per
step when the loss `needs_reference`; KTO's mismatched pairs (`needs_mismatched`) pair prompt i
with the response of example i - 1 among the step's 2B chosen-then-rejected examples (TRL shifts
completions the same way). Compute: 2N per forwarded token (reference), 6N per trained token.
The stage asks the loss entry's properties; it never branches on a loss's name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .. import algos, distributed
from ..batch import encode_prompts, minibatch_rows
from ..models import sequence_logprobs
from .finite import check_finite
from .parts import Parts


@dataclass
class PairRows:
    """Prompt + response rows (prompts left-padded, responses right-padded)."""
    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor

    @property
    def n_tokens(self) -> int:
        return int(self.response_mask.sum())

    def rows(self, idx: torch.Tensor) -> "PairRows":
        return PairRows(self.prompt_ids[idx], self.prompt_mask[idx], self.response_ids[idx],
                        self.response_mask[idx])


def pair_indices(n_pairs: int, cursor: int, n: int, seed: int) -> tuple[list[int], int]:
    """The next n pair indices from `cursor` on: epoch e = k // n_pairs reads the data set in the
    order of a permutation seeded by (seed, e). Returns (indices, new cursor)."""
    out, perms = [], {}
    for k in range(cursor, cursor + n):
        e = k // n_pairs
        if e not in perms:
            perms[e] = torch.randperm(n_pairs, generator=torch.Generator().manual_seed(
                seed * 1_000_003 + e * 7_919)).tolist()
        out.append(perms[e][k % n_pairs])
    return out, cursor + n


def encode_rows(tok, prompts: list[str], responses: list[list[int]], device) -> PairRows:
    ids, mask = encode_prompts(tok, prompts, device)
    width = max(len(r) for r in responses)
    rids = torch.full((len(responses), width), tok.pad_token_id, dtype=torch.long)
    rmask = torch.zeros((len(responses), width), dtype=torch.long)
    for i, r in enumerate(responses):
        rids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        rmask[i, :len(r)] = 1
    return PairRows(ids, mask, rids.to(device), rmask.to(device))


def summed_logprobs(model, rows: PairRows) -> torch.Tensor:
    """(B,) sum over each response's tokens of log pi(y_t | x, y_<t) (temperature 1)."""
    logp, _ = sequence_logprobs(model, rows.prompt_ids, rows.prompt_mask, rows.response_ids,
                             rows.response_mask)
    return (logp * rows.response_mask).sum(-1)


def step_rows(p: Parts, idx: list[int], meta) -> dict:
    """The step's rows: `pairs` (chosen and, if the loss reads it, rejected, interleaved so each
    prompt is forwarded once per pair) and, for KTO, `mismatched`."""
    pairs = [p.offline.pairs[i] for i in idx]
    prompts = [x["prompt"] for x in pairs]
    if meta.needs_rejected:
        resp = [r for x in pairs for r in (x["chosen"], x["rejected"])]
        rows = {"pairs": encode_rows(p.tok, [q for q in prompts for _ in (0, 1)], resp, p.device)}
    else:
        rows = {"pairs": encode_rows(p.tok, prompts, [x["chosen"] for x in pairs], p.device)}
    if meta.needs_mismatched:  # prompt j with the response of example j - 1 (chosen then rejected)
        examples = [x["chosen"] for x in pairs] + [x["rejected"] for x in pairs]
        rolled = examples[-1:] + examples[:-1]
        rows["mismatched"] = encode_rows(p.tok, prompts + prompts, rolled, p.device)
    return rows


def _reference(p: Parts, rows: dict, used: dict) -> dict:
    """Summed reference log-probs of the rows this process reads (`used[name]`: row indices, all
    of them in one process), forwarded once per step; rows it never reads stay 0."""
    ref = {}
    with torch.no_grad():
        for name, r in rows.items():
            idx = used[name]
            if idx is None:
                ref[name] = summed_logprobs(p.reference, r)
                p.meter.forward(p.n_params, r)
            else:
                sub = r.rows(idx)
                ref[name] = torch.zeros(r.prompt_ids.shape[0], device=r.prompt_ids.device)
                ref[name][idx] = summed_logprobs(p.reference, sub)
                p.meter.forward(p.n_params, sub)
    return ref


def offline_step(p: Parts, step: int) -> dict:
    """One offline step: its pairs, the reference pass, the updates; returns the train row.

    Data parallel (harness/distributed.py): every process reads the same pairs and the same
    minibatch order, keeps pairs r, r+W, ... of each minibatch, and computes the loss of the whole
    minibatch from the all-gathered per-pair log-probs (`distributed.gather_rows`; a permutation
    of the single-process rows, which every loss here is invariant to), so the summed gradients
    are the single-process update."""
    cfg, c = p.cfg, p.counters
    a = cfg.algo
    t0 = time.time()
    flops0, tokens0 = c.flops, c.tokens
    meta = algos.OFFLINE_LOSSES.meta(a.offline_loss)
    loss_fn, knobs = algos.OFFLINE_LOSSES[a.offline_loss], algos.offline_knobs(a.offline_loss, a)
    n = cfg.rollout.prompts_per_step
    idx, c.cursor = pair_indices(len(p.offline), c.cursor, n, cfg.run.seed)
    rows = step_rows(p, idx, meta)
    k = 2 if meta.needs_rejected else 1  # rows per pair in rows["pairs"]
    W, rank = p.dp.world, p.dp.rank
    gather = distributed.gather_rows

    def pair_rows_of(mb):
        return (mb.unsqueeze(-1) * k + torch.arange(k)).reshape(-1)

    mbs = minibatch_rows(n, a.epochs, a.minibatches, group_size=1)
    used = {name: None for name in rows}
    if W > 1:  # this process's share of every minibatch, and the rows it reads
        mbs = [mb[rank::W] for mb in mbs]
        mine = torch.unique(torch.cat(mbs)) if mbs else torch.zeros(0, dtype=torch.long)
        used = {"pairs": pair_rows_of(mine), "mismatched": torch.cat([mine, mine + n])}
    ref = _reference(p, rows, used) if meta.needs_reference else {}
    lens = rows["pairs"].response_mask.sum(-1).to(torch.float32)
    losses, grad_norms, stats = [], [], {}
    for mb in mbs:
        p.optimizer.zero_grad(set_to_none=True)
        pair_rows = pair_rows_of(mb)
        r = rows["pairs"].rows(pair_rows)
        pol = summed_logprobs(p.policy, r)
        lp = algos.PairLogps(pol_c=gather(pol[0::k]), len_c=gather(lens[pair_rows][0::k]))
        if meta.needs_rejected:
            lp.pol_r, lp.len_r = gather(pol[1::k]), gather(lens[pair_rows][1::k])
        if meta.needs_reference:
            lp.ref_c = gather(ref["pairs"][pair_rows][0::k])
            lp.ref_r = gather(ref["pairs"][pair_rows][1::k]) if meta.needs_rejected else None
        trained = [r]
        if meta.needs_mismatched:  # the minibatch's examples' mismatched rows (B chosen, B rejected)
            mm = torch.cat([mb, mb + n])
            m_rows = rows["mismatched"].rows(mm)
            with torch.no_grad():  # z0 carries no gradient
                lp.pol_kl = gather(summed_logprobs(p.policy, m_rows))
            lp.ref_kl = gather(ref["mismatched"][mm])
            p.meter.forward(p.n_params, m_rows)
        out = loss_fn(lp, state=dict(c.offline_state), **knobs)
        # what the loss does to each side: the per-token log-prob (and log-ratio) of chosen/rejected
        diag = {"chosen_logp": (lp.pol_c / lp.len_c).mean()}
        if meta.needs_rejected:
            diag["rejected_logp"] = (lp.pol_r / lp.len_r).mean()
        if meta.needs_reference:
            diag["chosen_log_ratio"] = ((lp.pol_c - lp.ref_c) / lp.len_c).mean()
            if meta.needs_rejected:
                diag["rejected_log_ratio"] = ((lp.pol_r - lp.ref_r) / lp.len_r).mean()
        for key, v in diag.items():
            stats.setdefault(key, []).append(float(v.detach()))
        check_finite("loss", out.loss.detach(), step)
        out.loss.backward()
        distributed.sum_gradients(p.policy)  # data parallel: the combined minibatch's gradient
        o = cfg.optim
        gn = torch.nn.utils.clip_grad_norm_(p.policy.parameters(), o.grad_clip if o.grad_clip > 0
                                            else float("inf"))
        p.optimizer.step()
        p.scheduler.step()
        c.offline_state = out.state
        for t in trained:
            p.meter.trained(p.n_params, t)
        losses.append(out.loss.item())
        grad_norms.append(gn.item())
        for key, v in out.stats.items():
            stats.setdefault(key, []).append(v)
    if W > 1:  # every process's FLOPs and tokens
        d = distributed.sum_stats({"flops": c.flops - flops0, "tokens": c.tokens - tokens0})
        c.flops, c.tokens = flops0 + d["flops"], tokens0 + int(d["tokens"])
    c.step = step
    dt = time.time() - t0
    n_tok = rows["pairs"].n_tokens
    row = {"kind": "train", "step": step, "loss/offline": sum(losses) / len(losses),
           "offline/epoch": c.cursor / len(p.offline),
           "offline/chosen_len": float(lens[0::k].mean()),
           "offline/rejected_len": float(lens[1::k].mean()) if meta.needs_rejected else None}
    row.update({f"offline/{key}": sum(v) / len(v) for key, v in stats.items()})
    row.update({"policy/grad_norm": sum(grad_norms) / len(grad_norms),
                "optim/lr": p.scheduler.get_last_lr()[0], "perf/step_s": dt,
                "perf/tokens_per_s": n_tok / max(dt, 1e-9)})
    return row
