"""Side by side: rlablate's GRPO loop vs TRL's `GRPOTrainer` on identical work, in one run (issue 7).

    make bench                                        # sets up both venvs, then runs this
    .venv/bin/python bench/vs_trl.py --batches 24 --warmup 3 --threads 1
    .venv/bin/python bench/vs_trl.py --profile 12     # ours only, under pyinstrument

Both sides start from the same checkpoint (the cached warm start of `configs/default.yaml`: a
0.86M-parameter Qwen2-style model written with `save_pretrained`, and its tokenizer), see the same
prompts in the same order (reasoning-gym `chain_sum` train items 0, 1, 2, ...) and are rewarded for
the same thing (the integer after the last '=' before the first '.' equals the answer). Settings on
both: 32 prompts x 8 samples, max 48 new tokens, temperature 1, no top-k/top-p, GRPO advantage
(group mean/std), token ratio, symmetric clip 0.2, per-sequence token mean then mean over sequences
(TRL `loss_type="grpo"`), two optimizer steps of 128 rows per rollout batch, AdamW lr 1e-4
betas (0.9, 0.99), no weight decay, grad clip 1.0, constant lr, no KL (no reference model).

Each side is a worker process in its own environment: ours runs the real `harness.loop.train` loop
in the main venv; TRL runs in `bench/.venv-trl` (trl 1.16, the same torch and transformers). A
worker sets up, then runs one rollout batch (+ its two optimizer steps) each time this process says
"go" and reports its timings. Batches alternate between the sides (ABBA order), so machine noise
hits both; only one side computes at a time, with the same number of torch threads.

Measured per batch: wall seconds from "go" to the end of the second optimizer step (ours: to the
start of the next step, so its per-step metrics and TensorBoard logging count); seconds inside the
model's sampling call and the tokens it generated (incl. EOS); the pass rate of the batch. Per side:
the median over the measured batches, and the ratio TRL / ours of each pair's batch time, median
and interquartile range. Results are also written as JSON under bench/.work/.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work"
TAG = "@@BENCH "


# ------------------------------------------------------------------------------------------------
# shared by both workers (no harness import: the TRL venv has no reasoning-gym)
# ------------------------------------------------------------------------------------------------
def reward(text: str, answer: str) -> float:
    """1.0 iff the integer after the last '=' before the first '.' equals `answer` (the harness's
    `tasks.extract_answer` + reasoning-gym's numeric compare; the ours worker checks agreement)."""
    if "." not in text:
        return 0.0
    ans = text.split(".", 1)[0].rsplit("=", 1)[-1].strip()
    return float(bool(re.fullmatch(r"-?\d+", ans)) and int(ans) == int(answer))


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/self/statm") as f:
        cur = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return cur, peak


def send(obj: dict) -> None:
    sys.stdout.write(TAG + json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_go() -> None:
    line = sys.stdin.readline()
    if line.strip() != "go":  # the parent closed the pipe or said stop
        os._exit(0)


# ------------------------------------------------------------------------------------------------
# ours: the real training loop, gated at the start of each step
# ------------------------------------------------------------------------------------------------
def worker_ours(spec: dict) -> None:
    import torch

    import harness.loop.parts as P
    from harness.config import load_config
    from harness.engines import HFEngine
    from harness.loop import train

    cfg = load_config(str(REPO / "configs" / "default.yaml"), spec["ours_overrides"])
    n_total = spec["n_total"]
    st = {"gen_s": 0.0, "tokens": 0, "correct": 0.0, "n": 0, "mismatch": 0, "step": 0, "t_go": 0.0}
    profiler = None

    gen = HFEngine.generate

    def timed_generate(self, *a, **k):
        t = time.perf_counter()
        ro = gen(self, *a, **k)
        st["gen_s"] += time.perf_counter() - t
        st["tokens"] += ro.n_tokens
        return ro
    HFEngine.generate = timed_generate

    class Gated:
        """The task, except that drawing a step's training prompts waits for 'go'."""

        def __init__(self, task):
            self.task = task

        def __getattr__(self, name):
            return getattr(self.task, name)

        def score(self, response, item):
            s = self.task.score(response, item)
            st["correct"] += s
            st["n"] += 1
            st["mismatch"] += int(reward(response, item.answer) != s)
            return s

        def take(self, split, cursor, n):
            nonlocal profiler
            if split == "train":
                now = time.perf_counter()
                if st["step"] > 0:  # the previous step ended here
                    send({"batch": st["step"] - 1, "batch_s": now - st["t_go"], "gen_s": st["gen_s"],
                          "tokens": st["tokens"], "pass_rate": st["correct"] / max(st["n"], 1),
                          "reward_mismatch": st["mismatch"], "rss_mb": rss_mb()})
                if st["step"] == n_total:
                    if profiler is not None:
                        profiler.stop()
                        Path(spec["profile_out"]).write_text(profiler.output_text(unicode=True, color=False))
                    os._exit(0)
                if st["step"] == 0:
                    send({"ready": True, "threads": torch.get_num_threads(), "rss_mb": rss_mb()})
                wait_go()
                if spec.get("profile_out") and st["step"] == spec["warmup"]:
                    from pyinstrument import Profiler
                    profiler = Profiler(interval=0.001)
                    profiler.start()
                st.update(gen_s=0.0, tokens=0, correct=0.0, n=0, mismatch=0, step=st["step"] + 1,
                          t_go=time.perf_counter())
            return self.task.take(split, cursor, n)

    make_task = P.make_task
    P.make_task = lambda cfg: Gated(make_task(cfg))
    train(cfg, progress=False)
    raise RuntimeError("the training loop ended before the benchmark did")


# ------------------------------------------------------------------------------------------------
# TRL: GRPOTrainer, gated by a callback at every other optimizer step
# ------------------------------------------------------------------------------------------------
def worker_trl(spec: dict) -> None:
    import torch
    torch.set_num_threads(spec["threads"])
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    s = spec["settings"]
    tok = AutoTokenizer.from_pretrained(spec["model_dir"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32,
                                                 attn_implementation="sdpa")
    # ours encodes BOS + prompt; TRL tokenizes the prompt text without special tokens, so the BOS
    # goes into the text (a special token of the tokenizer: it encodes to the same ids)
    prompts = [tok.bos_token + p for p in spec["prompts"]]
    ids = tok(prompts[0], add_special_tokens=False)["input_ids"]
    assert ids == spec["first_prompt_ids"], (ids, spec["first_prompt_ids"])
    ds = Dataset.from_dict({"prompt": prompts, "answer": spec["answers"]})
    st = {"gen_s": 0.0, "tokens": 0, "correct": 0.0, "n": 0, "t_go": 0.0, "t_step": 0.0, "opt2_s": 0.0}

    def chain_sum_reward(prompts, completions, completion_ids, answer, **_):
        out = [reward(c, a) for c, a in zip(completions, answer)]
        st["tokens"] += sum(len(c) for c in completion_ids)
        st["correct"] += sum(out)
        st["n"] += len(out)
        return out

    gen = model.generate

    def timed_generate(*a, **k):
        t = time.perf_counter()
        out = gen(*a, **k)
        st["gen_s"] += time.perf_counter() - t
        return out
    model.generate = timed_generate

    class Gate(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            send({"ready": True, "threads": torch.get_num_threads(), "rss_mb": rss_mb(),
                  "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                               "torch": torch.__version__}})

        def on_step_begin(self, args, state, control, **kw):
            if state.global_step % 2 == 0:  # a rollout batch starts (generation happens in this step)
                wait_go()
                st.update(gen_s=0.0, tokens=0, correct=0.0, n=0, t_go=time.perf_counter())
            st["t_step"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % 2 == 0:  # its second optimizer step is done
                now = time.perf_counter()
                send({"batch": state.global_step // 2 - 1, "batch_s": now - st["t_go"],
                      "gen_s": st["gen_s"], "tokens": st["tokens"],
                      "pass_rate": st["correct"] / max(st["n"], 1), "opt2_s": now - st["t_step"],
                      "rss_mb": rss_mb()})

    args = GRPOConfig(
        output_dir=str(WORK / "trl-out"), report_to="none", save_strategy="no", logging_steps=1,
        disable_tqdm=True, use_cpu=True, seed=spec["seed"], bf16=False, fp16=False,
        max_steps=2 * spec["n_total"], shuffle_dataset=False, dataloader_num_workers=0,
        per_device_train_batch_size=s["rows_per_update"], steps_per_generation=2,
        gradient_accumulation_steps=1, num_iterations=1,
        num_generations=s["group_size"], max_completion_length=s["max_new_tokens"],
        temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=1.0,
        beta=0.0, epsilon=s["clip"], loss_type="grpo", scale_rewards="group",
        learning_rate=s["lr"], adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0,
        lr_scheduler_type="constant", warmup_steps=0,
        # TRL's default is True (activation recomputation: one more forward per update); off is
        # its fastest setting for a model this small, so that is the baseline unless asked
        gradient_checkpointing=spec["trl_gradient_checkpointing"])
    trainer = GRPOTrainer(model=model, reward_funcs=chain_sum_reward, args=args, train_dataset=ds,
                          processing_class=tok, callbacks=[Gate()])
    trainer.train()
    os._exit(0)


# ------------------------------------------------------------------------------------------------
# the parent: build the shared inputs, run both workers alternately, summarise
# ------------------------------------------------------------------------------------------------
def prepare(a) -> dict:
    sys.path.insert(0, str(REPO))
    from harness.config import load_config
    from harness.models import get_tokenizer
    from harness.batch import encode_prompts
    from harness.tasks import make_task
    from harness.loop.warm_start import get_warm_start

    n_total = a.warmup + a.batches
    shutil.rmtree(WORK / "ours-results", ignore_errors=True)
    shutil.rmtree(WORK / "trl-out", ignore_errors=True)
    overrides = [f"run.threads={a.threads}", f"run.seed={a.seed}", "run.sweep=bench",
                 f"run.results_dir={WORK / 'ours-results'}", f"run.cache_dir={REPO / '.cache' / 'rlablate'}",
                 "eval.every=1000000", "eval.in_dist.n_items=8", "eval.held_out.n_items=8",
                 "train.checkpoint_every=1000000", f"train.steps={n_total + 1}", *a.ours_override]
    cfg = load_config(str(REPO / "configs" / "default.yaml"), overrides)
    r = cfg.rollout
    assert (cfg.algo.advantage, cfg.algo.ratio, cfg.algo.surrogate, cfg.algo.aggregation, cfg.algo.kl,
            cfg.algo.epochs, cfg.algo.minibatches) == ("group_norm", "token", "ppo_clip",
                                                       "seq_mean_token_mean", "none", 1, 2), "not GRPO"
    assert cfg.algo.clip_low == cfg.algo.clip_high and r.temperature == 1.0 and r.top_p == 1.0
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    warm_dir, _ = get_warm_start(cfg, tok, task, progress=True)
    items, _ = task.take("train", 0, r.prompts_per_step * (n_total + 1))
    first_ids, _ = encode_prompts(tok, [items[0].prompt], "cpu")
    return {"n_total": n_total, "warmup": a.warmup, "threads": a.threads, "seed": a.seed,
            "model_dir": str(warm_dir), "prompts": [it.prompt for it in items],
            "answers": [it.answer for it in items], "first_prompt_ids": first_ids[0].tolist(),
            "ours_overrides": overrides, "trl_gradient_checkpointing": a.trl_gradient_checkpointing,
            "settings": {"prompts": r.prompts_per_step, "group_size": r.group_size,
                         "max_new_tokens": r.max_new_tokens, "lr": cfg.optim.lr,
                         "clip": cfg.algo.clip_low,
                         "rows_per_update": r.prompts_per_step * r.group_size // cfg.algo.minibatches}}


class Worker:
    def __init__(self, name: str, python: str, spec_path: Path):
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(SPEC["threads"]),
                   MKL_NUM_THREADS=str(SPEC["threads"]), TOKENIZERS_PARALLELISM="false")
        self.name = name
        self.log = open(WORK / f"{name}.log", "w")
        self.p = subprocess.Popen([python, str(Path(__file__).resolve()), "--worker", name,
                                   "--spec", str(spec_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, env=env, cwd=str(REPO))

    def read(self) -> dict:
        for line in self.p.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
            self.log.write(line)
        raise RuntimeError(f"worker {self.name} exited (rc {self.p.wait()}); see {self.log.name}")

    def go(self) -> dict:
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        return self.read()

    def close(self) -> None:
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.log.close()


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def summarise(rows: dict, a, load: list, versions: dict) -> dict:
    out = {"settings": SPEC["settings"], "threads": a.threads,
           "trl_gradient_checkpointing": a.trl_gradient_checkpointing, "batches": a.batches, "warmup": a.warmup,
           "loadavg_start": load[0], "loadavg_end": load[1], "versions": versions, "sides": {}}
    for side, rs in rows.items():
        m = rs[a.warmup:]
        bs = [r["batch_s"] for r in m]
        gs = [r["gen_s"] for r in m]
        half = max(1, len(m) // 2)
        pr = [r["pass_rate"] for r in m]
        out["sides"][side] = {
            "batch_s": quartiles(bs), "gen_s": statistics.median(gs),
            "tokens_per_batch": statistics.median(r["tokens"] for r in m),
            "gen_tokens_per_s": statistics.median(r["tokens"] / r["gen_s"] for r in m),
            "opt_step_s": statistics.median((r["batch_s"] - r["gen_s"]) / 2 for r in m),
            "peak_rss_mb": max(r["rss_mb"][1] for r in rs),
            "pass_rate_first_half": statistics.mean(pr[:half]), "pass_rate_second_half": statistics.mean(pr[half:]),
            "pass_rate_all": [round(p, 4) for p in [r["pass_rate"] for r in rs]],
            "batch_s_all": [round(r["batch_s"], 4) for r in rs]}
        if side == "trl":
            out["sides"][side]["opt2_s"] = statistics.median(r["opt2_s"] for r in m)
        if side == "ours":
            out["sides"][side]["reward_mismatches"] = sum(r["reward_mismatch"] for r in rs)
    if len(rows) == 2:
        ratios = [t["batch_s"] / o["batch_s"] for o, t in zip(rows["ours"][a.warmup:], rows["trl"][a.warmup:])]
        out["ratio_trl_over_ours"] = quartiles(ratios)
        out["ratio_of_medians"] = out["sides"]["trl"]["batch_s"][1] / out["sides"]["ours"]["batch_s"][1]
    return out


def report(s: dict) -> str:
    st = s["settings"]
    lines = [f"GRPO, {st['prompts']} prompts x {st['group_size']}, max {st['max_new_tokens']} new tokens, "
             f"2 optimizer steps of {st['rows_per_update']} rows per rollout batch, lr {st['lr']}, "
             f"{s['threads']} torch thread(s) per side; {s['batches']} measured batches per side after "
             f"{s['warmup']} warm-up, alternating; load average {s['loadavg_start'][0]:.2f} -> "
             f"{s['loadavg_end'][0]:.2f} (1 min)", "",
             "| side | s / rollout batch (+2 opt steps), median [IQR] | gen s | gen tokens / batch | "
             "gen tokens/s | s / opt step | peak RSS MB | pass rate 1st half -> 2nd half |",
             "|---|---|---|---|---|---|---|---|"]
    for side, d in s["sides"].items():
        q1, med, q3 = d["batch_s"]
        lines.append(f"| {side} | {med:.3f} [{q1:.3f}, {q3:.3f}] | {d['gen_s']:.3f} | {d['tokens_per_batch']:.0f} | "
                     f"{d['gen_tokens_per_s']:.0f} | {d['opt_step_s']:.3f} | {d['peak_rss_mb']:.0f} | "
                     f"{d['pass_rate_first_half']:.3f} -> {d['pass_rate_second_half']:.3f} |")
    if "ratio_trl_over_ours" in s:
        q1, med, q3 = s["ratio_trl_over_ours"]
        lines += ["", f"speed ratio ours/TRL (TRL s per batch / ours, per alternating pair): median "
                      f"{med:.2f}x, IQR [{q1:.2f}, {q3:.2f}]; ratio of medians {s['ratio_of_medians']:.2f}x"]
    return "\n".join(lines)


SPEC: dict = {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=24, help="measured rollout batches per side")
    ap.add_argument("--warmup", type=int, default=3, help="unmeasured rollout batches first")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per side")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trl-python", default=str(REPO / "bench" / ".venv-trl" / "bin" / "python"))
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="ours only: profile N batches with pyinstrument, print the profile")
    ap.add_argument("--ours-override", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra config override for ours (e.g. to time an older setting)")
    ap.add_argument("--trl-gradient-checkpointing", action="store_true",
                    help="TRL with its default gradient_checkpointing=True (slower); default: off")
    ap.add_argument("--worker", choices=["ours", "trl"], help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        spec = json.loads(Path(a.spec).read_text())
        (worker_ours if a.worker == "ours" else worker_trl)(spec)
        return

    global SPEC
    WORK.mkdir(parents=True, exist_ok=True)
    if a.profile:
        a.batches = a.profile
    SPEC = prepare(a)
    if a.profile:
        SPEC["profile_out"] = str(WORK / "profile_ours.txt")
    spec_path = WORK / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    sides = {"ours": sys.executable} if a.profile else {"ours": sys.executable, "trl": a.trl_python}
    if "trl" in sides and not Path(a.trl_python).exists():
        sys.exit(f"no TRL venv at {a.trl_python}: run `make bench` (it creates bench/.venv-trl)")
    workers = {n: Worker(n, py, spec_path) for n, py in sides.items()}
    versions = {}
    try:
        for n, w in workers.items():
            hello = w.read()
            versions[n] = hello.get("versions")
            print(f"{n}: ready ({hello['threads']} threads, RSS {hello['rss_mb'][0]:.0f} MB)", flush=True)
        load0 = os.getloadavg()
        rows: dict = {n: [] for n in workers}
        for i in range(SPEC["n_total"]):
            order = list(workers) if i % 4 in (0, 3) else list(workers)[::-1]  # ABBA
            for n in order:
                rows[n].append(workers[n].go())
            print(f"batch {i + 1}/{SPEC['n_total']}: " + ", ".join(
                f"{n} {rows[n][-1]['batch_s']:.2f} s ({rows[n][-1]['tokens']} tok, pass "
                f"{rows[n][-1]['pass_rate']:.2f})" for n in workers), flush=True)
        load1 = os.getloadavg()
    finally:
        for w in workers.values():
            w.close()
    s = summarise(rows, a, [load0, load1], versions)
    out = WORK / f"vs_trl-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(s, indent=1))
    print()
    print(report(s))
    print(f"\n(written {out.relative_to(REPO)}; worker logs in bench/.work/)")
    if a.profile:
        print("\n" + Path(SPEC["profile_out"]).read_text())


if __name__ == "__main__":
    main()
