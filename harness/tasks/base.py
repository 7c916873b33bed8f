"""What every task is: `Item`s drawn from seeded splits, a verifier, and a corpus for a tiny
model's tokenizer.

A task (one file per task in this package, registered in `harness.tasks.TASKS`) provides:

    take(split, cursor, n) -> (items, new cursor)   item i of a split is a pure function of
                                                      (config, split, i): resuming is exact
    eval_set(split, n) -> items                       the first n items of in_dist / held_out
    score(response, item) -> float                    the verifier (1.0 correct, else 0.0)
    corpus(n) -> texts                                what a tiny model's tokenizer is trained on
    use_chat_template(tok)                            optional: render prompts through a template
    interrupt_phrase                                  the end-of-thinking phrase a forced length
                                                      interruption appends (rollout.think_budget)

Splits: train, warmup, warmup_check (the warm start's validation), in_dist, held_out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..scales import from_path

SPLIT_SEED = {"train": 0, "warmup": 1_000_000, "warmup_check": 4_000_000, "in_dist": 2_000_000,
              # the extra named held-out sets (eval.held_out_sets), one stream each
              "first_two_ge_50": 5_000_000, "first_ends_in_7": 6_000_000, "more_terms": 7_000_000,
              "countdown": 8_000_000,
              "held_out": 3_000_000}


@dataclass(frozen=True)
class Item:
    prompt: str      # what the model sees
    reference: str   # the reference response (supervised warm-up target)
    answer: str      # the ground-truth answer
    entry: dict      # the source's raw item (for the task's own scorer)


# ScaleRL's forced-interruption phrase (Khatri et al. 2025, arXiv 2510.13786), as we read it; the
# paper's exact wording (and its closing </think> tag, which a non-thinking model does not use)
# could not be re-checked here
SCALERL_INTERRUPT = "\nOkay, time is up. Let me stop thinking and formulate a final answer now.\n"


class Task(Protocol):
    interrupt_phrase: str

    def take(self, split: str, cursor: int, n: int) -> tuple[list[Item], int]: ...
    def eval_set(self, split: str, n: int) -> list[Item]: ...
    def score(self, response: str, item: Item) -> float: ...
    def corpus(self, n: int = 2000) -> list[str]: ...


def compact_prompts(cfg) -> bool:
    """Compact prompts ('12+7+35=') for tiny models, the task's full question text for pretrained
    ones, unless task.prompt_style names one."""
    style = cfg.task.prompt_style
    return style == "compact" or (style == "auto" and not from_path(cfg.model.scale))


def split_corpus(task, alphabet: str, per_split: int) -> list[str]:
    """A tiny model's tokenizer corpus: the task's whole alphabet, then prompt + reference of the
    first ``per_split`` items of the train and held-out splits."""
    texts = [alphabet]
    for split in ("train", "held_out"):
        for it in task.take(split, 0, per_split)[0]:
            texts.append(it.prompt + it.reference)
    return texts


def context_check(cfg, prompt_chars: int) -> str | None:
    """Tiny models read one token per character: the longest prompt plus the generation limit
    must fit model.max_positions (a one-line message, or None)."""
    if from_path(cfg.model.scale):
        return None
    need = prompt_chars + cfg.rollout.max_new_tokens + 2
    if need > cfg.model.max_positions:
        return (f"model.max_positions = {cfg.model.max_positions}: prompt + "
                f"rollout.max_new_tokens needs {need}")
    return None
