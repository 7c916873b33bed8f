"""Warm start (cached by content hash, shared across RL seeds, a clear failure when the target is
not reached), the pretrained-model path (`from_pretrained` of a local directory, its own tokenizer),
and the `preset=` shorthand / `rlablate presets`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.config import ConfigError, load_config
from harness.models import build_model, get_tokenizer
from harness.tasks import make_task
from harness.loop import train
from harness.loop.warm_start import WarmStartError, get_warm_start

WARM = ["warmup.max_steps=40", "warmup.check_every=5", "warmup.target_pass_rate=0",
        "warmup.batch_size=16", "warmup.check_items=16"]


def _entries(cache):
    return sorted(p.name for p in (cache / "warmstart").iterdir() if not p.name.startswith("."))


def test_warm_start_is_cached_and_shared_by_rl_seeds(tiny_overrides, tmp_path):
    cache = tmp_path / "cache"
    over = tiny_overrides + WARM + [f"run.cache_dir={cache}", "train.steps=1", "eval.every=1"]
    s0 = train(load_config(None, over + ["run.seed=0"]), progress=False)
    assert s0["status"] == "finished" and s0["warm_start"]["steps"] == 5  # stopped at the first check
    entry = _entries(cache)
    assert len(entry) == 1
    stamp = (cache / "warmstart" / entry[0] / "warmstart.json").stat().st_mtime_ns
    s1 = train(load_config(None, over + ["run.seed=1"]), progress=False)
    assert s1["warm_start"] == s0["warm_start"]
    assert _entries(cache) == entry  # the second seed reused it
    assert (cache / "warmstart" / entry[0] / "warmstart.json").stat().st_mtime_ns == stamp
    train(load_config(None, over + ["warmup.seed=7"]), progress=False)
    assert len(_entries(cache)) == 2  # a different warm-up is a different cache entry
    # R0 is the warm start's own eval: step 0 of every run with the same warm start is identical
    r = [json.loads(open(load_config(None, over + [f"run.seed={k}"]).run_dir() / "metrics.jsonl").readline())
         for k in (0, 1)]
    assert r[0]["eval/in_dist/pass@1"] == r[1]["eval/in_dist/pass@1"] and r[0]["step"] == 0


def test_warm_start_that_misses_its_target_fails_clearly(tiny_overrides, tmp_path):
    cfg = load_config(None, tiny_overrides + [f"run.cache_dir={tmp_path}", "warmup.max_steps=6",
                                              "warmup.check_every=3", "warmup.target_pass_rate=1",
                                              "warmup.batch_size=8", "warmup.check_items=8"])
    task = make_task(cfg)
    with pytest.raises(WarmStartError, match=r"warmup.target_pass_rate = 1.0 after warmup.max_steps = 6"):
        get_warm_start(cfg, get_tokenizer(cfg, task.corpus), task, progress=False)
    assert not (tmp_path / "warmstart").exists() or _entries(tmp_path) == []  # nothing half-written
    p = subprocess.run([sys.executable, "-m", "harness.cli", "train", "--quiet", *tiny_overrides,
                        f"run.cache_dir={tmp_path}", "warmup.max_steps=6", "warmup.check_every=3",
                        "warmup.target_pass_rate=1", "warmup.batch_size=8", "warmup.check_items=8"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "warm start failed" in p.stderr
    summary = json.loads((cfg.run_dir() / "summary.json").read_text())
    assert summary["status"] == "failed" and "WarmStartError" in summary["error"]


def test_pretrained_model_from_a_local_directory(tiny_overrides, tmp_path):
    # make a "pretrained" checkpoint the way any HF model directory looks: save_pretrained
    src = load_config(None, tiny_overrides + [f"run.cache_dir={tmp_path / 'c'}"])
    tok = get_tokenizer(src, make_task(src).corpus)
    model_dir = tmp_path / "my-model"
    build_model(src, tok, init_seed=3).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    # model.max_positions shapes a tiny model only: a checkpoint keeps its own (the rules refuse it)
    over = [o for o in tiny_overrides if not o.startswith("model.max_positions=")]
    cfg = load_config(None, over + [f"run.cache_dir={tmp_path / 'c'}", "model.scale=pretrained",
                                    f"model.path={model_dir}", "task.prompt_style=compact"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished" and summary["warm_start"]["steps"] == 0
    assert not (tmp_path / "c" / "warmstart").exists()  # used in place, not copied
    row = json.loads(open(cfg.run_dir() / "metrics.jsonl").readline())
    assert row["step"] == 0 and 0 <= row["eval/in_dist/pass@1"] <= 1


def test_preset_shorthand_and_presets_command():
    assert load_config(None, ["preset=dapo"]).algo.preset == "dapo"
    assert load_config(None, ["preset=dapo"]).algo.clip_high == pytest.approx(0.28)
    with pytest.raises(ConfigError, match="also given as algo.preset"):
        load_config(None, ["preset=dapo", "algo.preset=gspo"])
    p = subprocess.run([sys.executable, "-m", "harness.cli", "presets"], capture_output=True, text=True)
    assert p.returncode == 0
    lines = {l.split()[0]: l.split() for l in p.stdout.splitlines()[1:]}
    assert lines["dapo"][1:5] == ["group_norm", "token", "ppo_clip", "token_mean"]
    assert lines["gspo"][2] == "sequence" and lines["dr_grpo"][1] == "group_mean"
    assert {"ppo", "rloo", "grpo", "reinforce_pp", "dr_grpo", "dapo", "vapo", "gspo", "cispo",
            "minpro"} <= set(lines)


_TRAIN = """
import json, sys
from harness.config import load_config
from harness.loop import train
print(json.dumps(train(load_config(None, sys.argv[1:]), progress=False)))
"""


def test_numerics_are_recorded_and_another_kernel_path_builds_another_warm_start(tiny_overrides, tmp_path):
    """Determinism holds per numerics only (harness.numerics): the same warm-up on torch's
    unvectorized CPU kernels (ATEN_CPU_CAPABILITY=default) instead of this CPU's vector kernels
    ends on other weights. Each run records its fingerprint and its warm start's."""
    import os

    import torch
    out = {}
    for path, env in (("native", {}), ("default", {"ATEN_CPU_CAPABILITY": "default"})):
        over = [o for o in tiny_overrides if not o.startswith(("run.cache_dir", "run.results_dir"))]
        over += WARM + [f"run.cache_dir={tmp_path / path / 'cache'}", "train.steps=1",
                        f"run.results_dir={tmp_path / path / 'res'}"]
        r = subprocess.run([sys.executable, "-c", _TRAIN, *over], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        (entry,) = _entries(tmp_path / path / "cache")
        out[path] = (summary, (tmp_path / path / "cache" / "warmstart" / entry / "model.safetensors").read_bytes())
    native, default = out["native"][0]["numerics"], out["default"][0]["numerics"]
    assert native["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert default["cpu_capability"] == "DEFAULT" != native["cpu_capability"]
    assert out["native"][0]["warm_start"]["numerics"]["summary"] == native["summary"]
    assert native["torch"] == torch.__version__ and native["summary"].startswith(native["cpu"])
    assert out["native"][1] != out["default"][1]  # same config and seed, other weights
