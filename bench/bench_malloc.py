"""Minor page faults of a KV-cache-like allocation pattern, glibc defaults vs `harness.cpu.tune_malloc`.

    python bench/bench_malloc.py [--repeats 5]

Each measurement is a fresh interpreter (the setting is process-wide and cannot be undone). Prints
the median fault count of each side and their ratio (measured ~11x fewer with tuning, LOG.md
session 3). A benchmark, not a test: page-fault counts depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import resource, sys, torch
if sys.argv[1] == "tuned":
    from harness.cpu import tune_malloc
    assert tune_malloc() is True
x = torch.ones(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for rep in range(10):  # the pattern of a KV cache growing by torch.cat, generation after generation
    cache = torch.ones(256, 1024)
    for _ in range(40):
        cache = torch.cat([cache, torch.ones(8, 1024)])
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return int(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    n = ap.parse_args().repeats
    default, tuned = [], []
    for _ in range(n):  # alternating, so drifting load hits both sides alike
        default.append(faults("default"))
        tuned.append(faults("tuned"))
    d, t = statistics.median(default), statistics.median(tuned)
    print(f"minor page faults, median of {n}: default {d:.0f}, tuned {t:.0f}; ratio {d / max(t, 1):.1f}x")


if __name__ == "__main__":
    main()
