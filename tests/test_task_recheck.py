"""chain_sum's recheck share (task.recheck_share): the twice-worked reference, its share per split,
its independence of the operands, the warm start's identity, and the config rule."""

from __future__ import annotations

import collections

import pytest

from harness.config import ConfigError, load_config
from harness.loop.warm_start import warm_start_key
from harness.tasks import make_task
from harness.tasks.chain_sum import extract_answer, rechecks, render_reference


def test_recheck_reference_works_the_chain_twice_and_keeps_the_answer():
    ref = render_reference("12 + 7 - 35", cot=True, recheck=True)
    assert ref == "12+7=19,19-35=-16,12+7=19,19-35=-16."
    assert extract_answer(ref) == "-16"
    assert render_reference("3 + 4", cot=True, recheck=True) == "3+4=7,3+4=7."
    assert render_reference("3 + 4", cot=True) == "3+4=7."          # the default: unchanged
    assert render_reference("3 + 4", cot=False, recheck=False) == "7."


def test_recheck_share_holds_per_split_and_every_window():
    for split in ("warmup", "train", "in_dist"):
        marks = [rechecks(0.3, split, j) for j in range(20_000)]
        assert abs(sum(marks) / len(marks) - 0.3) < 0.01
        # every 2,000-item window holds the share within a binomial 4 sd (sd 0.010)
        for w in range(0, 20_000, 2_000):
            assert abs(sum(marks[w:w + 2000]) / 2000 - 0.3) < 0.041
    assert not any(rechecks(0.0, "warmup", j) for j in range(1000))
    assert all(rechecks(1.0, "warmup", j) for j in range(1000))
    # the splits draw different styles for the same index
    a = [rechecks(0.5, "warmup", j) for j in range(2000)]
    b = [rechecks(0.5, "train", j) for j in range(2000)]
    assert 0.4 < sum(x != y for x, y in zip(a, b)) / 2000 < 0.6


def test_recheck_style_is_independent_of_the_prompt():
    """The same prompt appears with both lengths in the warm-up stream: a length the policy
    chooses, not one its operands fix (1-digit sums: ~200 distinct prompts in 4,000 items)."""
    cfg = load_config(None, ["task.max_digits=1", "task.held_out=more_terms",
                             "task.recheck_share=0.5"])
    task = make_task(cfg)
    items, _ = task.take("warmup", 0, 4000)
    styles = collections.defaultdict(set)
    for it in items:
        styles[it.prompt].add(it.reference.count("=") // (it.prompt.count("+") + it.prompt.count("-")))
        assert task.score(it.reference, it) == 1.0
    both = sum(1 for s in styles.values() if s == {1, 2})
    assert both / len(styles) > 0.9
    share = sum(it.reference.count(",") > 0 for it in items) / len(items)
    assert abs(share - 0.5) < 0.03


def test_default_keeps_the_stream_and_the_warm_start_key():
    base = load_config(None, [])
    zero = load_config(None, ["task.recheck_share=0.0"])
    half = load_config(None, ["task.recheck_share=0.5"])
    assert warm_start_key(base, "tok") == warm_start_key(zero, "tok")
    assert warm_start_key(base, "tok") != warm_start_key(half, "tok")
    a, _ = make_task(base).take("warmup", 0, 200)
    b, _ = make_task(half).take("warmup", 0, 200)
    assert [i.prompt for i in a] == [i.prompt for i in b]       # the same items
    assert sum(x.reference != y.reference for x, y in zip(a, b)) > 50


@pytest.mark.parametrize("over, msg", [
    (["task.recheck_share=0.5", "task.cot=false"], "task.recheck_share = 0.5: needs task.cot = true"),
    (["task.recheck_share=1.5"], "task.recheck_share"),
    (["task.name=countdown", "task.recheck_share=0.5"], "task.recheck_share"),
])
def test_bad_recheck_share_is_one_line(over, msg):
    with pytest.raises(ConfigError) as e:
        load_config(None, over)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_response_styles_classifies_passes():
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "response_styles", Path(__file__).parents[1] / "scripts" / "response_styles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.passes("3+4=", "3+4=7.") == "once"
    assert mod.passes("3+4=", "3+4=7,3+4=7.") == "twice"
    assert mod.passes("3+4-2=", "3+4=7,7-2=5,3+4=7,7-2=5.") == "twice"
    assert mod.passes("3+4=", "7.") == "other"
    assert mod.passes("3+4=", "3+4=7,3+4=7,3+4") == "cut off"
