"""Countdown from reasoning-gym: reach a target from a few numbers with + - * / and parentheses,
each number used once, scored by reasoning-gym's own scorer (1.0 = the expression uses exactly the
given numbers and evaluates to the target). The task of Lian 2025 (arXiv 2512.07611), which
compares PPO, GRPO and DAPO on it and reports that larger groups help the group methods.

For tiny models the prompt is compact, the numbers then the target (`14,9,2>63:`), and the
reference is reasoning-gym's expression without spaces and closed by a period (`14*9/2.`); the
answer is the text before the first '.'. For pretrained models the prompt is reasoning-gym's full
question and the answer is the response's last line. Splits are fixed and seeded; the held-out
split is a shifted distribution, one more number than training (never trained on).
"""

from __future__ import annotations

from .base import SCALERL_INTERRUPT, SPLIT_SEED, Item, compact_prompts, context_check, split_corpus

# the task.* keys this task reads (any other task key must keep its default: config rules)
KEYS = ("n_numbers", "max_value", "max_target", "prompt_style")
ALPHABET = "0123456789+-*/(),>:."


class CountdownTask:
    """Train / warm-up / in-dist / held-out streams; item i of a split is a pure function of
    (config, split, i), so the data cursor is one integer and resuming is exact. (Also chain_sum's
    held-out set `countdown`: that split's own stream, `n_numbers` numbers.)"""

    alphabet = ALPHABET

    def __init__(self, cfg, compact: bool):
        self.cfg = cfg
        self.compact = compact
        self._ds: dict = {}
        self._items: dict = {}
        # a forced interruption ends the expression: the answer is read before the first '.'
        self.interrupt_phrase = "." if compact else SCALERL_INTERRUPT

    def _dataset(self, split: str):
        if split not in self._ds:
            n = self.cfg.n_numbers + (1 if split == "held_out" else 0)
            import reasoning_gym  # on first use: listing the tasks (config rules) stays light
            self._ds[split] = reasoning_gym.create_dataset(
                "countdown", min_numbers=n, max_numbers=n, min_value=1, max_value=self.cfg.max_value,
                min_target=1, max_target=self.cfg.max_target, seed=SPLIT_SEED[split], size=10**9)
        return self._ds[split]

    def item(self, entry: dict) -> Item:
        m = entry["metadata"]
        prompt = (",".join(map(str, m["numbers"])) + f">{m['target']}:" if self.compact
                  else entry["question"])
        return Item(prompt=prompt, reference=m["expression"].replace(" ", "") + ".",
                    answer=entry["answer"], entry=entry)

    def take(self, split: str, cursor: int, n: int) -> tuple[list[Item], int]:
        """Items cursor .. cursor + n - 1 of `split` (reasoning-gym builds each from its index;
        built items are kept, as building one costs ~5-10 ms)."""
        ds, out = self._dataset(split), []
        for i in range(cursor, cursor + n):
            key = (split, i)
            if key not in self._items:
                self._items[key] = self.item(ds[i])
            out.append(self._items[key])
        return out, cursor + n

    def eval_set(self, split: str, n: int) -> list[Item]:
        return self.take(split, 0, n)[0]

    def extract(self, response: str) -> str | None:
        """The expression: before the first '.' (compact), else the last non-empty line."""
        if self.compact:
            return response.split(".", 1)[0] if "." in response else None
        lines = [x.strip() for x in response.strip().splitlines() if x.strip()]
        return lines[-1] if lines else None

    def score(self, response: str, item: Item) -> float:
        """reasoning-gym's scorer on the extracted expression (1.0 correct, else 0.0: its partial
        credits 0.01 / 0.05 for a malformed or wrong expression count as wrong)."""
        expr = self.extract(response)
        if expr is None or not expr.strip():
            return 0.0
        return float(self._dataset("train").score_answer(expr, item.entry) >= 1.0)

    def corpus(self, n: int = 2000) -> list[str]:
        """Text the local tokenizer is trained on: prompts and references, and the alphabet."""
        return split_corpus(self, ALPHABET, n // 4)


def from_config(cfg) -> CountdownTask:
    return CountdownTask(cfg.task, compact=compact_prompts(cfg))


def prompt_chars(t, n: int) -> int:
    """The longest compact prompt ('14,9,2>63:') with n numbers: n numbers and their separators,
    then the target between '>' and ':'."""
    return n * (len(str(t.max_value)) + 1) + len(str(t.max_target)) + 1


def max_prompt_chars(t) -> int:
    """The longest compact prompt of any split (held-out: one more number)."""
    return prompt_chars(t, t.n_numbers + 1)


def check(cfg) -> str | None:
    """countdown's own combination rules (pure; the config rules raise the message)."""
    return context_check(cfg, max_prompt_chars(cfg.task))
