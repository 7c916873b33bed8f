"""Rollout throughput: the HF engine (our decode loop) vs the vLLM engine on the same model, batch
and settings, in one process (issue 19).

    .venv-vllm/bin/python bench/vllm_vs_hf.py                        # make test-vllm builds the venv
    .venv-vllm/bin/python bench/vllm_vs_hf.py --scale tiny-4m --repeats 7 --threads 2

The model is a random-init tiny Qwen2 of `model.scale` (fp32, saved with `save_pretrained` for
vLLM), the prompts are `chain_sum` train items, `--prompts` x `--group` samples of at most
`--new-tokens` tokens at temperature 1 (the default config's step: 32 x 8 x 48). Each engine is
warmed up once (vLLM's first call is slow), then the two alternate, `--repeats` batches each;
generated tokens (EOS included) per second of wall time of `generate`, median and range per
engine. Both use `--threads` torch threads (vLLM's CPU build keeps the trainer's count:
harness/engines/vllm.py). The last line is `RESULT {json}`; docs/benchmarks.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: not a fraction of the RAM

import torch  # noqa: E402

from harness.config import load_config  # noqa: E402
from harness.engines import make_engine  # noqa: E402
from harness.models import build_model, count_params, get_tokenizer  # noqa: E402
from harness.tasks import make_task  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="tiny-1m")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="vllm_vs_hf_"))
    cfg = load_config(None, [f"model.scale={args.scale}", f"run.cache_dir={tmp}", "rollout.engine=vllm",
                             f"rollout.max_new_tokens={args.new_tokens}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    model = build_model(cfg, tok, 0).eval()
    model.save_pretrained(tmp / "model")
    tok.save_pretrained(tmp / "model")
    items, _ = task.take("train", 0, args.prompts)
    prompts = [it.prompt for it in items for _ in range(args.group)]
    t = time.time()
    engines = {"hf": make_engine("hf", model, tok),
               "vllm": make_engine("vllm", model, tok, model_path=tmp / "model", cfg=cfg)}
    start_s = time.time() - t
    rates: dict = {name: [] for name in engines}
    first: dict = {}
    for rep in range(args.repeats + 1):                 # round 0: the warm-up call of each
        for name in (list(engines) if rep % 2 == 0 else list(engines)[::-1]):
            torch.manual_seed(rep)
            t = time.time()
            ro = engines[name].generate(prompts, max_new_tokens=args.new_tokens, temperature=1.0)
            dt = time.time() - t
            if rep == 0:
                first[name] = dt
            else:
                rates[name].append(ro.n_tokens / dt)
    res = {"scale": args.scale, "n_params": count_params(model), "batch": len(prompts),
           "new_tokens": args.new_tokens, "threads": args.threads, "repeats": args.repeats,
           "vllm_start_s": round(start_s, 1), "first_call_s": {k: round(v, 2) for k, v in first.items()}}
    for name, r in rates.items():
        res[f"{name}_tokens_per_s"] = {"median": round(statistics.median(r)), "min": round(min(r)),
                                       "max": round(max(r))}
        print(f"{name:5s} {statistics.median(r):9.0f} tokens/s (min {min(r):.0f}, max {max(r):.0f}; "
              f"first call {first[name]:.1f} s)")
    res["vllm_over_hf"] = round(statistics.median(rates["vllm"]) / statistics.median(rates["hf"]), 3)
    print("RESULT " + json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
