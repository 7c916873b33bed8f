"""Shared fixtures. Every test writes under its own tmp dirs; the warm-start cache is shared by the
whole session (a warm start is content-addressed, so sharing it is what a sweep does too)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The cheapest config that runs the whole loop: no warm-up, a 0.27M model, 4 steps.
TINY = ["model.scale=tiny-0.3m", "warmup.max_steps=0", "warmup.target_pass_rate=0",
        "train.steps=4", "rollout.prompts_per_step=4", "rollout.group_size=4",
        "rollout.max_new_tokens=24", "eval.in_dist.n_items=16", "eval.held_out.n_items=16",
        "eval.in_dist.k=2", "eval.held_out.k=2", "eval.every=2", "train.checkpoint_every=2",
        "run.threads=1", "model.max_positions=48"]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """The session's warm-start cache; RLABLATE_TEST_CACHE names a directory kept across sessions
    instead (make test-vllm keeps its warm starts in .venv-vllm/cache)."""
    keep = os.environ.get("RLABLATE_TEST_CACHE")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep).resolve()
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def tiny_overrides(tmp_path, cache_dir) -> list[str]:
    return TINY + [f"run.results_dir={tmp_path / 'results'}", f"run.cache_dir={cache_dir}"]


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.gpu` tests need CUDA, `@pytest.mark.vllm` tests need vLLM (`make test-vllm`
    builds a venv with its CPU build): without them they are skipped, and say why (in that venv,
    RLABLATE_REQUIRE_VLLM=1 turns a missing vLLM into a failure instead)."""
    import importlib.util

    import torch
    skips = {}
    if not torch.cuda.is_available():
        skips["gpu"] = "needs a CUDA device (torch.cuda.is_available() is False)"
    if importlib.util.find_spec("vllm") is None and os.environ.get("RLABLATE_REQUIRE_VLLM") != "1":
        skips["vllm"] = "needs vLLM: make test-vllm runs these in .venv-vllm (vLLM's CPU build)"
    for item in items:
        for mark, reason in skips.items():
            if mark in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        order_for_workers(items)


def order_for_workers(items) -> None:
    """`make test` runs the suite (less the SLURM and fault tests, which run beside it in a process
    of their own) on two workers, test by test (`--dist load`): xdist hands out the tests in
    collection order, so the files that hold `slow` tests (the learning runs, minutes each) go
    first and no long test is left to run alone at the end. (Under `--dist loadfile` a whole file
    went to one worker: 27 min instead of ~18 for the same tests, session 8.)"""
    files_with_slow = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda it: it.path not in files_with_slow)  # stable within each part
