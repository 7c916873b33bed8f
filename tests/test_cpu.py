"""harness.cpu.tune_malloc: freed multi-MB tensors are reused instead of page-faulted back.

Each case runs in a fresh interpreter: the setting is process-wide and cannot be undone."""

import subprocess
import sys

import pytest

PROBE = r"""
import resource, sys, torch
if sys.argv[1] == "tuned":
    from harness.cpu import tune_malloc
    assert tune_malloc() is True
    assert tune_malloc() is True  # idempotent
x = torch.ones(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for rep in range(10):  # the pattern of a KV cache growing by torch.cat, generation after generation
    cache = torch.ones(256, 1024)
    for _ in range(40):
        cache = torch.cat([cache, torch.ones(8, 1024)])
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_tuned_malloc_reuses_freed_blocks():
    default, tuned = _faults("default"), _faults("tuned")
    # default glibc: every new, larger block is mmap-ed and faulted in page by page
    assert default > 20_000, default
    assert tuned < default / 5, (tuned, default)  # measured ~11x fewer


def test_malloc_tuning_is_not_part_of_the_run_id():
    from harness.config import load_config
    a = load_config(None, ["run.malloc_tuning=true"])
    b = load_config(None, ["run.malloc_tuning=false"])
    assert a.run_id() == b.run_id() and a.run.malloc_tuning != b.run.malloc_tuning
