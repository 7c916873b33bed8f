"""GSM8K/MATH-style tasks from local files (JSONL, Parquet), scored by math-verify, on the shipped
hand-written sample (harness/data)."""

from __future__ import annotations

import json

import pytest

from harness.config import load_config
from harness.tasks.math_problems import DATA_DIR, last_boxed, math_verify_score, parse_record, read_items
from harness.tasks import make_task
from harness.loop import train

SAMPLE = [f"task.train_path={DATA_DIR / 'gsm8k_sample_train.jsonl'}",
          f"task.in_dist_path={DATA_DIR / 'gsm8k_sample_test.jsonl'}",
          f"task.held_out_path={DATA_DIR / 'math_sample_test.jsonl'}"]
MATH = ["task.name=math", *SAMPLE, "eval.in_dist.n_items=12", "eval.held_out.n_items=12"]


def _task(extra=()):
    return make_task(load_config(None, MATH + list(extra)))


def test_every_shipped_reference_scores_1_and_a_wrong_answer_0():
    task = _task()
    for split, n in (("train", 24), ("in_dist", 12), ("held_out", 12)):
        items = task.take(split, 0, n)[0]
        assert len({it.entry["id"] for it in items}) == n       # one epoch = every item once
        for it in items:
            assert task.score(it.reference, it) == 1.0, (split, it.reference)
            assert task.score(f"The answer is \\boxed{{{it.answer}+1}}.", it) == 0.0
    assert task.score("", items[0]) == 0.0


@pytest.mark.parametrize("gold,response,want", [
    ("42", "so she has \\boxed{42} apples", 1.0),
    ("42", "The answer is 42.", 1.0),          # no box: the last expression
    ("42", "\\boxed{41}", 0.0),
    ("\\frac{1}{2}", "\\boxed{0.5}", 1.0),      # symbolic equality
    ("\\frac{1}{2}", "\\boxed{1/2}", 1.0),
    ("5\\sqrt{2}", "\\boxed{\\sqrt{50}}", 1.0),
    ("(2, 4]", "\\boxed{(2,4]}", 1.0),
    ("(2, 4]", "\\boxed{[2,4]}", 0.0),          # open vs closed end
    ("1020", "\\boxed{1,020}", 1.0),
])
def test_math_verify_scoring(gold, response, want):
    assert math_verify_score(response, gold) == want


def test_record_schema_gsm8k_and_math_forms():
    r = parse_record({"question": "Q?", "answer": "6 * 7 = 42 #### 1,042"}, "f:1")
    assert r["problem"] == "Q?" and r["answer"] == "1042" and r["solution"] == "6 * 7 = 42"
    r = parse_record({"problem": "P", "solution": "x = \\boxed{\\frac{a}{b^{2}}} done"}, "f:2")
    assert r["answer"] == "\\frac{a}{b^{2}}"
    r = parse_record({"problem": "P", "answer": 7}, "f:3")
    assert r["answer"] == "7" and r["id"] == "f:3"
    with pytest.raises(ValueError, match="f:4: no 'answer'"):
        parse_record({"problem": "P", "solution": "no box"}, "f:4")
    with pytest.raises(ValueError, match="f:5: no 'problem'"):
        parse_record({"answer": "1"}, "f:5")
    assert last_boxed("a \\boxed{1} b \\boxed{x^{2}}") == "x^{2}" and last_boxed("none") is None


def test_parquet_reads_the_same_items(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow", reason="pyarrow (extra [math]) reads Parquet")
    rows = [json.loads(x) for x in (DATA_DIR / "math_sample_test.jsonl").read_text().splitlines()]
    pd.DataFrame(rows).to_parquet(tmp_path / "m.parquet")
    assert read_items(tmp_path / "m.parquet") == read_items(DATA_DIR / "math_sample_test.jsonl")


def test_splits_are_deterministic_resumable_permutations():
    task = _task()
    a, cur = task.take("train", 0, 30)
    b, _ = task.take("train", 10, 20)
    assert [i.entry["id"] for i in a[10:]] == [i.entry["id"] for i in b] and cur == 30
    # epoch 2 is a different order of the same 24 items; warm-up uses its own order
    assert [i.entry["id"] for i in a[:24]] != [i.entry["id"] for i in _task().take("train", 24, 24)[0]]
    assert sorted(i.entry["id"] for i in _task().take("train", 24, 24)[0]) == \
        sorted(i.entry["id"] for i in a[:24])
    assert [i.entry["id"] for i in task.take("warmup", 0, 5)[0]] != [i.entry["id"] for i in a[:5]]
    assert task.eval_set("in_dist", 3)[0].entry["id"] == "gsm-test-0"     # eval: file order
    assert task.take("train", 0, 1)[0][0].prompt.endswith("Put the final answer in \\boxed{}.\n")
    with pytest.raises(ValueError, match=r"eval.held_out.n_items = 13: .* has only 12 items"):
        task.eval_set("held_out", 13)


def test_a_tiny_model_trains_on_the_math_sample(tiny_overrides):
    """The whole loop on file-backed problems (a tiny model cannot solve them: this checks the
    plumbing - tokenizer from the files' text, math-verify rewards, both eval sets - not learning)."""
    over = tiny_overrides + MATH + ["model.max_positions=256", "rollout.max_new_tokens=16",
                                    "train.steps=2", "eval.in_dist.k=1", "eval.held_out.k=1"]
    cfg = load_config(None, over)
    s = train(cfg, progress=False)
    assert s["status"] == "finished"
    rows = [json.loads(x) for x in open(cfg.run_dir() / "metrics.jsonl")]
    ev = [r for r in rows if r["kind"] == "eval"]
    assert ev[-1]["eval/in_dist/n_items"] == 12 and ev[-1]["eval/held_out/n_items"] == 12
    assert all(r["rollout/pass_rate"] == 0.0 for r in rows if r["kind"] == "train")
