"""Task rendering and scoring (reasoning-gym's own scorer), splits, the local tokenizer, tiny
models and the rollout engine's log-probs."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from harness.config import load_config
from harness.models import build_model, count_params, get_tokenizer
from harness.engines import HFEngine
from harness.models import sequence_logprobs
from harness.tasks import make_task
from harness.tasks.chain_sum import ChainSumTask, extract_answer, render_reference


def test_reference_shows_running_sums():
    assert render_reference("12 + 7 - 35 + 88", cot=True) == "12+7=19,19-35=-16,-16+88=72."
    assert render_reference("12 + 7 - 35 + 88", cot=False) == "72."


def test_extract_answer():
    assert extract_answer("12+7=19,19-35=-16.") == "-16"
    assert extract_answer("72.") == "72"
    assert extract_answer("12+7=19,19-3") is None         # cut off before the final '.'
    assert extract_answer("12+7=x.") is None


def test_scoring_uses_reasoning_gym_and_the_chain_answer():
    task = make_task(load_config(None, []))
    it = task.take("train", 0, 1)[0][0]
    assert task.score(it.reference, it) == 1.0
    wrong = it.reference.rsplit("=", 1)[0] + "=" + str(int(it.answer) + 1) + "."
    assert task.score(wrong, it) == 0.0
    assert task.score("", it) == 0.0
    # reasoning-gym's own scorer agrees on the raw answer
    assert task._dataset("train").score_answer(it.answer, it.entry) == 1.0


SHIFTED = {"first_two_ge_50": lambda a, b: a >= 50 and b >= 50,
           "first_ends_in_7": lambda a, b: a % 10 == 7}


def _first_two(it):
    return [int(x) for x in it.entry["metadata"]["expression"].split()[0:3:2]]


@pytest.mark.parametrize("shift", sorted(SHIFTED))
def test_held_out_split_is_disjoint_and_shifted(shift):
    task = make_task(load_config(None, [f"task.held_out={shift}"]))
    held = task.eval_set("held_out", 50)
    assert all(SHIFTED[shift](*_first_two(it)) for it in held)
    for split in ("train", "in_dist", "warmup", "warmup_check"):
        items, _ = task.take(split, 0, 500)
        assert not any(SHIFTED[shift](*_first_two(it)) for it in items), split
    # deterministic: the same items every time
    assert [i.prompt for i in task.eval_set("held_out", 50)] == [i.prompt for i in held]


def test_more_terms_and_held_out_in_warmup():
    cfg = load_config(None, ["task.held_out=more_terms"])
    prompt = make_task(cfg).eval_set("held_out", 1)[0].prompt
    assert prompt.count("+") + prompt.count("-") == cfg.task.n_terms  # one more operand
    # OXRL's setting: the warm start (pre-training) sees the shifted items, RL never does
    task = make_task(load_config(None, ["task.held_out_in_warmup=true"]))
    warm = [_first_two(it) for it in task.take("warmup", 0, 1000)[0]]
    share = sum(a % 10 == 7 for a, _ in warm) / len(warm)
    assert 0.05 < share < 0.15  # ~1 in 10 first operands ends in 7
    assert not any(a % 10 == 7 for a, _ in map(_first_two, task.take("train", 0, 500)[0]))


def test_hard_share_enters_the_rl_streams_only_and_keeps_the_warm_start():
    """task.hard_share: that share of train and in-dist items (Weyl-spread, so every window holds
    it) are chains of task.hard_n_terms operands; the warm-up streams, the tokenizer corpus and
    the warm start's key are those of the task without it; items are pure functions of the index."""
    from harness.loop.warm_start import warm_start_key
    base = ["task.max_digits=1", "task.held_out=more_terms"]
    cfg = load_config(None, base + ["task.hard_share=0.4"])
    plain_cfg = load_config(None, base)
    task, plain = make_task(cfg), make_task(plain_cfg)
    n_ops = lambda it: it.prompt.count("+") + it.prompt.count("-") + 1  # noqa: E731
    for split in ("train", "in_dist"):
        items = task.take(split, 0, 1000)[0]
        hard = [n_ops(it) == 8 for it in items]
        assert all(n_ops(it) in (2, 8) for it in items)
        assert abs(sum(hard) / 1000 - 0.4) <= 0.002  # the Weyl sequence holds the share exactly
        assert all(abs(sum(hard[i:i + 100]) / 100 - 0.4) <= 0.02  # ... in every window
                   for i in range(0, 901, 50))
        # the non-hard items are the plain stream's items at the same raw indices
        plain_items = plain.take(split, 0, 1000)[0]
        assert [a.prompt for a, h in zip(items, hard) if not h] == \
            [b.prompt for b, h in zip(plain_items, hard) if not h]
        assert [it.prompt for it in make_task(cfg).take(split, 500, 20)[0]] == \
            [it.prompt for it in items[500:520]]
    for split in ("warmup", "warmup_check", "held_out"):
        assert [it.prompt for it in task.take(split, 0, 200)[0]] == \
            [it.prompt for it in plain.take(split, 0, 200)[0]]
    assert task.corpus() == plain.corpus()
    assert warm_start_key(cfg, "t") == warm_start_key(plain_cfg, "t")
    # a late key: a config without it keeps its run id; with it, the run is another run
    assert plain_cfg.run_id() == load_config(None, base + ["task.hard_share=0"]).run_id()
    assert cfg.run_id() != plain_cfg.run_id()
    # the hard items are scored by the same verifier
    it = next(i for i in task.take("in_dist", 0, 10)[0] if n_ops(i) == 8)
    assert task.score(it.reference, it) == 1.0 and task.score("1+1=3.", it) == 0.0


def test_full_prompt_style_for_pretrained_models():
    task = ChainSumTask(load_config(None, []).task, compact=False)
    assert task.take("train", 0, 1)[0][0].prompt.startswith("State the final answer")


def test_local_tokenizer_is_cached_and_loads_with_autotokenizer(tmp_path):
    cfg = load_config(None, [f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    text = "12+7=19,19-35=-16."
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    again = AutoTokenizer.from_pretrained(tok.name_or_path)
    assert again.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
    assert len(tok) < 32 and tok.pad_token and tok.eos_token and tok.bos_token
    get_tokenizer(cfg, task.corpus)  # second call: from the cache
    assert len(list((tmp_path / "tokenizers").glob("chars-*"))) == 1


def test_scale_axis_parameter_counts(tmp_path):
    sizes = {}
    for scale in ("tiny-0.3m", "tiny-1m", "tiny-4m"):
        cfg = load_config(None, [f"model.scale={scale}", f"run.cache_dir={tmp_path}"])
        tok = get_tokenizer(cfg, make_task(cfg).corpus)
        sizes[scale] = count_params(build_model(cfg, tok, init_seed=0))
    assert 0.2e6 < sizes["tiny-0.3m"] < 0.4e6
    assert 0.7e6 < sizes["tiny-1m"] < 1.3e6
    assert 3e6 < sizes["tiny-4m"] < 5e6


def test_llama_arch_and_init_is_seeded(tmp_path):
    cfg = load_config(None, ["model.arch=llama", "model.scale=tiny-0.3m", f"run.cache_dir={tmp_path}"])
    tok = get_tokenizer(cfg, make_task(cfg).corpus)
    a, b = build_model(cfg, tok, 3), build_model(cfg, tok, 3)
    assert type(a).__name__ == "LlamaForCausalLM"
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_sampler_logprobs_equal_teacher_forced_logprobs(tmp_path):
    cfg = load_config(None, ["model.scale=tiny-0.3m", f"run.cache_dir={tmp_path}"])
    task = make_task(cfg)
    tok = get_tokenizer(cfg, task.corpus)
    model = build_model(cfg, tok, 0)
    items, _ = task.take("train", 0, 6)
    torch.manual_seed(0)
    for temp in (1.0, 0.7):
        ro = HFEngine(model, tok).generate([i.prompt for i in items], max_new_tokens=20, temperature=temp)
        lp, ent = sequence_logprobs(model, ro.prompt_ids, ro.prompt_mask, ro.response_ids,
                                    ro.response_mask, temp, with_entropy=True)
        m = ro.response_mask.bool()
        assert (lp[m] - ro.logprobs[m]).abs().max() < 1e-4
        assert (ent[m] >= 0).all()
        # masks: lengths count tokens up to and including EOS; truncated = no EOS
        assert ro.lengths.tolist() == ro.response_mask.sum(-1).tolist()
        for i in range(len(items)):
            has_eos = (ro.response_ids[i] == tok.eos_token_id).any().item()
            assert has_eos != ro.truncated[i].item()
