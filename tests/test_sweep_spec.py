"""harness.sweep.spec: strict validation of sweep specs. Every error is one line naming the key,
exit 2, nothing written (through `rlablate sweep`, as a user meets it); overrides; the shipped specs."""

from __future__ import annotations

import pytest

from conftest import ROOT
from harness.cli import main
from harness.config import list_presets
from harness.sweep.expand import expand
from harness.sweep.spec import load_spec
from sweeplib import drop_swept, tiny_spec, write_spec

BAD = [
    ({"seed": [0, 1]}, "unknown key 'seed'", "did you mean 'seeds'"),
    ({"grid": {"optim.lrr": [1e-3]}}, "grid.optim.lrr: unknown config key", "did you mean 'optim.lr'"),
    ({"grid": {"optim.lr": [1e-3, -1.0]}}, "run 1 (optim.lr=-1.0): optim.lr = -1.0", "must be >"),
    ({"grid": {"model.scale": ["tiny-0.3m", "tiny-2m"]}}, "model.scale = 'tiny-2m'", "allowed values"),
    ({"zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "optim.lr": [1e-3]}]}, "zip[0]",
     "equal lengths (model.scale: 2, optim.lr: 1)"),
    ({"seeds": 2, "exclude": [{"run.seed": 7}]}, "exclude[0]", "matches no run"),
    ({"seeds": 2, "exclude": [{"model.scale": "tiny-1m"}]}, "exclude[0].model.scale: not a swept key",
     "run.seed"),
    ({"executor": "slrum"}, "executor = 'slrum'", "did you mean 'slurm'"),
    ({"slurm": {"gpu_per_node": 1}}, "slurm.gpu_per_node: unknown key", "did you mean 'gpus_per_node'"),
    ({"slurm": {"time_min": "1h"}}, "slurm.time_min = '1h': expected int", "time limit"),
    ({"grid": {"slurm.mem_gb": [8, "lots"]}}, "grid.slurm.mem_gb = 'lots'", "expected"),
    ({"grid": {"optim.lr": [1e-3, 0.001]}}, "resolve to the same config", "run_id"),
    ({"grid": {"run.seed": [0]}, "seeds": [1]}, "seeds: also given in grid.run.seed",
     "one place"),
    ({"base": "grop"}, "base = 'grop'", "did you mean 'grpo'"),
    ({"grid": {"run.results_dir": ["a", "b"]}}, "run.results_dir: cannot be swept", "one directory"),
    ({"set": {"run.sweep": "x"}}, "run.sweep: cannot be set", "name"),
    ({"name": "../up"}, "name = '../up'", "letters, digits"),
    ({"run_name": "{optim.lr}-x"}, "run_name: {optim.lr} is neither swept nor set", "use one of"),
    ({"grid": {"optim.lr": 0.1}}, "grid.optim.lr = 0.1", "non-empty list"),
    ({"include": {"algo.clip_high": 0.28}}, "include = ", "list of mappings"),
    ({"include": [{"algo.clip_hihg": 0.28}]}, "include[0].algo.clip_hihg: unknown config key",
     "did you mean 'algo.clip_high'"),
    ({"include": [{"optim.lr": [1e-3, 1e-4]}]}, "include[0].optim.lr", "single value"),
    ({"include": [{"train.steps": 3}]}, "include[0].train.steps: also given in set.train.steps",
     "one place"),
    ({"zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "optim.lr": [1e-3, 1e-4]}],
      "include": [{"model.scale": "tiny-1m"}]}, "include[0]: names model.scale of zip[0] but not optim.lr",
     "all of a zip"),
    ({"grid": {"optim.lr": [1e-3]}, "include": [{"optim.lr": 1e-3}]}, "resolve to the same config",
     "run_id"),
    ({"include": [{"algo.clip_high": -1.0}]}, "algo.clip_high = -1.0", "must be"),
    # sbatch's USR2 may come 60 s early: before the job starts (checked before `sbatch` is looked for)
    ({"executor": "slurm", "slurm": {"time_min": 3, "signal_delay_s": 150}},
     "slurm.signal_delay_s = 150 with slurm.time_min = 3: the USR2 may come 0 s into the job",
     "allowed: signal_delay_s <= 90"),
    ({"executor": "slurm", "zip": [{"model.scale": ["tiny-0.3m", "tiny-1m"], "slurm.time_min": [60, 1]}]},
     "slurm.time_min = 1 is too short",
     "allowed: time_min >= 2"),
]


@pytest.mark.parametrize("patch,msg,hint", BAD, ids=[b[1][:40] for b in BAD])
def test_spec_errors_are_one_line_exit_2_and_write_nothing(tmp_path, cache_dir, capsys, patch, msg, hint):
    spec = tiny_spec(tmp_path, cache_dir)
    for k, v in patch.items():
        if k == "set":
            spec["set"] = {**spec["set"], **v}
        else:
            spec[k] = v
    path = write_spec(tmp_path, drop_swept(spec))
    rc = main(["sweep", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "\n" not in err, err
    assert msg in err and hint in err, err
    assert not (tmp_path / "results").exists()


def test_override_of_a_swept_key_is_refused(tmp_path, cache_dir, capsys):
    path = write_spec(tmp_path, tiny_spec(tmp_path, cache_dir, seeds=2))
    assert main(["sweep", str(path), "run.seed=3", "--dry-run"]) == 2
    assert "run.seed is swept by seeds" in capsys.readouterr().err


def test_not_yaml_and_missing_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["sweep", str(bad), "--dry-run"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


# issue 18's presets are not in sweeps/demo.yaml yet: the demo regime is being re-planned by the
# lead at the same time, so adding 20 runs to it is left to that plan (remove names from here when
# they join the demo).
# issue 17: the OXRL arms run in sweeps/oxrl-mini.yaml, not in the demo; issue 18's presets are
# left out of the demo until its regime is re-planned (issue 16)
NOT_IN_DEMO = {"sapo", "gmpo", "dppo_tv", "dppo_kl", "luspo", "vespo",
               "sft", "dpo", "dpop", "ipo", "simpo", "kto", "sgrpo"}


def test_shipped_specs_dry_run(capsys):
    assert main(["sweep", str(ROOT / "sweeps" / "demo.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # every preset x 2 scales x 2 seeds, less GRPO and Dr. GRPO at tiny-1m (2 x 2), which run in the
    # long tier with the two GRPO ablations (4 x 2)
    in_demo = set(list_presets()) - NOT_IN_DEMO
    assert f"{len(in_demo) * 2 * 2 - 4 + 8} runs in 1 resource group" in out.splitlines()[-1]
    demo = load_spec(ROOT / "sweeps" / "demo.yaml")
    runs = expand(demo)
    assert {r.cfg.algo.preset for r in runs} == in_demo, \
        "sweeps/demo.yaml must cover every preset in harness/presets (but NOT_IN_DEMO)"
    assert {r.cfg.model.scale for r in runs} == {"tiny-0.3m", "tiny-1m"} and demo.executor == "local"
    assert sorted({r.cfg.run_name().split("-tiny")[0] for r in runs if r.cfg.algo.deviates_from_preset}) \
        == ["grpo+clip_high=0.28", "grpo+group_filter=zero_variance"]
    long = [r for r in runs if r.cfg.train.steps in (240, 480)]
    assert len(long) == 8 and {r.cfg.model.scale for r in long} == {"tiny-1m"}
    assert sorted(r.cfg.run_name().split("-tiny")[0] for r in long if r.cfg.train.steps == 480) == \
        ["grpo", "grpo", "grpo+group_filter=zero_variance", "grpo+group_filter=zero_variance"]
    assert {r.cfg.train.steps for r in runs if r not in long} == {40, 60}
    assert main(["sweep", str(ROOT / "sweeps" / "demo-quick.yaml"), "--dry-run"]) == 0
    assert "6 runs in 1 resource group" in capsys.readouterr().out
    assert main(["sweep", str(ROOT / "sweeps" / "scalerl_loss.yaml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "36 runs in 4 resource groups" in out and "(dry run: nothing written)" in out
    runs = expand(load_spec(ROOT / "sweeps" / "scalerl_loss.yaml"))
    assert all(r.cfg.model.scale == "pretrained" and r.resources["gpus_per_node"] == 1 for r in runs)
    assert len({r.cfg.model.path for r in runs}) == 4 and len({r.point["label.loss"] for r in runs}) == 3
    assert not (ROOT / "results" / "scalerl_loss").exists()
