"""The bad-input tally of issue 20, re-measured: each case is run as a fresh `rlablate` process in
an empty folder and classified as

    clear    exit 2, one line on stderr, nothing written
    unclear  refused (exit != 0) but with more than one line, or something written
    crash    a Python traceback
    noted    exit 0, with a one-line note on stderr (accepted on purpose, and said)
    silent   exit 0: accepted without a word

    python bench/bad_inputs.py [--root CHECKOUT]     # prints one row per case and the tally

The cases are the ones issue 20 names (its 93 inputs were not published; these are its listed
categories). `--root` picks the checkout whose code runs (PYTHONPATH), e.g. main vs a branch.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
TINY = ["model.scale=tiny-0.3m", "warmup.max_steps=0", "warmup.target_pass_rate=0", "train.steps=2",
        "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=24",
        "eval.in_dist.n_items=8", "eval.held_out.n_items=8", "run.threads=1",
        "model.max_positions=48"]
SPEC = "name: x\ngrid:\n  optim.lr: [1e-4, 3e-4]\n"
CFG = "train:\n  steps: 3\n"
DOTTED = "train:\n  steps: 3\noptim.lr: 3e-4\n"
CASES = [
    ("train run.device=cuda (no GPU)", ["train", *TINY, "run.device=cuda"]),
    ("train model.path that does not exist", ["train", *[o for o in TINY if not o.startswith(
        ("model.", "warmup.target"))], "model.scale=pretrained", "model.path=/no/such/model"]),
    ("train task data file that does not exist", ["train", *TINY, "task.name=math",
     "task.train_path=/no/t.jsonl", "task.in_dist_path=/no/a.jsonl", "task.held_out_path=/no/b.jsonl"]),
    ("train a named held-out file that does not exist", ["train", *TINY, "task.name=math", *(
        f"task.{k}_path={HERE / 'harness' / 'data' / f}" for k, f in (
            ("train", "gsm8k_sample_train.jsonl"), ("in_dist", "gsm8k_sample_test.jsonl"),
            ("held_out", "math_sample_test.jsonl"))), "task.held_out_paths.far=/no/far.jsonl",
     "eval.held_out_sets=[far]"]),
    ("config run.threads=-1", ["config", "run.threads=-1"]),
    ("config algo.clip_low=1.5", ["config", "algo.clip_low=1.5"]),
    ("config run.results_dir= (empty)", ["config", "run.results_dir="]),
    ("config max_new_tokens=100000 + positions", ["config", "rollout.max_new_tokens=100000",
                                                  "model.max_positions=100100"]),
    ("config the same key twice", ["config", "train.steps=1", "train.steps=2"]),
    ("analyze --eval-set heldout", ["analyze", "SWEEP", "--eval-set", "heldout"]),
    ("analyze --eval-set IN_DIST", ["analyze", "SWEEP", "--eval-set", "IN_DIST"]),
    ("analyze --bootstrap -5", ["analyze", "SWEEP", "--bootstrap", "-5"]),
    ("analyze --reference absent", ["analyze", "SWEEP", "--reference", "nope"]),
    ("analyze --out an existing file", ["analyze", "SWEEP", "--out", "FILE"]),
    ("analyze a file", ["analyze", "FILE"]),
    ("analyze a spec path", ["analyze", "SPEC"]),
    ("analyze --by bad", ["analyze", "SWEEP", "--by", "algo.presett"]),
    ("analyze --out new/deep path, bad --by", ["analyze", "SWEEP", "--out", "new/deep", "--by", "x"]),
    ("train SPEC.yaml (a sweep spec)", ["train", "SPEC"]),
    ("sweep CONFIG.yaml", ["sweep", "CFG", "--dry-run"]),
    ("status CONFIG.yaml", ["status", "CFG"]),
    ("config optim.lr = 3e-4 (spaces)", ["config", "optim.lr", "=", "3e-4"]),
    ("config with a dotted key in the file", ["config", "DOTTED"]),
    ("train --steps 10", ["train", "--steps", "10"]),
]


def classify(r: subprocess.CompletedProcess, written: list[str]) -> str:
    if "Traceback" in r.stderr:
        return "crash"
    if r.returncode == 0:
        notes = [ln for ln in r.stderr.splitlines() if ln.startswith("rlablate: note: ")]
        return "noted" if len(notes) == 1 else "silent"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("usage:")]
    return "clear" if r.returncode == 2 and len(lines) == 1 and not written else "unclear"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(HERE))
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=args.root)
    sys.path.insert(0, args.root)
    from analysis.synth import write_demo_sweep
    tally: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as base:
        base = Path(base)
        sweep = base / "sweep"
        write_demo_sweep(sweep, algos={"grpo": (0.6, 1.4, 0.4), "dapo": (0.66, 1.8, 0.41)},
                         scales=("0.5B",), seeds=(0, 1), n_items=40, steps=60, eval_every=20)
        for name, argv in CASES:
            cwd = Path(tempfile.mkdtemp(dir=base))
            files = {"FILE": "x", "SPEC": SPEC, "CFG": CFG, "DOTTED": DOTTED}
            for k, text in files.items():
                (cwd / f"{k.lower()}.yaml" if k != "FILE" else cwd / "file").write_text(text)
            argv = [str(sweep) if a == "SWEEP" else str(cwd / "file") if a == "FILE" else
                    str(cwd / f"{a.lower()}.yaml") if a in files else a for a in argv]
            before = {p for p in cwd.rglob("*")} | {p for p in sweep.rglob("*")}
            r = subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=600)
            after = {p for p in cwd.rglob("*")} | {p for p in sweep.rglob("*")}
            written = sorted(str(p) for p in after - before)
            kind = classify(r, written)
            tally[kind] = tally.get(kind, 0) + 1
            first = (r.stderr.strip().splitlines() or [""])[-1][:110]
            print(f"{kind:8s} exit {r.returncode}  {name:42s} {first}")
    print("tally: " + ", ".join(f"{k} {tally.get(k, 0)}" for k in ("clear", "unclear", "crash",
                                                                   "noted", "silent")))


if __name__ == "__main__":
    main()
