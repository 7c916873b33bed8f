"""The `train` row's length statistics (harness/loop/metrics.train_row), against hand counts."""
from types import SimpleNamespace

import pytest
import torch

from harness.loop.metrics import train_row


def _row(scores, lengths, group_size):
    ro = SimpleNamespace(lengths=torch.tensor(lengths), truncated=torch.zeros(len(lengths), dtype=torch.bool),
                         n_tokens=sum(lengths), forced=None)
    s = torch.tensor(scores, dtype=torch.float32)
    sampled = SimpleNamespace(rollout=ro, scores=s, rewards=s, rounds=1)
    upd = SimpleNamespace(sums={}, loss=[0.0], value_loss=[], grad_norm=[1.0])
    prep = SimpleNamespace(mismatch={}, explained_var=None)
    return train_row(3, sampled, 3, 0, upd, prep, group_size=group_size, with_reference=False,
                     pos_nll=False, sync_s=0.0, optimizer_lr=1e-4, dt=1.0)


def test_incorrect_length_in_groups_with_both_outcomes():
    # three groups of 3: mixed (lengths 4 right, 10 and 20 wrong), all wrong (30, 40, 50), all
    # right (5, 6, 7). Incorrect: 10, 20, 30, 40, 50 -> 30; in mixed groups only: 10, 20 -> 15
    row = _row([1, 0, 0, 0, 0, 0, 1, 1, 1], [4, 10, 20, 30, 40, 50, 5, 6, 7], 3)
    assert row["rollout/response_len_incorrect"] == pytest.approx(30.0)
    assert row["rollout/response_len_incorrect_mixed"] == pytest.approx(15.0)
    assert row["rollout/response_len_correct"] == pytest.approx((4 + 5 + 6 + 7) / 4)
    assert row["rollout/zero_var_groups"] == pytest.approx(2 / 3)


def test_no_mixed_group_gives_null():
    row = _row([0, 0, 1, 1], [8, 9, 3, 4], 2)
    assert row["rollout/response_len_incorrect"] == pytest.approx(8.5)
    assert row["rollout/response_len_incorrect_mixed"] is None
