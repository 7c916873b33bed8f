"""ratio: (logp (B, T), logp_old (B, T), mask) -> log importance ratio (B, T).

Properties: constant_per_response (every token of a response carries one value, GSPO), which makes a
length-weighted aggregation weight each response by its length (a config rule); loss_weight (None,
or a function (logp, logp_old, mask) -> detached (B, T) weight that multiplies the surrogate's token
loss OUTSIDE its clip: MinPRO's prefix weight in the `prefix_min_weight` reading).
"""

from __future__ import annotations

from ..lazy import lazy_module
from ..registry import Registry

torch = lazy_module("torch")  # imported on the first tensor call (harness/lazy.py)

RATIOS = Registry("algo.ratio", constant_per_response=False, loss_weight=None)


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


def _prefix_min(lr: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T) sg(min_{j<t} log rho_j) over the response's earlier tokens; 0 for the first token."""
    big = torch.finfo(lr.dtype).max
    masked = torch.where(mask > 0, lr.detach(), torch.full_like(lr, big))
    run_min = torch.cummin(masked, dim=-1).values                    # min_{j<=t}
    prev = torch.cat([torch.full_like(run_min[:, :1], big), run_min[:, :-1]], -1)  # min_{j<t}
    return torch.where(prev >= big, torch.zeros_like(prev), prev)


MINPRO_NOTE = """
    MinPRO (Lei, Cheng, Tao 2026, "A Step Back: Prefix Importance Ratio Stabilizes Policy
    Optimization", arXiv 2601.22718). What could be checked: the correct off-policy correction of
    token t is the prefix ratio  Pi_t = prod_{i=1}^t rho_i,  rho_i = pi_theta(a_i|s_i) / mu(a_i|s_i)
    (the paper's definition, as quoted by the emergentmind topic page of the paper), and MinPRO
    "replaces the unstable cumulative prefix ratio with a non-cumulative surrogate based on the
    minimum token-level ratio observed in the preceding prefix" (abstract), "down-weighting the
    gradient when any single-step ratio in the prefix is small" (emergentmind). The paper's own
    objective could NOT be read: the stored copies of its text (arxiv.org/html/2601.22718v1 and a
    markdown mirror) return only their first ~2,000 characters through the search tool, which
    end before the method section (issue 18, item 7: not verified). A second search (issue 18,
    part 2: six pages-corpus queries on the objective's terms, find_string on "Minimum Prefix
    Ratio", "MinPRO", "2601.22718", and the code corpus) found no copy past Figure 1's caption and
    no implementation: no equation of the paper can be quoted here. So whether the minimum runs
    over j < t or j <= t, whether it is capped at 1, and where it sits relative to the clip are
    our readings; the two placements are two values (`prefix_min`, `prefix_min_weight`).
"""


@RATIOS.register("prefix_min")
def compute_prefix_min_log_ratio(logp, logp_old, mask):
    """MinPRO, our reading with the prefix weight INSIDE the surrogate's clip:

        log r_t = log rho_t + sg(min_{j<t} log rho_j),   min over the empty prefix (t = 1) = 0

    i.e. the token ratio times a stop-gradient prefix weight, and the surrogate clips r_t. Measured
    consequence (tests/test_algos_losses.py): one early token with rho = 0.5 puts every later
    r_t <= 0.5 < 1 - eps, so under ppo_clip every later NEGATIVE-advantage token of that response
    loses its gradient, even where its own rho_t = 1. `prefix_min_weight` keeps the weight outside.
    """
    lr = (logp - logp_old) * mask
    return (lr + _prefix_min(lr, mask)) * mask


def prefix_min_loss_weight(logp, logp_old, mask):
    """w_t = exp(sg(min_{j<t} log rho_j)) (1 for the first token), detached."""
    return torch.exp(_prefix_min((logp - logp_old) * mask, mask)).detach() * mask


@RATIOS.register("prefix_min_weight", loss_weight=prefix_min_loss_weight)
def compute_prefix_min_weight_log_ratio(logp, logp_old, mask):
    """MinPRO, our reading with the prefix weight OUTSIDE the clip: the surrogate sees the plain
    token ratio rho_t (and clips it as PPO does), and its token loss is multiplied by the detached
    prefix weight  w_t = exp(sg(min_{j<t} log rho_j))  (the `loss_weight` property):

        L_t = w_t * surrogate(rho_t, A_t)

    A small early ratio then scales the later tokens' gradients down instead of clipping them to
    zero: the "down-weighting the gradient" reading of the paper's summary.
    """
    return (logp - logp_old) * mask


compute_prefix_min_log_ratio.__doc__ += MINPRO_NOTE
compute_prefix_min_weight_log_ratio.__doc__ += MINPRO_NOTE
