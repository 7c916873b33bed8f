"""ratio: (logp (B, T), logp_old (B, T), mask) -> log importance ratio (B, T).

Property: constant_per_response (every token of a response carries one value, GSPO), which makes a
length-weighted aggregation weight each response by its length (a config rule).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

RATIOS = Registry("algo.ratio", constant_per_response=False)


@RATIOS.register("token")
def compute_token_log_ratio(logp, logp_old, mask):
    """PPO/GRPO token ratio: log rho_t = log pi(y_t|x,y_<t) - log pi_old(y_t|x,y_<t).

    Schulman et al. 2017, PPO (arXiv 1707.06347).
    """
    return (logp - logp_old) * mask


@RATIOS.register("sequence", constant_per_response=True)
def compute_sequence_log_ratio(logp, logp_old, mask):
    """GSPO length-normalised sequence ratio, GSPO-token form (Zheng et al. 2025, arXiv 2507.18071):

        log s_i = (1/|y_i|) sum_t log rho_t,    log s_{i,t} = sg(log s_i) + log pi_t - sg(log pi_t)

    Every token carries the value s_i, so the clip acts on the whole response; the gradient of token
    t is s_i * grad log pi_t, which under a per-response mean (seq_mean_token_mean) equals GSPO's.
    """
    n = mask.sum(-1, keepdim=True).clamp(min=1)
    log_s = ((logp - logp_old) * mask).sum(-1, keepdim=True) / n
    return (log_s.detach() + logp - logp.detach()) * mask


@RATIOS.register("prefix_min")
def compute_prefix_min_log_ratio(logp, logp_old, mask):
    """MinPRO (Lei, Cheng, Tao 2026, arXiv 2601.22718): the correct correction of token t is the
    prefix ratio prod_{j<=t} rho_j; MinPRO replaces the cumulative product over the preceding prefix
    by the minimum token ratio observed there. Implemented form (ours; the paper's exact objective
    was not available, only its abstract - unverified: whether j < t or j <= t, any extra clipping):

        log r_t = log rho_t + sg(min_{j<t} log rho_j),   min over the empty prefix (t = 1) = 0

    i.e. the token ratio times a stop-gradient prefix weight; the surrogate then clips r_t.
    """
    lr = (logp - logp_old) * mask
    big = torch.finfo(lr.dtype).max
    masked = torch.where(mask > 0, lr.detach(), torch.full_like(lr, big))
    run_min = torch.cummin(masked, dim=-1).values                    # min_{j<=t}
    prev = torch.cat([torch.full_like(run_min[:, :1], big), run_min[:, :-1]], -1)  # min_{j<t}
    prefix = torch.where(prev >= big, torch.zeros_like(prev), prev)
    return (lr + prefix) * mask
