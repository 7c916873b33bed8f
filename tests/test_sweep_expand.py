"""harness.sweep.expand: pure, deterministic expansion (zip, exclude, include, run_name,
resources) and the run ids `rlablate train` gives the same keys. Timing: bench/bench_expand.py."""

from __future__ import annotations

import json

from conftest import ROOT
from harness import config as config_mod
from harness.cli import main
from harness.config import list_presets, load_config
from harness.sweep.expand import expand
from harness.sweep.spec import parse_spec
from sweeplib import drop_swept, tiny_spec

from test_sweep_spec import NOT_IN_DEMO  # noqa: E402  (issue 18's presets)


def test_expansion_counts_zip_exclude_order_and_resources(tmp_path, cache_dir):
    spec = parse_spec(drop_swept(tiny_spec(
        tmp_path, cache_dir,
        grid={"optim.lr": [1e-3, 3e-4], "algo.clip_high": [0.2, 0.28, 0.3]},
        zip=[{"label.size": ["s", "m"], "model.scale": ["tiny-0.3m", "tiny-1m"],
              "slurm.time_min": [10, 20]}],
        seeds=2, exclude=[{"label.size": "m", "run.seed": 1}, {"optim.lr": "3e-4", "algo.clip_high": 0.3}],
        run_name="{label.size}-lr{optim.lr}-s{run.seed}", slurm={"partition": "p", "cpus_per_task": 2})))
    runs = expand(spec)
    # 2 x 3 x 2 x 2 = 24; rule 0 drops 6 (size m, seed 1); rule 1 drops 4 (lr 3e-4, clip 0.3), one shared
    assert len(runs) == 24 - 6 - 4 + 1
    assert [r.index for r in runs] == list(range(len(runs)))
    for r in runs:
        assert r.cfg.run.sweep == "t"
        assert r.cfg.run_dir() == tmp_path / "results" / "t" / r.run_id
        # zip: the scale and its resources move together with the label
        big = r.point["label.size"] == "m"
        assert r.cfg.model.scale == ("tiny-1m" if big else "tiny-0.3m")
        assert r.resources["time_min"] == (20 if big else 10)
        assert r.resources["partition"] == "p" and r.resources["cpus_per_task"] == 2
        assert not (big and r.cfg.run.seed == 1)
        assert not (r.cfg.optim.lr == 3e-4 and r.cfg.algo.clip_high == 0.3)
        assert r.cfg.run.name == f"{r.point['label.size']}-lr{r.point['optim.lr']}-s{r.cfg.run.seed}"
    # the last axis (seeds) varies fastest
    assert [r.cfg.run.seed for r in runs[:2]] == [0, 1]


def test_include_adds_ablation_points_crossed_with_the_axes_they_skip(tmp_path, cache_dir):
    """A preset grid plus two single-choice ablations of GRPO, each crossed with scale and seeds."""
    spec = parse_spec(drop_swept(tiny_spec(
        tmp_path, cache_dir, grid={"algo.preset": ["grpo", "dr_grpo"],
                                   "model.scale": ["tiny-0.3m", "tiny-1m"]}, seeds=[0, 1],
        include=[{"algo.preset": "grpo", "algo.clip_high": 0.28},
                 {"algo.group_filter": "zero_variance", "algo.preset": "grpo"}],
        exclude=[{"model.scale": "tiny-1m", "algo.clip_high": 0.28, "run.seed": 1}])))
    runs = expand(spec)
    assert len(runs) == 2 * 2 * 2 + 2 * 2 * 2 - 1
    assert spec.swept_keys == ["algo.preset", "model.scale", "run.seed", "algo.clip_high",
                               "algo.group_filter"]
    extra = runs[8:]
    assert [(r.point["model.scale"], r.cfg.run.seed) for r in extra[:3]] == [
        ("tiny-0.3m", 0), ("tiny-0.3m", 1), ("tiny-1m", 0)]
    assert all(r.cfg.algo.preset == "grpo" for r in extra)
    assert [r.cfg.algo.deviates_from_preset for r in extra] == [["clip_high"]] * 3 + [["group_filter"]] * 4
    assert extra[0].cfg.algo.clip_high == 0.28 and extra[0].cfg.algo.clip_low == 0.2
    assert list(extra[3].point) == ["algo.preset", "algo.group_filter", "model.scale", "run.seed"]
    # the grid's own runs keep the preset's values
    assert all(r.cfg.algo.deviates_from_preset == [] for r in runs[:8])


def test_expansion_is_deterministic_and_matches_rlablate_train(tmp_path, cache_dir):
    raw = drop_swept(tiny_spec(tmp_path, cache_dir, grid={"model.scale": ["tiny-0.3m", "tiny-1m"]},
                               seeds=[3, 4]))
    a = [r.run_id for r in expand(parse_spec(raw))]
    b = [r.run_id for r in expand(parse_spec(json.loads(json.dumps(raw))))]
    assert a == b and len(set(a)) == 4
    # the run a sweep names is the run `rlablate train` with the same keys names
    r = expand(parse_spec(raw))[3]
    over = [f"{k}={v}" for k, v in raw["set"].items()] + ["model.scale=tiny-1m", "run.seed=4", "run.sweep=t"]
    assert load_config(None, over).run_id() == r.run_id
    # the memoizing shim is gone after expansion
    assert config_mod.load_preset.__module__ == "harness.config.load"
    assert config_mod.load.typing.__name__ == "typing" and config_mod.load.typing is __import__("typing")


def test_thousand_runs_expand_to_thousand_distinct_ids(tmp_path, cache_dir):
    """(How long it takes is bench/bench_expand.py's business: no wall-clock threshold here.)"""
    raw = drop_swept(tiny_spec(
        tmp_path, cache_dir, grid={"optim.lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
                                   "algo.clip_high": [0.2, 0.24, 0.28, 0.32]},
        zip=[{"model.scale": ["tiny-0.3m", "tiny-1m"], "slurm.time_min": [30, 60]}], seeds=25))
    runs = expand(parse_spec(raw))
    assert len(runs) == 1000 and len({r.run_id for r in runs}) == 1000
    assert [r.index for r in runs] == list(range(1000))


def test_only_selects_a_subset_strictly(capsys, tmp_path):
    demo = str(ROOT / "sweeps" / "demo.yaml")
    # a results dir of its own: a `make demo` of this checkout (results/demo) must not change it
    assert main(["sweep", demo, f"run.results_dir={tmp_path}", "--dry-run", "--only",
                 "algo.preset=grpo,dapo", "--only", "run.seed=1"]) == 0
    out = capsys.readouterr().out
    n = len(set(list_presets()) - NOT_IN_DEMO) * 4 - 4 + 8  # see test_shipped_specs_dry_run
    assert f"{n} runs in 1 resource group; local executor would submit 6, skip {n - 6}" in out
    submit = [line.split()[2:6] for line in out.splitlines()[1:-1] if line.endswith("submit")]
    assert sorted(submit) == sorted([["dapo", "tiny-0.3m", "40", "10"], ["dapo", "tiny-1m", "60", "15"],
                                     ["grpo", "tiny-0.3m", "40", "10"], ["grpo", "tiny-1m", "240", "30"]]
                                    + [["grpo", "tiny-1m", "480", "30"]] * 2)
    for bad, msg in [("algo.preset=grpp", "no run has algo.preset = grpp"),
                     ("optim.lr=1", "optim.lr is not swept"), ("algo.preset", "expected KEY=VALUE")]:
        assert main(["sweep", demo, "--dry-run", "--only", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err, err
