"""GSM8K- and MATH-style tasks from local files, answers checked by math-verify.

`task.name = math` reads three files (`task.train_path`, `task.in_dist_path`,
`task.held_out_path`), each .jsonl (one JSON object per line) or .parquet (one row per item; needs
pandas with pyarrow), with this schema (docs/tasks.md):

    problem | question   the problem text (GSM8K calls it `question`)
    answer              the final answer; GSM8K's "worked solution #### 42" is accepted: the text
                        after the last '####' is the answer, the text before it the solution
    solution            optional worked solution (MATH); without `answer`, its last \\boxed{...}
                        is the answer
    id                  optional

Scoring: math-verify parses the response (a \\boxed{} answer first, else the last expression) and
checks it against the gold answer symbolically (1/2 = 0.5 = \\frac{1}{2}; intervals, radicals).
A small hand-written sample ships in `harness/data/` (24 train + 12 test GSM8K-style items, 12
MATH-style items with LaTeX answers), used by the tests; no download.

Splits: `train` / `warmup` / `warmup_check` are seeded permutations of the training file, epoch
after epoch (item i of a split is a pure function of (file, split, i), so resuming is exact);
`in_dist` and `held_out` are the first n items of their files, in file order. More held-out sets
(OXRL, Li 2026, arXiv 2603.19335, reports each held-out benchmark on its own): `task.held_out_paths`
maps a set name to a file of the same schema, each set listed in `eval.held_out_sets` and read
like `held_out` (its first n items in file order, reported as eval/<name>/...).
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from ..scales import SCALES, from_path
from .base import SCALERL_INTERRUPT, SPLIT_SEED, Item

DATA_DIR = Path(__file__).parent.parent / "data"
# the task.* keys this task reads (any other task key must keep its default: config rules)
KEYS = ("train_path", "in_dist_path", "held_out_path", "held_out_paths", "prompt_template",
        "chat_template")
# the task's own split names: a named held-out set (task.held_out_paths) may not take one
RESERVED = ("train", "warmup", "warmup_check", "in_dist", "held_out")
SET_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")  # it names metrics: eval/<name>/pass@1


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} in `text` (nested braces matched), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def parse_record(rec: dict, where: str) -> dict:
    """One file row -> {id, problem, answer, solution}; a bad row fails with its location."""
    problem = rec.get("problem", rec.get("question"))
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError(f"{where}: no 'problem' (or 'question') text")
    solution = rec.get("solution")
    answer = rec.get("answer")
    if isinstance(answer, str) and "####" in answer:  # GSM8K: "reasoning #### 42"
        solution, answer = answer.rsplit("####", 1)
        solution = solution.strip()
    if answer is None and isinstance(solution, str):
        answer = last_boxed(solution)
    if answer is None or (isinstance(answer, float) and answer != answer):
        raise ValueError(f"{where}: no 'answer' (and no \\boxed{{}} in 'solution')")
    answer = str(answer).strip()
    if answer.replace(",", "").lstrip("-").replace(".", "", 1).isdigit():
        answer = answer.replace(",", "")  # 1,020 -> 1020
    return {"id": str(rec.get("id", where)), "problem": problem.strip(), "answer": answer,
            "solution": solution.strip() if isinstance(solution, str) else None}


def read_items(path: str | Path) -> list[dict]:
    """Rows of a .jsonl or .parquet file, validated against the schema above."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task file {path} does not exist")
    if path.suffix == ".parquet":
        try:
            import pandas as pd
            rows = pd.read_parquet(path).to_dict("records")
        except ImportError as e:
            raise ImportError(f"reading {path} needs pandas with pyarrow: pip install pyarrow "
                              f"({e})") from None
    elif path.suffix in (".jsonl", ".json"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        raise ValueError(f"task file {path}: expected .jsonl or .parquet")
    if not rows:
        raise ValueError(f"task file {path} is empty")
    return [parse_record(r, f"{path}:{i + 1}") for i, r in enumerate(rows)]


def math_verify_score(response: str, answer: str) -> float:
    """1.0 if math-verify finds the response's answer equal to `answer`, else 0.0."""
    from math_verify import parse, verify  # extra [math]
    timeout = 5 if threading.current_thread() is threading.main_thread() else None  # SIGALRM
    gold = parse(f"${answer}$", parsing_timeout=timeout)
    pred = parse(response, parsing_timeout=timeout)
    if not gold or not pred:
        return 0.0
    return float(verify(gold, pred, timeout_seconds=timeout))


@dataclass(frozen=True)
class _Files:
    train: str
    in_dist: str
    held_out: str


class MathTask:
    """Train / in-dist / held-out streams of file-backed math problems (the `tasks.base.Task`
    interface: take, eval_set, score, corpus, use_chat_template)."""

    interrupt_phrase = SCALERL_INTERRUPT  # a forced length interruption's phrase

    def __init__(self, cfg):
        self.cfg = cfg
        files = _Files(cfg.train_path, cfg.in_dist_path, cfg.held_out_path)
        self.paths = {"train": files.train, "in_dist": files.in_dist, "held_out": files.held_out,
                      **cfg.held_out_paths}  # the named held-out sets, in their config order
        self.rows = {split: read_items(path) for split, path in self.paths.items()}
        self.eval_splits = tuple(s for s in self.paths if s != "train")
        self._tok = None
        self._perm: dict = {}

    def use_chat_template(self, tok) -> None:
        """Render prompts through `tok`'s chat template (task.chat_template)."""
        if not getattr(tok, "chat_template", None):
            raise ValueError("task.chat_template = true: the model's tokenizer has no chat template")
        self._tok = tok

    def render(self, problem: str) -> str:
        text = self.cfg.prompt_template.replace("{problem}", problem)
        if self._tok is None:
            return text
        return self._tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)

    def item(self, row: dict) -> Item:
        """The reference (warm-up target) is the worked solution ending in \\boxed{answer}."""
        sol, ans = row["solution"], row["answer"]
        ref = sol if sol and "\\boxed" in sol else \
            f"{sol + ' ' if sol else ''}The answer is \\boxed{{{ans}}}."
        return Item(prompt=self.render(row["problem"]), reference=ref, answer=ans, entry=row)

    def _order(self, split: str, epoch: int) -> list[int]:
        key = (split, epoch)
        if key not in self._perm:
            idx = list(range(len(self.rows["train"])))
            random.Random(SPLIT_SEED[split] + epoch).shuffle(idx)
            self._perm = {key: idx}  # one epoch cached at a time
        return self._perm[key]

    def take(self, split: str, cursor: int, n: int) -> tuple[list[Item], int]:
        """n items of `split` from position `cursor`; returns (items, new cursor)."""
        if split in self.eval_splits:
            rows = self.rows[split]
            return [self.item(rows[(cursor + k) % len(rows)]) for k in range(n)], cursor + n
        rows, out = self.rows["train"], []
        for c in range(cursor, cursor + n):
            out.append(self.item(rows[self._order(split, c // len(rows))[c % len(rows)]]))
        return out, cursor + n

    def eval_set(self, split: str, n: int) -> list[Item]:
        rows = self.rows.get(split, self.rows["train"])
        if split in self.eval_splits and n > len(rows):
            key = split if split in ("in_dist", "held_out") else "held_out"  # a named set's n_items
            raise ValueError(f"eval.{key}.n_items = {n}: {self.paths[split]} has only {len(rows)} "
                             f"items" + ("" if key == split else f" (held-out set {split})"))
        return self.take(split, 0, n)[0]

    def score(self, response: str, item: Item) -> float:
        return math_verify_score(response, item.answer)

    def corpus(self, n: int = 2000) -> list[str]:
        """Text for a tiny model's character tokenizer: every prompt and reference of every file."""
        return ["0123456789+-*/=.,()[]{}\\$ "] + [self.item(r).prompt + self.item(r).reference
                                                  for split in self.paths
                                                  for r in self.rows[split]]


def from_config(cfg) -> MathTask:
    return MathTask(cfg.task)


def check(cfg) -> str | None:
    """math's own combination rules: the one-line message of the first broken one, or None."""
    t = cfg.task
    for key in ("train_path", "in_dist_path", "held_out_path"):
        if not getattr(t, key):
            return (f"task.{key} = None: required when task.name = math (a .jsonl or .parquet file; "
                    "schema in docs/tasks.md)")
    listed = tuple(cfg.eval.held_out_sets)
    for name in t.held_out_paths:
        if not SET_NAME.fullmatch(name):
            return (f"task.held_out_paths = {t.held_out_paths!r}: {name!r} is not a valid set name "
                    "(a letter, then letters, digits or _; at most 40 characters: it names the "
                    "metrics eval/<name>/...)")
        if name in RESERVED:
            return (f"task.held_out_paths = {t.held_out_paths!r}: {name!r} clashes with the task's "
                    f"own split {name} (reserved: {', '.join(RESERVED)})")
        if name not in listed:
            return (f"task.held_out_paths = {t.held_out_paths!r}: {name!r} is not listed in "
                    f"eval.held_out_sets (= {list(listed)!r}), so it would never be evaluated; "
                    "list it there, or drop it")
    if "{problem}" not in t.prompt_template:
        return f"task.prompt_template = {t.prompt_template!r}: must contain {{problem}}"
    if t.chat_template and not from_path(cfg.model.scale):
        return ("task.chat_template = true: tiny models have no chat template; needs model.scale = "
                + " or ".join(SCALES.where(from_path=True)))
    return None


def held_out_sets(cfg) -> tuple:
    """The names eval.held_out_sets may list: the sets task.held_out_paths defines."""
    return tuple(cfg.task.held_out_paths)
