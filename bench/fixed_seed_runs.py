"""Fixed-seed runs that pin the loop's behaviour across a refactor.

    python bench/fixed_seed_runs.py run OUT_DIR        # every case below, in this process
    python bench/fixed_seed_runs.py compare DIR_A DIR_B
    python bench/fixed_seed_runs.py compare DIR_A DIR_B --new-keys-ok   # B's config may add keys
    python bench/fixed_seed_runs.py compare-sweeps SWEEP_DIR_A SWEEP_DIR_B   # e.g. two demo-quicks

`run` trains each case (every preset, plus the axes no preset turns on: KL in the loss and in the
reward, rollout correction, top-p with a recomputed pi_old, micro-batches, LoRA, bf16) for a few
steps on the 0.27M model and writes its run directory under OUT_DIR/<case>/. `compare` checks, for
every case, that metrics.jsonl and eval_items.jsonl are identical line by line after dropping the
wall-clock columns (`perf/*`, `compute/wall_s`: time, not behaviour), that config.yaml is byte-
identical (with the two output roots written as one placeholder), and that summary.json agrees
except for its wall times. Exit 1 on the first difference,
naming the case, the file, the line and the key. With `--new-keys-ok` (a change that adds config
keys, e.g. issue 18's new axes at their defaults) config.yaml is compared as data: every key of A
must have the same value in B, keys only in B are listed but allowed, and the run id and the
summary's `run_id` (a hash of the config) may differ; metrics, eval items and the rest of the
summary must still be identical.

The issue-14 refactor was checked with it: run at the commit before, run at the commit after,
compare (LOG.md, 2026-12-01 session 4: 25 of 25 identical to 70b7512).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tests"))
from conftest import TINY  # noqa: E402  (the test suite's cheapest whole-loop config)

DATA = Path("<DATA>")  # the shipped math sample, copied under OUT_DIR (so configs compare as equal)

PRESETS = ["grpo", "dr_grpo", "dapo", "gspo", "cispo", "minpro", "rloo", "reinforce_pp",
           "reinforce_pp_baseline", "ppo", "vapo", "scalerl",
           "sapo", "gmpo", "dppo_tv", "dppo_kl", "luspo", "vespo"]  # the last six: issue 18
CASES: dict[str, list[str]] = {p: [f"algo.preset={p}"] for p in PRESETS}
CASES.update({
    "vapo_pretrain": ["algo.preset=vapo", "algo.value_pretrain_steps=2"],
    "grpo_k3_loss": ["algo.kl=k3", "algo.kl_coef=0.04"],
    "rpp_k1_reward": ["algo.preset=reinforce_pp", "algo.kl=k1", "algo.kl_mode=reward",
                      "algo.kl_coef=0.05"],
    "ppo_k2_reward": ["algo.preset=ppo", "algo.kl=k2", "algo.kl_mode=reward", "algo.kl_coef=0.05"],
    "grpo_tis": ["algo.old_logprobs=recompute", "algo.rollout_correction=tis", "algo.epochs=2"],
    "grpo_mask": ["algo.old_logprobs=recompute", "algo.rollout_correction=mask",
                  "algo.rollout_correction_cap=1.5"],
    "grpo_top_p": ["algo.old_logprobs=recompute", "rollout.top_p=0.9"],
    "grpo_micro_dual": ["algo.micro_batches=4", "algo.dual_clip=3.0", "algo.epochs=2"],
    "grpo_lag": ["algo.rollout_lag=2", "algo.minibatches=2"],
    "grpo_zero_var": ["algo.group_filter=zero_variance"],
    "grpo_lora_k3": ["model.lora_rank=4", "algo.kl=k3", "algo.kl_coef=0.04"],
    "grpo_bf16": ["model.dtype=bf16", "algo.fp32_lm_head=true"],
    "grpo_wall": ["train.max_wall_s=0.001"],
    # issue 18's axes that no preset turns on
    "grpo_seq_tis": ["algo.old_logprobs=recompute", "algo.rollout_correction=seq_tis", "algo.epochs=2"],
    "grpo_seq_mask": ["algo.old_logprobs=recompute", "algo.rollout_correction=seq_mask"],
    "grpo_dsv32_entropy": ["algo.off_policy_mask=dsv32", "algo.off_policy_mask_threshold=0.01",
                           "algo.epochs=2", "algo.entropy_coef=0.01"],
    "grpo_prefix_min_weight": ["algo.ratio=prefix_min_weight", "algo.epochs=2"],
    "grpo_batch_std_seq": ["algo.advantage=group_mean_batch_std_seq"],
    "scalerl_std_before_filter": ["algo.preset=scalerl", "algo.adv_batch_scope=sampled"],
    "cispo_band": ["algo.preset=cispo", "algo.surrogate=cispo_band",
                   "algo.clip_low=1.0", "algo.clip_high=4.0"],
    # tasks and held-out sets (issue 17, part 3: a config that requests no new set is unchanged)
    "chain_sum_held_out_sets": ["eval.held_out_sets=[more_terms, first_two_ge_50]"],
    "countdown": ["task.name=countdown"],
    "math_sample": ["task.name=math", f"task.train_path={DATA / 'gsm8k_sample_train.jsonl'}",
                    f"task.in_dist_path={DATA / 'gsm8k_sample_test.jsonl'}",
                    f"task.held_out_path={DATA / 'math_sample_test.jsonl'}",
                    "eval.in_dist.n_items=12", "eval.held_out.n_items=12", "model.max_positions=256",
                    "rollout.max_new_tokens=16", "train.steps=2"],
    "warm_held_out_in_warmup": ["warmup.max_steps=20", "warmup.min_steps=10", "warmup.check_every=10",
                                "warmup.check_items=8", "task.held_out_in_warmup=true"],
})

VOLATILE = ("perf/", "compute/wall_s")


def run(out: Path, only: list[str]) -> None:
    from harness.config import load_config
    from harness.loop import train

    cache = out / "_cache"
    data = out / "_data"
    data.mkdir(parents=True, exist_ok=True)
    for f in (ROOT / "harness" / "data").glob("*.jsonl"):
        (data / f.name).write_bytes(f.read_bytes())
    for name, over in CASES.items():
        if only and name not in only:
            continue
        over = [o.replace(str(DATA), str(data)) for o in over]
        cfg = load_config(None, TINY + over + [f"run.results_dir={out / name}",
                                               f"run.cache_dir={cache}", "run.sweep=fixed"])
        s = train(cfg, progress=False)
        print(f"{name:24s} {s['status']:9s} step {s['step']}", flush=True)


def _run_dir(case_dir: Path) -> Path:
    dirs = [p.parent for p in case_dir.glob("fixed/*/config.yaml")]
    if len(dirs) != 1:
        raise SystemExit(f"{case_dir}: expected one run directory, found {len(dirs)}")
    return dirs[0]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _timeless(x):
    """A summary without its wall-clock values (any `wall_s`, `perf/*`, `compute/wall_s`) and the
    machine's fingerprint (`numerics`: where it ran, not what it did; both sides must run on one
    machine, since other numerics give other metrics)."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items()
                if k not in ("wall_s", "numerics", "numerics_before_resume") and not k.startswith(VOLATILE)}
    return x


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _config_diffs(ca: str, cb: str, new_keys_ok: bool) -> list[str]:
    if ca == cb:
        return []
    if not new_keys_ok:
        return ["config.yaml differs"]
    import yaml
    fa, fb = _flat(yaml.safe_load(ca)), _flat(yaml.safe_load(cb))
    changed = [f"{k} = {fa[k]!r} vs {fb.get(k, '<absent>')!r}" for k in fa if fb.get(k, object()) != fa[k]]
    return [f"config.yaml: {changed[0]}" + (f" (+{len(changed) - 1} more)" if len(changed) > 1 else "")] \
        if changed else []


def compare_run(ra: Path, rb: Path, root_a: Path, root_b: Path, new_keys_ok: bool = False) -> list[str]:
    """The differences between two run directories (empty: identical up to wall-clock values)."""
    ca = (ra / "config.yaml").read_text().replace(str(root_a.resolve()), "<ROOT>")
    cb = (rb / "config.yaml").read_text().replace(str(root_b.resolve()), "<ROOT>")
    diffs = _config_diffs(ca, cb, new_keys_ok)
    for fname in ("metrics.jsonl", "eval_items.jsonl"):
        xa, xb = _jsonl(ra / fname), _jsonl(rb / fname)
        if len(xa) != len(xb):
            diffs.append(f"{fname}: {len(xa)} vs {len(xb)} lines")
            continue
        for i, (u, v) in enumerate(zip(xa, xb)):
            ka = {k for k in u if not k.startswith(VOLATILE)}
            kb = {k for k in v if not k.startswith(VOLATILE)}
            if ka != kb:
                diffs.append(f"{fname}:{i + 1}: keys {sorted(ka ^ kb)}")
                break
            d = [k for k in sorted(ka) if u[k] != v[k]]
            if d:
                diffs.append(f"{fname}:{i + 1}: {d[0]} = {u[d[0]]!r} vs {v[d[0]]!r}")
                break
    sa, sb = (json.loads((r / "summary.json").read_text()) for r in (ra, rb))
    if new_keys_ok:
        sa.pop("run_id", None), sb.pop("run_id", None)
    if _timeless(sa) != _timeless(sb):
        diffs.append("summary.json differs")
    return diffs


def compare(a: Path, b: Path, new_keys_ok: bool = False) -> int:
    """Every case of `run` in A against the same case in B."""
    names = sorted(p.name for p in a.iterdir() if p.is_dir() and not p.name.startswith("_"))
    bad = 0
    for name in names:
        if not (b / name).is_dir():
            print(f"{name}: missing in {b}")
            bad += 1
            continue
        ra, rb = _run_dir(a / name), _run_dir(b / name)
        diffs = [] if ra.name == rb.name or new_keys_ok else \
            [f"run id {ra.name} != {rb.name} (the resolved config differs)"]
        diffs += compare_run(ra, rb, a, b, new_keys_ok)
        print(f"{name:24s} {'identical' if not diffs else 'DIFFERENT: ' + '; '.join(diffs)}")
        bad += bool(diffs)
    print(f"{len(names) - bad} of {len(names)} cases identical")
    return 1 if bad else 0


def compare_sweeps(a: Path, b: Path) -> int:
    """Every run directory of sweep directory A (e.g. results/demo-quick of `make demo-quick`)
    against the run of the same id in B."""
    runs = sorted(p.parent.name for p in a.glob("*/config.yaml"))
    bad = 0
    for rid in runs:
        diffs = compare_run(a / rid, b / rid, a, b) if (b / rid / "config.yaml").exists() else ["missing"]
        print(f"{rid:32s} {'identical' if not diffs else 'DIFFERENT: ' + '; '.join(diffs)}")
        bad += bool(diffs)
    print(f"{len(runs) - bad} of {len(runs)} runs identical")
    return 1 if bad or not runs else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(Path(sys.argv[2]).resolve(), sys.argv[3:])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "compare" and sys.argv[4:] in ([], ["--new-keys-ok"]):
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3]), new_keys_ok=len(sys.argv) == 5))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare-sweeps":
        sys.exit(compare_sweeps(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
