"""A CPU MFU: the loop's achieved FLOP/s against a measured matmul peak of this machine.

    python bench/bench_mfu.py [--steps 12] [--repeats 5] [--threads 1]

Three numbers, measured side by side in one run (issue 16: "speed is a means"):

1. the peak: fp32 `torch.mm` of square matrices (256..2048) on `--threads` threads, the best size's
   median GFLOP/s over `--repeats`;
2. the count: the project's 2N (forward) / 6N (forward + backward) FLOP rule (harness/loop/metrics)
   against `torch.utils.flop_counter.FlopCounterMode` on one teacher-forced forward + backward of the
   default tiny model at the loop's batch shape (attention and the LM head included), so the ratio
   says how far the rule is from the operations actually run;
3. the loop: `rlablate train` on the default config (tiny-1m, 16 prompts x 8, random init so no warm
   start is needed, `--threads` threads) for `--steps` steps; its train-FLOP count over the summed
   step times (the median step's rate too).

MFU = loop FLOP/s (by the measured count) / peak. A benchmark, not a test: the machine is shared,
so read medians and run it on an idle machine for the record (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def matmul_peak(threads: int, repeats: int) -> tuple[float, int]:
    torch.set_num_threads(threads)
    best, best_n = 0.0, 0
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        reps = max(1, int(2e9 / (2 * n ** 3)))
        torch.mm(a, b)
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b)
            rates.append(2 * n ** 3 * reps / (time.perf_counter() - t0) / 1e9)
        med = statistics.median(rates)
        if med > best:
            best, best_n = med, n
    return best, best_n


def counted_vs_measured(batch: int, prompt: int, response: int) -> tuple[float, float, int]:
    """(6N x tokens, FlopCounterMode's count, N) for one forward + backward of tiny-1m."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from harness.scales import SCALES
    shape = dict(SCALES["tiny-1m"])
    cfg = Qwen2Config(vocab_size=17, max_position_embeddings=128, tie_word_embeddings=True,
                      num_key_value_heads=shape["num_attention_heads"], **shape)
    model = Qwen2ForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, 17, (batch, prompt + response))
    with FlopCounterMode(display=False) as fc:
        out = model(input_ids=ids)
        out.logits.float().log_softmax(-1).mean().backward()
    return 6.0 * n_params * ids.numel(), float(fc.get_total_flops()), n_params


def run_loop(steps: int, threads: int, mode=None) -> list[dict]:
    """The metrics rows of a `steps`-step run of the default config (random init, no warm start,
    16 prompts x 8, 16 eval items per set) in a temporary dir, inside the context ``mode``."""
    import contextlib

    from harness.config import load_config
    from harness.loop import train
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(None, ["warmup.max_steps=0", "warmup.target_pass_rate=0",
                                 "rollout.prompts_per_step=16", f"train.steps={steps}",
                                 f"eval.every={steps}", "eval.in_dist.n_items=16",
                                 "eval.held_out.n_items=16", f"run.threads={threads}",
                                 f"run.results_dir={tmp}", f"run.cache_dir={tmp}/cache"])
        with mode if mode is not None else contextlib.nullcontext():
            train(cfg, progress=False)
        return [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]


def loop_rate(steps: int, threads: int) -> tuple[float, float, float]:
    """(train FLOPs by the project's count, summed step seconds, median step seconds)."""
    rows = run_loop(steps, threads)
    tr = [r for r in rows if r.get("kind") == "train"][1:]  # the first step warms allocators up
    flops = tr[-1]["compute/flops"] - rows[[r.get("kind") for r in rows].index("train")]["compute/flops"]
    secs = [r["perf/step_s"] for r in tr]
    return float(flops), float(sum(secs)), float(statistics.median(secs))


def loop_counted(steps: int, threads: int) -> tuple[float, float]:
    """(the project's count, FlopCounterMode's count) of FLOPs over a whole short loop run: every
    rollout (prompt shared by the group, KV-cached decoding), trainer forward + backward and eval
    of ``steps`` steps, so the ratio says how far the 2N/6N rule is from what the loop runs."""
    from torch.utils.flop_counter import FlopCounterMode
    fc = FlopCounterMode(display=False)
    rows = run_loop(steps, threads, fc)
    last = [r for r in rows if "compute/flops" in r][-1]
    rule = float(last["compute/flops"]) + float(last.get("compute/eval_flops", 0.0))
    return rule, float(fc.get_total_flops())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    peak, n = matmul_peak(args.threads, args.repeats)
    print(f"matmul peak ({args.threads} thread(s)): {peak:.1f} GFLOP/s (fp32, {n}x{n}, median of "
          f"{args.repeats})")
    rule, measured, n_params = counted_vs_measured(128, 7, 10)
    ratio = measured / rule
    print(f"FLOP count, one forward+backward of tiny-1m ({n_params} params, 128 x 17 tokens): "
          f"6N rule {rule / 1e9:.2f} GFLOP, FlopCounterMode {measured / 1e9:.2f} GFLOP "
          f"(measured / rule = {ratio:.2f})")
    loop_rule, loop_measured = loop_counted(3, args.threads)
    loop_ratio = loop_measured / loop_rule
    print(f"FLOP count, a whole 3-step loop run (rollouts, updates, evals): rule "
          f"{loop_rule / 1e9:.2f} GFLOP, FlopCounterMode {loop_measured / 1e9:.2f} GFLOP "
          f"(measured / rule = {loop_ratio:.2f})")
    flops, secs, med = loop_rate(args.steps, args.threads)
    rate = flops / secs / 1e9
    print(f"loop ({args.steps} steps, {args.threads} thread(s)): {flops / 1e9:.1f} GFLOP by the "
          f"2N/6N rule in {secs:.1f} s of steps (median step {med:.2f} s): {rate:.2f} GFLOP/s by "
          f"the rule, {rate * loop_ratio:.2f} by the whole-loop measured count")
    print(f"MFU: {rate * loop_ratio / peak:.1%} of the matmul peak (by the rule: {rate / peak:.1%}; "
          f"the rule's own one-pass ratio {ratio:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
