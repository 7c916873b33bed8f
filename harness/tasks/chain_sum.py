"""Procedural tasks from reasoning-gym, rendered for tiny or pretrained models, scored by
reasoning-gym's own answer scoring.

`chain_sum` (reasoning-gym): `12 + 7 - 35 + 88 =`. For tiny models the prompt is rendered compactly
(`12+7-35+88=`) and the reference answer shows the running sums, a short chain of thought:
`12+7=19,19-35=-16,-16+88=72.` For pretrained models the prompt is reasoning-gym's full question.
*A recheck share* (`task.recheck_share`): that share of the references works the chain twice
(`3+4=7,3+4=7.`), chosen per item by a hash of (split, index) and not by its operands, so the warm
start learns two lengths for the same prompt and RL can move the mix either way (the length Dr.
GRPO's claim is about).

*A hard share* (`task.hard_share`): that share of the training and in-dist items is drawn from a
harder chain (`task.hard_n_terms` operands of up to `task.hard_max_digits` digits; by default 8
operands of one or two digits, whose chain of thought mostly exceeds the default generation limit)
that the warm start never sees. A model that cannot solve them has its ceiling near 1 - hard_share
instead of at the bound 1 where a fully learnable task puts it (and where the ScaleRL fit cannot
bound A from above); real RL datasets mix in problems beyond a model's reach in the same way. Which raw
index is hard is fixed (a Weyl sequence: index j is hard iff frac(j / phi) < share, so every window
of the stream holds the share), so the streams stay pure functions of (config, split, index).

Splits are fixed and seeded. The *held-out* split is a shifted distribution declared in config:
`first_two_ge_50` keeps exactly the items whose first two operands are both >= 50 and
`first_ends_in_7` those whose first operand ends in 7 (7, 17, ..., 97); either way those items are excluded from training
and the in-distribution eval. `more_terms` adds one operand. The shifts differ in how far they are:
the tiny default model scores ~0.02 on `first_two_ge_50` (two two-digit operands, much harder
than the training mix) whatever RL does (LOG.md); `first_ends_in_7` keeps the training mix of
one- and two-digit operands. With
`task.held_out_in_warmup` the supervised warm start (standing in for pre-training) sees every item,
shifted ones included, and only RL is restricted to the in-distribution items (OXRL's setting).

*Another task*: the extra held-out set `countdown` (eval.held_out_sets) is Countdown's items
(`tasks/countdown.py`, its default numbers and targets, a split stream of its own) scored by
Countdown's verifier. Only when it is requested, the tokenizer's corpus adds Countdown's alphabet
and items (a tiny tokenizer trained on chain_sum alone has no `> : * /`), and under
`task.held_out_in_warmup` the warm-up streams alternate chain_sum and Countdown items, as OXRL's
base models know their held-out tasks.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

from . import countdown
from .base import SCALERL_INTERRUPT, SPLIT_SEED, Item, compact_prompts, context_check, split_corpus

# the task.* keys this task reads (any other task key must keep its default: config rules)
KEYS = ("n_terms", "min_digits", "max_digits", "cot", "prompt_style", "held_out", "held_out_in_warmup",
        "hard_share", "hard_n_terms", "hard_max_digits", "recheck_share")
# read by the RL streams only (train, in_dist): the warm start never sees the hard share
HARD_KEYS = ("hard_share", "hard_n_terms", "hard_max_digits")
# the splits a hard share enters, and the offset of its item streams' seeds from their split's
HARD_SPLITS = ("train", "in_dist")
HARD_SEED_OFFSET = 500_000
_WEYL = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: raw index j is hard iff frac(j / phi) < share
_M64 = 0xFFFFFFFFFFFFFFFF


# held-out shifts that select items by their operands (excluded from every other split)
SHIFTS = {"first_two_ge_50": lambda nums: nums[0] >= 50 and nums[1] >= 50,
          "first_ends_in_7": lambda nums: nums[0] % 10 == 7}


def _operands(expression: str) -> tuple[list[int], list[str]]:
    toks = expression.split()
    return [int(t) for t in toks[0::2]], toks[1::2]


def render_reference(expression: str, cot: bool, recheck: bool = False) -> str:
    """'12 + 7 - 35' -> '12+7=19,19-35=-16.' (cot), '-16.', or with ``recheck`` (cot only) the
    chain worked twice: '12+7=19,19-35=-16,12+7=19,19-35=-16.' (the answer is the last '=')."""
    nums, ops = _operands(expression)
    acc, steps = nums[0], []
    for op, n in zip(ops, nums[1:]):
        new = acc + n if op == "+" else acc - n
        steps.append(f"{acc}{op}{n}={new}")
        acc = new
    if not cot:
        return f"{acc}."
    return ",".join(steps * (2 if recheck else 1)) + "."


def rechecks(share: float, split: str, j: int) -> bool:
    """Whether raw index j of `split` gets the twice-worked reference (task.recheck_share): a
    splitmix64 hash of (split, j) below ``share``, so the style is fixed per item, independent
    of its operands and of the hard share's Weyl sequence, and holds the share in every window."""
    if share <= 0:
        return False
    z = (SPLIT_SEED[split] * _WEYL + j + 1) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return (z ^ (z >> 31)) < int(share * 2 ** 64)


def extract_answer(response: str) -> str | None:
    """The final answer of a response: text before the first '.', after the last '='.
    A response with no '.' was cut off before it finished: no answer."""
    if "." not in response:
        return None
    body = response.split(".", 1)[0]
    ans = body.rsplit("=", 1)[-1].strip()
    return ans if re.fullmatch(r"-?\d+", ans) else None


class ChainSumTask:
    """Train / in-dist / held-out streams of chain_sum items. Item i of a split is a pure function
    of (config, split, i), so a data cursor is a single integer and resuming is exact."""

    def __init__(self, cfg, compact: bool, extra_held_out: tuple = ()):
        self.cfg = cfg
        self.compact = compact
        self.extra = tuple(extra_held_out)  # eval.held_out_sets: more named held-out splits
        # another task's held-out set: its items, scored by its own verifier (OTHER_TASKS)
        self.other = {name: o.make(cfg, compact) for name, o in OTHER_TASKS.items()
                      if name in self.extra}
        self._ds: dict = {}
        # a forced interruption: '=' asks a tiny model for the result of the chain so far (the
        # answer is read after the last '='); full prompts get ScaleRL's sentence
        self.interrupt_phrase = "=" if compact else SCALERL_INTERRUPT

    def _dataset(self, split: str, hard: bool = False):
        key = (split, hard)
        if key not in self._ds:
            shift = self.cfg.held_out if split == "held_out" else split
            terms = self.cfg.n_terms + (1 if shift == "more_terms" else 0)
            digits, seed = self.cfg.max_digits, SPLIT_SEED[split]
            if hard:
                terms, digits = self.cfg.hard_n_terms, self.cfg.hard_max_digits
                seed += HARD_SEED_OFFSET
            import reasoning_gym  # on first use: listing the tasks (config rules) stays light
            self._ds[key] = reasoning_gym.create_dataset(
                "chain_sum", min_terms=terms, max_terms=terms, min_digits=self.cfg.min_digits,
                max_digits=digits, allow_negation=False, seed=seed, size=10**9)
        return self._ds[key]

    def is_hard(self, split: str, j: int) -> bool:
        """Raw index j of `split` is an item of the hard share (task.hard_share)."""
        share = self.cfg.hard_share
        return (share > 0 and split in HARD_SPLITS
                and ((j * _WEYL) & _M64) < int(share * 2 ** 64))

    def _entry(self, split: str, j: int) -> dict:
        return self._dataset(split, self.is_hard(split, j))[j]

    def _accept(self, split: str, entry: dict) -> bool:
        """held_out (task.held_out) and each extra held-out set take the items of their shift
        (more_terms: every item of its longer chains); train, in_dist and the warm-up take none
        of any held-out set's shifted items (the warm-up all of them under held_out_in_warmup)."""
        nums = _operands(entry["metadata"]["expression"])[0]
        if split == "held_out" or split in self.extra:
            shift = SHIFTS.get(self.cfg.held_out if split == "held_out" else split)
            return shift is None or shift(nums)
        if split in ("warmup", "warmup_check") and self.cfg.held_out_in_warmup:
            return True
        return not any(SHIFTS[s](nums) for s in (self.cfg.held_out, *self.extra) if s in SHIFTS)

    def item(self, entry: dict, split: str, j: int) -> Item:
        """The item of `entry`, raw index j of `split` (which picks its reference's style)."""
        expr = entry["metadata"]["expression"]
        prompt = expr.replace(" ", "") + "=" if self.compact else entry["question"]
        recheck = rechecks(self.cfg.recheck_share, split, j)
        return Item(prompt=prompt, reference=render_reference(expr, self.cfg.cot, recheck),
                    answer=entry["answer"], entry=entry)

    def _mixed(self, split: str) -> bool:
        """The warm-up streams alternate chain_sum and another task's items (held_out_in_warmup)."""
        return bool(self.other) and split in ("warmup", "warmup_check") and self.cfg.held_out_in_warmup

    def take(self, split: str, cursor: int, n: int) -> tuple[list[Item], int]:
        """n accepted items of `split` starting at raw index `cursor`; returns (items, new cursor).
        Another task's set is its task's own stream; a mixed warm-up stream's position j is
        chain_sum's item j // 2 (even j; every item is accepted there) or the other task's (odd j)."""
        if split in self.other:
            return self.other[split].take(split, cursor, n)
        if self._mixed(split):
            other = next(iter(self.other.values()))
            out = [other.take(split, j // 2, 1)[0][0] if j % 2 else
                   self.item(self._dataset(split)[j // 2], split, j // 2)
                   for j in range(cursor, cursor + n)]
            return out, cursor + n
        out = []
        while len(out) < n:
            entry = self._entry(split, cursor)
            cursor += 1
            if self._accept(split, entry):
                out.append(self.item(entry, split, cursor - 1))
        return out, cursor

    def eval_set(self, split: str, n: int) -> list[Item]:
        return self.take(split, 0, n)[0]

    def score(self, response: str, item: Item) -> float:
        """reasoning-gym's own scorer on the extracted final answer (1.0 correct, else 0.0); an
        item of another task is scored by that task's verifier."""
        other = self.other.get(item.entry["metadata"]["source_dataset"])
        if other is not None:
            return other.score(response, item)
        ans = extract_answer(response)
        if ans is None:
            return 0.0
        return float(self._dataset("train").score_answer(ans, item.entry) >= 1.0)

    def corpus(self, n: int = 2000) -> list[str]:
        """Text the local tokenizer is trained on: prompts and references of every split, plus the
        task's whole alphabet (a 2-operand chain never shows the ',' that longer chains use); with
        another task's set, that task's alphabet and the prompts and references of its first items."""
        # without the hard share: it has the same alphabet, and the warm start (whose key holds the
        # tokenizer) stays the one the same task without it uses
        plain = self if not self.cfg.hard_share else ChainSumTask(
            dataclasses.replace(self.cfg, hard_share=0.0), self.compact, self.extra)
        texts = split_corpus(plain, "0123456789+-=,.", n // 2)
        for name, other in self.other.items():
            texts += [other.alphabet] + [it.prompt + it.reference
                                         for it in other.take(name, 0, n // 8)[0]]
        return texts


def from_config(cfg) -> ChainSumTask:
    """The task of a run: compact prompts for tiny models unless task.prompt_style says otherwise."""
    return ChainSumTask(cfg.task, compact=compact_prompts(cfg), extra_held_out=cfg.eval.held_out_sets)


@dataclass(frozen=True)
class OtherTask:
    """A held-out set of another task: `make(task config, compact)` builds that task (its own
    items, verifier and `alphabet`), `prompt_chars(task config)` is its longest compact prompt."""
    make: Callable
    prompt_chars: Callable


# Countdown at its default numbers and targets (chain_sum's config keeps countdown's keys there)
OTHER_TASKS = {"countdown": OtherTask(countdown.CountdownTask,
                                      lambda t: countdown.prompt_chars(t, t.n_numbers))}
# the names eval.held_out_sets may take (shifts of the training distribution, another task)
HELD_OUT_SETS = (*SHIFTS, "more_terms", *OTHER_TASKS)


def max_prompt_chars(task_cfg, extra: tuple = ()) -> int:
    """The longest compact prompt ('12+7+35=', or another task's set's '14,9,2>63:') of any split,
    in characters (= tiny-model tokens)."""
    terms = task_cfg.n_terms + (1 if "more_terms" in (task_cfg.held_out, *extra) else 0)
    other = [OTHER_TASKS[name].prompt_chars(task_cfg) for name in extra if name in OTHER_TASKS]
    hard = ([task_cfg.hard_n_terms * (task_cfg.hard_max_digits + 1) + 1]
            if task_cfg.hard_share > 0 else [])
    return max([terms * (task_cfg.max_digits + 1) + 1, *other, *hard])


def check(cfg) -> str | None:
    """chain_sum's own combination rules: the one-line message of the first broken one, or None.
    (Pure: reads the config duck-typed; the config rules raise the message.)"""
    t = cfg.task
    if t.min_digits > t.max_digits:
        return f"task.min_digits = {t.min_digits}: must be <= task.max_digits ({t.max_digits})"
    if t.hard_share == 0:
        defaults = type(t)()  # the task section's own defaults (no import of the config package)
        for key in ("hard_n_terms", "hard_max_digits"):
            if getattr(t, key) != getattr(defaults, key):
                return (f"task.{key} = {getattr(t, key)}: no effect with task.hard_share = 0 (it "
                        "shapes the hard share's items)")
    elif t.min_digits > t.hard_max_digits:
        return (f"task.hard_max_digits = {t.hard_max_digits}: must be >= task.min_digits "
                f"({t.min_digits})")
    if t.recheck_share > 0 and not t.cot:
        return (f"task.recheck_share = {t.recheck_share}: needs task.cot = true (the recheck "
                "works the running sums twice)")
    if t.held_out in SHIFTS and t.max_digits < 2:
        return (f"task.held_out = {t.held_out!r}: needs task.max_digits >= 2 (two-digit operands "
                "must exist)")
    return context_check(cfg, max_prompt_chars(t, tuple(cfg.eval.held_out_sets)))
