"""harness/config/rules.py: every bad combination is refused with one line naming the key, the
value and what is allowed (the table in config_cases.py); a key that has no effect under the chosen
values is refused, and loads again at its default; valid combinations load with the values they
set; the rules ask registry properties, never a choice's name."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from config_cases import CASES, MATH, PRETRAINED, VLLM
from harness import algos
from harness.cli import main
from harness.config import Config, ConfigError, load_config, rules

RULES = [c for c in CASES if c.room == "rules"]
UNUSED = [c for c in CASES if c.unused]
ENVIRONMENT = [c for c in CASES if c.room == "environment"]


def raising_module(e: BaseException) -> str:
    tb = e.__traceback__
    while tb.tb_next:
        tb = tb.tb_next
    return tb.tb_frame.f_globals["__name__"]


@pytest.mark.parametrize("case", RULES, ids=[" ".join(c.overrides) for c in RULES])
def test_invalid_combination_is_one_line_from_the_rules(case):
    with pytest.raises(ConfigError) as e:
        load_config(None, list(case.overrides))
    msg = str(e.value)
    assert case.message in msg and "\n" not in msg
    assert raising_module(e.value) == "harness.config.rules"


@pytest.mark.parametrize("case", ENVIRONMENT, ids=[" ".join(c.overrides) for c in ENVIRONMENT])
def test_a_missing_file_is_one_line_from_the_environment_check(case):
    """The loader accepts the config (a login node may lack the run's files); check_environment,
    which `rlablate train` and a local sweep run before writing anything, refuses it."""
    from harness.config import check_environment
    cfg = load_config(None, list(case.overrides))
    with pytest.raises(ConfigError) as e:
        check_environment(cfg, cuda=False)
    assert case.message in str(e.value) and "\n" not in str(e.value)
    assert raising_module(e.value) == "harness.config.environment"


def _lookup(cfg, key: str):
    obj = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def _as_override(value) -> str:
    """A default written as an override value (YAML reads JSON lists, null, true/false)."""
    return json.dumps(value) if not isinstance(value, str) else value


@pytest.mark.parametrize("case", UNUSED, ids=[" ".join(c.overrides) for c in UNUSED])
def test_a_key_without_effect_loads_at_its_default(case):
    """The refused key is the case's last override: the rest loads, and so does the key set back to
    its default (so the rule is about that key having no effect, not about the rest)."""
    *rest, last = case.overrides
    key = last.split("=", 1)[0]
    base = load_config(None, rest)
    default = _lookup(Config(), key) if not key.startswith("algo.") else _lookup(base, key)
    again = load_config(None, rest + [f"{key}={_as_override(default)}"])
    assert again.to_dict() == base.to_dict()


VALID = [  # each combination sets keys away from their defaults, and loads with exactly those values
    ["algo.ratio=sequence", "algo.clip_low=0.0003", "algo.clip_high=0.0004"],  # seq_mean_token_mean
    ["algo.ratio=prefix_min", "algo.aggregation=token_mean"],
    ["algo.surrogate=cispo", "algo.weight_cap=5.0", "algo.aggregation=token_mean"],
    ["algo.surrogate=cispo_band", "algo.clip_low=1.0", "algo.clip_high=4.0", "algo.aggregation=token_mean"],
    ["algo.surrogate=sapo", "algo.tau_pos=0.5", "algo.tau_neg=2.0", "algo.entropy_coef=0.01"],
    ["algo.surrogate=gmpo", "algo.clip_low=0.4", "algo.clip_high=0.4", "algo.ratio=prefix_min"],
    ["algo.surrogate=dppo_kl", "algo.div_low=0.05", "algo.div_high=0.05", "algo.weight_cap=20.0",
     "algo.aggregation=seq_sum_constant"],
    ["algo.ratio=sequence", "algo.aggregation=seq_sum_mean", "algo.clip_high=0.0004"],  # LUSPO
    ["algo.old_logprobs=recompute", "algo.rollout_correction=seq_tis", "algo.rollout_correction_cap=3.0"],
    ["algo.preset=scalerl", "algo.adv_batch_scope=sampled", "algo.advantage=group_mean_batch_std_seq"],
    ["algo.off_policy_mask=dsv32", "algo.off_policy_mask_threshold=0.1",
     "algo.advantage=group_mean_batch_std_seq"],
    ["algo.dual_clip=3.0", "algo.advantage=group_mean_batch_std", "algo.aggregation=prompt_mean"],
    ["algo.surrogate=reinforce", "algo.minibatches=1"],
    ["algo.kl=k1", "algo.kl_coef=0.05", "algo.kl_mode=reward", "algo.advantage=batch_norm"],
    ["algo.kl=k3", "algo.kl_coef=0.04", "algo.micro_batches=4"],
    ["algo.advantage=gae", "algo.lam_alpha=0.05", "algo.critic_lr=0.002", "algo.gamma=0.99"],
    ["algo.advantage=batch_norm", "algo.adv_eps=0.001"],
    ["algo.old_logprobs=recompute", "algo.rollout_correction=mask", "algo.rollout_correction_cap=5.0",
     "algo.rollout_correction_floor=0.25", "rollout.top_p=0.9"],
    ["algo.group_filter=zero_variance", "algo.max_gen_rounds=4"],
    ["algo.rollout_lag=2", "algo.fp32_lm_head=true"],
    [*VLLM, "rollout.gpu_memory_utilization=0.4", "model.lora_rank=8", "model.lora_alpha=32.0"],
    # vLLM's CPU build on the CPU, with its fp32 LM head (hf_overrides head_dtype) under bf16
    ["rollout.engine=vllm", "algo.fp32_lm_head=true", "model.dtype=bf16"],
    [*MATH, "eval.in_dist.n_items=12"],
    [*PRETRAINED, "task.prompt_style=compact", "model.dtype=bf16", "model.param_dtype=bf16"],
    [*PRETRAINED, "model.lora_rank=4", "model.lora_target_modules=[q_proj, v_proj]", "warmup.max_steps=0"],
    # the tests' tiny config: no warm-up training, target 0 (kept: see rules.check_warmup)
    ["warmup.max_steps=0", "warmup.target_pass_rate=0.0", "warmup.seed=3", "model.max_positions=48",
     "rollout.max_new_tokens=24"],
    ["eval.temperature=0.0", "eval.in_dist.k=1", "eval.held_out.k=1"],
    ["warmup.max_steps=10", "warmup.min_steps=10", "task.held_out_in_warmup=true"],
    # issue 17: the offline paradigm with each loss's own knobs
    ["algo.paradigm=offline", "algo.offline_loss=simpo", "offline.n_prompts=64", "algo.beta=2.0",
     "algo.simpo_gamma=1.0", "offline.samples=8", "offline.temperature=0.8", "algo.minibatches=4"],
    ["algo.paradigm=offline", "algo.offline_loss=kto_ema", "offline.n_prompts=32",
     "algo.kto_lambda_u=1.33", "algo.kto_ema_alpha=0.2", "offline.seed=3"],
    ["algo.paradigm=offline", "algo.offline_loss=sft_gold", "offline.n_prompts=32", "algo.epochs=2"],
]


@pytest.mark.parametrize("overrides", VALID, ids=[" ".join(v) for v in VALID])
def test_valid_combinations_load_with_the_values_they_set(overrides):
    cfg, default = load_config(None, overrides), load_config(None, [])
    for item in overrides:
        key, raw = item.split("=", 1)
        want = yaml.safe_load(raw)
        assert _lookup(cfg, key) == want, key
        if key == "task.name":
            continue
        assert _lookup(default, key) != want, f"{key}={raw} is the default: the case tests nothing"


def test_cli_refuses_a_sample_with_exit_2_one_line_and_writes_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    for case in RULES[::7]:
        # a case about run.results_dir itself keeps its own value (a second one would win)
        own = any(o.startswith("run.results_dir=") for o in case.overrides)
        rc = main(["train", *case.overrides, *([] if own else [f"run.results_dir={results}"]),
                   "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1, (case.overrides, err)
        assert err.startswith("rlablate: config error: ") and case.message in err
    assert not results.exists()


REGISTRY_BACKED = set(algos.REGISTRIES) | {"engine", "name", "scale"}


def test_rules_never_compare_a_choice_name():
    """`cfg.algo.kl == "none"`-style tests are axes in all but name: ask the entry's properties."""
    tree = ast.parse(Path(rules.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = {s.attr for s in sides if isinstance(s, ast.Attribute)}
            strings = [s for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
            assert not (strings and names & REGISTRY_BACKED), ast.unparse(node)


def test_every_check_is_small_and_runs():
    """validate is a list of per-section checks, each short enough to read in one look."""
    import inspect
    assert rules.validate.__doc__ and len(rules.CHECKS) >= 10
    for check in rules.CHECKS:
        assert len(inspect.getsource(check).splitlines()) <= 45, check.__name__
        check(load_config(None, []))  # the default config passes each one


def test_every_key_is_read_by_some_rule_or_always_acts():
    """Each no-effect rule names its keys in a tuple of rules.py; guard against a typo in one."""
    fields = {s: {f.name for f in dataclasses.fields(t)} for s, t in
              (("algo", rules.AlgoCfg), ("model", rules.ModelCfg), ("warmup", rules.WarmupCfg))}
    for keys, sec in ((rules.LORA_KEYS, "model"), (rules.TINY_MODEL_KEYS, "model"),
                      (rules.CRITIC_KEYS, "algo"), (rules.SURROGATE_KEYS, "algo"),
                      (rules.WARMUP_LOOP_KEYS, "warmup")):
        assert set(keys) <= fields[sec], (sec, keys)


def test_every_task_key_is_read_by_a_task_and_the_chain_sum_warm_start_key_is_unchanged():
    """TASKS `keys` cover every task.* field; the warm-start key (which hashes the keys the task
    reads) is the one the code before the config split computed for chain_sum."""
    import hashlib

    from harness.tasks import COMMON_KEYS, TASKS
    from harness.loop.warm_start import WARM_START_MODEL_KEYS, WARM_START_VERSION, warm_start_key

    fields = [f.name for f in dataclasses.fields(rules.TaskCfg)]
    read = set(COMMON_KEYS).union(*(TASKS.meta(n).keys for n in TASKS.names()))
    assert read == set(fields)
    cfg = load_config(None, [])
    # the keys of before the config split: every task key but math's (and, since issue 18, the
    # countdown task's, the RL-only train_items and, since session 12, chain_sum's RL-only hard
    # share, which chain_sum's warm start does not read; and, since session 29, the recheck share,
    # which it reads but which leaves the key as it was while at its default 0: a late key)
    later = (set(TASKS.meta("math").keys) | (set(TASKS.meta("countdown").keys) - set(TASKS.meta("chain_sum").keys))
             | {"train_items", "hard_share", "hard_n_terms", "hard_max_digits", "recheck_share"})
    old = {"v": WARM_START_VERSION,
           "model": {k: v for k, v in dataclasses.asdict(cfg.model).items() if k in WARM_START_MODEL_KEYS},
           "task": {k: v for k, v in dataclasses.asdict(cfg.task).items() if k not in later},
           "warmup": dataclasses.asdict(cfg.warmup), "max_new_tokens": cfg.rollout.max_new_tokens,
           "tokenizer": "tok"}
    assert warm_start_key(cfg, "tok") == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]


CONFIG_SIDE = ("harness.algos", "harness.engines", "harness.tasks", "harness.scales", "harness.registry")


def test_imports_go_one_way():
    """load -> rules -> schema; the registries the rules read never import the config package, and
    listing them imports neither transformers nor reasoning-gym (the engines and tasks load lazily)."""
    import subprocess
    import sys
    code = ("import sys\n"
            f"for m in {CONFIG_SIDE!r}: __import__(m)\n"
            "bad = [m for m in sys.modules if m.startswith('harness.config') or m in "
            "('transformers', 'reasoning_gym', 'harness.models')]\n"
            "print(bad)\n")
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    src = {m: Path(rules.__file__).with_name(f"{m}.py").read_text() for m in ("schema", "rules", "load")}
    assert "from .load" not in src["rules"] + src["schema"] and "from .rules" not in src["schema"]
