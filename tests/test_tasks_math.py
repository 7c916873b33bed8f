"""GSM8K/MATH-style tasks from local files (JSONL, Parquet), scored by math-verify, on the shipped
hand-written sample (harness/data)."""

from __future__ import annotations

import json

import pytest
import yaml

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


HARD = DATA_DIR / "gsm_hard_sample_test.jsonl"  # 8 GSM-Hard-style items (harness/data)


def test_named_held_out_files_are_their_own_sets_in_file_order():
    task = _task([f"task.held_out_paths={{hard: {HARD}, math2: {DATA_DIR / 'math_sample_test.jsonl'}}}",
                  "eval.held_out_sets=[hard, math2]", "eval.held_out.n_items=8"])
    hard = task.eval_set("hard", 8)
    assert [it.entry["id"] for it in hard] == [f"gsmhard-test-{i}" for i in range(8)]
    assert hard[0].answer == "82116" and all(task.score(it.reference, it) == 1.0 for it in hard)
    assert [it.entry["id"] for it in task.eval_set("math2", 3)] == ["math-test-0", "math-test-1",
                                                                    "math-test-2"]
    with pytest.raises(ValueError, match=r"eval.held_out.n_items = 9: .*gsm_hard_sample_test.jsonl "
                                         r"has only 8 items \(held-out set hard\)"):
        task.eval_set("hard", 9)
    # the tokenizer's corpus covers the new files; without them it is what it was
    plain = _task()
    assert len(task.corpus()) == len(plain.corpus()) + 8 + 12
    assert task.corpus()[:len(plain.corpus())] == plain.corpus()


def test_a_tiny_model_evaluates_two_named_held_out_files_each_on_its_own(tiny_overrides, tmp_path,
                                                                        monkeypatch):
    """Two named sets, `hard` (its own file) and `same` (held_out's file): each is evaluated on
    its own items (the real evaluate, watched: which item ids it was given) under the same eval
    seed, so `same` reproduces held_out's numbers to the last digit; the resolved config records
    the files; a paused run resumes exactly."""
    import importlib
    loop_train = importlib.import_module("harness.loop.train")  # the module (not its train())
    seen, real = [], loop_train.evaluate

    def watched(engine, task, items, **kw):
        seen.append([it.entry["id"] for it in items])
        return real(engine, task, items, **kw)
    monkeypatch.setattr(loop_train, "evaluate", watched)
    over = tiny_overrides + MATH + [
        f"task.held_out_paths={{hard: {HARD}, same: {DATA_DIR / 'math_sample_test.jsonl'}}}",
        "eval.held_out_sets=[hard, same]", "eval.held_out.n_items=8", "model.max_positions=256",
        "rollout.max_new_tokens=16", "train.steps=2", "train.checkpoint_every=1", "eval.every=1",
        "eval.in_dist.k=1", "eval.held_out.k=1"]
    cfg = load_config(None, over)
    assert train(cfg, progress=False)["status"] == "finished"
    rows = [json.loads(x) for x in open(cfg.run_dir() / "metrics.jsonl")]
    ev = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in ev] == [0, 1, 2]
    for r in ev:
        assert r["eval/in_dist/n_items"] == 12
        assert r["eval/held_out/n_items"] == r["eval/hard/n_items"] == r["eval/same/n_items"] == 8
        for key in ("pass@1", "response_len", "stderr"):
            a, b = r[f"eval/same/{key}"], r["eval/held_out/" + key]
            assert a == b or (a != a and b != b), key          # the same items: the same numbers
    math8, hard8 = [f"math-test-{i}" for i in range(8)], [f"gsmhard-test-{i}" for i in range(8)]
    assert seen[:4] == [[f"gsm-test-{i}" for i in range(12)], math8, hard8, math8]  # step 0
    assert len(seen) == 3 * 4
    items = [json.loads(x) for x in open(cfg.run_dir() / "eval_items.jsonl")]
    assert [(x["step"], x["set"], len(x["correct"])) for x in items[:4]] == \
        [(0, "in_dist", 12), (0, "held_out", 8), (0, "hard", 8), (0, "same", 8)]
    saved = yaml.safe_load((cfg.run_dir() / "config.yaml").read_text())
    assert saved["task"]["held_out_paths"] == {"hard": str(HARD),
                                               "same": str(DATA_DIR / "math_sample_test.jsonl")}
    assert saved["eval"]["held_out_sets"] == ["hard", "same"]
    cut = load_config(None, over + [f"run.results_dir={tmp_path / 'cut'}"])
    assert train(cut, progress=False, pause_at=1)["status"] == "interrupted"
    assert train(cut, progress=False)["status"] == "finished"
    strip = lambda rs: [{k: v for k, v in r.items() if not k.startswith(("perf/", "compute/wall"))}
                        for r in rs]
    again = [json.loads(x) for x in open(cut.run_dir() / "metrics.jsonl")]
    assert json.dumps(strip(again)) == json.dumps(strip(rows))
