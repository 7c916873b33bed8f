"""Benchmark: expanding a 1,000-run sweep spec (validation of every run included).

    .venv/bin/python bench/bench_expand.py            # prints the median of 5 expansions

The spec is 5 learning rates x 2 scales x 4 clip values x 25 seeds = 1,000 runs. The one-time
import of the harness (torch comes with the algorithm registries) is timed separately: it is paid
once per `rlablate sweep` command, not per run. The target is well under 2 s per expansion.
"""

from __future__ import annotations

import statistics
import sys
import time

t0 = time.perf_counter()
from harness.sweep.expand import expand  # noqa: E402
from harness.sweep.spec import parse_spec  # noqa: E402
from harness.config import build_config  # noqa: E402

build_config({})  # registries imported
t_import = time.perf_counter() - t0

SPEC = {
    "name": "bench",
    "base": "grpo",
    "set": {"train.steps": 10, "run.results_dir": "/nonexistent"},
    "grid": {"optim.lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "algo.clip_high": [0.2, 0.24, 0.28, 0.32]},
    "zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "slurm.time_min": [30, 60]}],
    "seeds": 25,
}


def main() -> int:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        runs = expand(parse_spec(SPEC))
        times.append(time.perf_counter() - t)
    assert len(runs) == 1000 and len({r.run_id for r in runs}) == 1000
    again = [r.run_id for r in expand(parse_spec(SPEC))]
    assert again == [r.run_id for r in runs], "expansion is not deterministic"
    med = statistics.median(times)
    print(f"import (once per command): {t_import:.2f} s")
    print(f"expand 1,000 runs: median {med:.3f} s (min {min(times):.3f}, max {max(times):.3f}) "
          f"= {med:.3f} ms/run")
    return 0 if med < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
