"""entropy_control: (coef, entropy, *, target, step, max_coef) -> the entropy bonus coefficient of
the next RL step, from this step's coefficient and the policy's measured mean token entropy.

The bonus itself is `loss -= coef * sum(w * H_t)` (`algo.entropy_coef`, harness/loop/update.py);
this axis says how the coefficient moves between steps. Property: adaptive (the coefficient is run
state: checkpointed, logged as `policy/entropy_coef`; `algo.entropy_coef` is its start value).
Values are Python floats (one per step), so the update is exact and bit-reproducible.
"""

from __future__ import annotations

from ..registry import Registry

ENTROPY_CONTROLS = Registry("algo.entropy_control", adaptive=False)


@ENTROPY_CONTROLS.register("fixed")
def entropy_fixed(coef: float, entropy: float, *, target: float, step: float,
                  max_coef: float) -> float:
    """A constant coefficient (verl `entropy_coeff`, TRL `entropy_coef`; PPO's c_2 S term, Schulman
    et al. 2017, arXiv 1707.06347): c_{k+1} = c_k."""
    return coef


@ENTROPY_CONTROLS.register("adaptive", adaptive=True)
def entropy_adaptive(coef: float, entropy: float, *, target: float, step: float,
                     max_coef: float) -> float:
    """Adaptive entropy control (Skywork-OR1, He et al. 2025, arXiv 2505.22312, "MAGIC"): the
    coefficient is raised by a fixed step when the entropy e_k measured at step k is below the
    target and lowered by it when above, and kept in [0, max_coef]:

        c_{k+1} = clip(c_k + step * sign(target - e_k), 0, max_coef)      (e_k = target: c_k)

    The released recipe's keys and values (SkyworkAI/Skywork-OR1, or1_scripts/train/7b_8k.sh):
    adaptive_entropy.target_entropy 0.2, delta_ent_coef 1e-4, min_ent_coef 0, max_ent_coef 0.005,
    start entropy_coeff 0. Not checked against the paper's equation (no stored copy reaches its
    method section): our reading also leaves out a gate that, as we recall it, applies the
    bonus only while e_k <= target; this function always applies c_k."""
    if entropy < target:
        coef = coef + step
    elif entropy > target:
        coef = coef - step
    return min(max(coef, 0.0), max_coef)
