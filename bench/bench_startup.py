"""Benchmark: start-up time of the `rlablate` command line (issue 20: well under 1 s).

    .venv/bin/python bench/bench_startup.py                 # median of 9 runs of each command
    .venv/bin/python bench/bench_startup.py --repeats 15 --root /work/main   # another checkout

Each command is a fresh `python -m harness.cli ...` process (what the `rlablate` script runs), with
PYTHONPATH set to `--root` so the checkout under test is the one imported; wall seconds from spawn
to exit, median and min over the repeats, commands interleaved so load changes hit all of them.
`--help` and `config` must not import torch, scipy or pandas (tests/test_cli_startup.py checks the
modules; this script measures the seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "rlablate --help": ["--help"],
    "rlablate train --help": ["train", "--help"],
    "rlablate config train.steps=10": ["config", "train.steps=10"],
    "rlablate analyze --help": ["analyze", "--help"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=args.root)
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "harness.cli", *argv], env=env,
                               cwd=args.root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[name].append(time.perf_counter() - t0)
            if r.returncode:
                sys.exit(f"{name}: exit {r.returncode}: {r.stderr.decode()[-2000:]}")
    print(f"root {args.root}, {args.repeats} repeats, load average {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        print(f"  {name:34s} median {statistics.median(ts):.2f} s  min {min(ts):.2f} s")


if __name__ == "__main__":
    main()
