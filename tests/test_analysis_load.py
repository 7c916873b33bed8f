"""Loading run directories (docs/run_format.md) into the tidy eval table (analysis/load.py)."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.load import exclusion_reason, flatten_config, load_eval_items, load_results


def eval_row(step, flops, in_rate, out_rate, n=256, k=4):
    row = {"kind": "eval", "step": step, "compute/flops": flops, "compute/tokens": 10.0 * step,
           "compute/wall_s": 1.5 * step}
    for name, rate in (("in_dist", in_rate), ("held_out", out_rate)):
        row.update({f"eval/{name}/pass@1": rate, f"eval/{name}/stderr": 0.02,
                    f"eval/{name}/n_items": n, f"eval/{name}/k": k,
                    f"eval/{name}/response_len": 30.0, f"eval/{name}/response_len_incorrect": 35.0})
    return row


def train_row(step):
    return {"kind": "train", "step": step, "compute/flops": 1e9 * step, "compute/tokens": 10.0 * step,
            "compute/wall_s": 1.5 * step, "rollout/reward_mean": 0.1, "loss/policy": 0.3}


def write_run(root, name, *, preset="grpo", seed=0, status="finished", n_evals=5, tail="",
              extra_lines=(), summary_extra=None, with_summary=True):
    d = root / name
    d.mkdir(parents=True)
    cfg = {"run": {"seed": seed, "name": "", "sweep": root.name},
           "model": {"scale": "tiny-1m"},
           "algo": {"preset": preset, "advantage": "group_norm", "clip_high": 0.2,
                    "deviates_from_preset": []},
           "eval": {"in_dist": {"n_items": 256, "k": 4}}}
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    lines = []
    for i in range(n_evals):
        step = 10 * i
        if step:
            lines.append(json.dumps(train_row(step)))
        lines.append(json.dumps(eval_row(step, 1e9 * step, 0.3 + 0.05 * i, 0.35 + 0.01 * i)))
    lines.extend(extra_lines)
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n" + tail)
    if with_summary:
        summary = {"status": status, "step": 10 * (n_evals - 1), "total_steps": 40,
                   "final": None, "error": None, "diverged_step": None, **(summary_extra or {})}
        (d / "summary.json").write_text(json.dumps(summary))
    return d


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "results" / "sweepA"
    write_run(root, "grpo-s0")
    write_run(root, "grpo-s1", seed=1, tail='{"kind": "eval", "step": 50, "compute/fl')  # killed
    write_run(root, "dapo-s0", preset="dapo", extra_lines=["this is not json",
                                                            json.dumps([1, 2, 3])])
    write_run(root, "dapo-s1", preset="dapo", seed=1, status="failed", n_evals=2,
              summary_extra={"error": "CUDA OOM"})
    write_run(root, "cispo-s0", preset="cispo", status="diverged", n_evals=3,
              summary_extra={"error": "loss is NaN", "diverged_step": 25})
    return root


def test_one_row_per_eval_point_per_set(sweep):
    res = load_results(sweep)
    ev = res.evals
    # 5 + 5 + 5 + 2 + 3 eval rows, two eval sets each
    assert len(ev) == 2 * (5 + 5 + 5 + 2 + 3)
    assert set(ev["eval_set"]) == {"in_dist", "held_out"}
    row = ev[(ev.run_id == "grpo-s0") & (ev.eval_set == "in_dist") & (ev.step == 20)].iloc[0]
    assert row["pass_rate"] == pytest.approx(0.40)
    assert row["stderr"] == pytest.approx(0.02)
    assert row["n_items"] == 256 and row["k"] == 4
    assert row["compute"] == pytest.approx(2e10)
    assert row["response_len_incorrect"] == pytest.approx(35.0)
    assert row["sweep"] == "sweepA" and row["status"] == "finished"


def test_config_is_flattened_to_dotted_columns(sweep):
    res = load_results(sweep)
    for col in ("algo.preset", "algo.advantage", "model.scale", "run.seed", "eval.in_dist.k",
                "algo.deviates_from_preset"):
        assert col in res.evals.columns and col in res.config_columns
    by_run = res.evals.groupby("run_id")["algo.preset"].first()
    assert by_run["dapo-s0"] == "dapo" and by_run["cispo-s0"] == "cispo"
    assert res.evals.loc[res.evals.run_id == "grpo-s1", "run.seed"].unique().tolist() == [1]
    assert res.evals["algo.deviates_from_preset"].iloc[0] == "[]"


def test_truncated_and_garbage_lines_are_reported_not_dropped_silently(sweep):
    res = load_results(sweep)
    kinds = {(i.kind, i.path.split("/")[-2]) for i in res.issues}
    assert ("truncated_line", "grpo-s1") in kinds
    garbage = [i for i in res.issues if i.kind == "garbage_line"]
    assert len(garbage) == 2 and all("dapo-s0" in i.path for i in garbage)
    assert {i.line for i in garbage} == {10, 11}
    truncated = next(i for i in res.issues if i.kind == "truncated_line")
    assert truncated.line == 10 and "compute/fl" in truncated.message
    # the good rows of those files are all there
    assert res.evals[res.evals.run_id == "grpo-s1"]["step"].max() == 40
    assert res.evals[res.evals.run_id == "dapo-s0"]["step"].nunique() == 5


def test_failed_and_diverged_runs_are_kept_with_status_and_a_reason(sweep):
    res = load_results(sweep)
    runs = res.runs.set_index("run_id")
    assert runs.loc["dapo-s1", "status"] == "failed"
    assert runs.loc["cispo-s0", "status"] == "diverged"
    assert (res.evals.run_id == "cispo-s0").sum() == 6  # its evals are still in the table
    assert exclusion_reason(runs.loc["cispo-s0"]) == "diverged at step 25: loss is NaN"
    assert exclusion_reason(runs.loc["dapo-s1"]) == "failed: CUDA OOM"
    assert exclusion_reason(runs.loc["grpo-s0"]) is None


def test_missing_summary_means_unknown_status_and_an_issue(tmp_path):
    write_run(tmp_path, "r", with_summary=False)
    res = load_results(tmp_path / "r")  # a single run directory works too
    assert res.runs["status"].tolist() == ["unknown"]
    assert any(i.kind == "missing_file" and "summary.json" in i.path for i in res.issues)
    assert len(res.evals) == 10


def test_parent_of_several_sweeps_and_duplicate_steps(tmp_path):
    write_run(tmp_path / "s1", "a")
    dup = json.dumps(eval_row(20, 2e10, 0.99, 0.5))
    write_run(tmp_path / "s2", "b", extra_lines=[dup])
    res = load_results(tmp_path)
    assert sorted(res.evals["sweep"].unique()) == ["s1", "s2"]
    b = res.evals[(res.evals.run_id == "b") & (res.evals.eval_set == "in_dist")]
    assert b["step"].tolist() == [0, 10, 20, 30, 40]  # one row per step
    assert b.loc[b.step == 20, "pass_rate"].item() == pytest.approx(0.99)  # later row wins
    assert any(i.kind == "duplicate_step" for i in res.issues)


def test_eval_items_are_read_and_bad_lines_reported(tmp_path):
    d = write_run(tmp_path, "r")
    good = [{"step": s, "set": "in_dist", "correct": [0.25, 0.5, 1.0]} for s in (0, 10)]
    text = "\n".join(json.dumps(g) for g in good) + '\n{"step": 20, "set": "in_dist"}\n{"st'
    (d / "eval_items.jsonl").write_text(text)
    issues = []
    items = load_eval_items(d, issues)
    assert set(items) == {(0, "in_dist"), (10, "in_dist")}
    np.testing.assert_allclose(items[(10, "in_dist")], [0.25, 0.5, 1.0])
    assert {i.kind for i in issues} == {"garbage_line", "truncated_line"}


def test_empty_or_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "nope")
    res = load_results(tmp_path)
    assert res.evals.empty and res.runs.empty
    assert res.issues and res.issues[0].message == "no run directories found"


def test_flatten_config():
    flat = flatten_config({"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2], "f": {}})
    assert flat == {"a.b": 1, "a.c.d": "x", "e": "[1, 2]", "f": "{}"}


def test_numerics_line_names_mixed_numerics():
    """The report's numerics line (analysis.load.numerics_line): one machine, mixed, unrecorded."""
    from analysis.load import numerics_line
    x, y = "Intel Xeon AVX512, torch 2.13.0+cpu, 1 thread", "AMD EPYC AVX2, torch 2.13.0+cpu, 1 thread"
    one = pd.DataFrame({"numerics": [x, x], "warm_numerics": [x, x]})
    assert numerics_line(one).startswith(f"Numerics: all 2 runs on {x}; warm start built on the same.")
    mixed = pd.DataFrame({"numerics": [x, y, y], "warm_numerics": [x, x, x]})
    assert numerics_line(mixed).startswith(f"Numerics **mixed**: runs 2 on {y}; 1 on {x}; warm starts "
                                           f"built (runs) 3 on {x}.")
    old = pd.DataFrame({"numerics": ["unknown"], "warm_numerics": ["unknown"]})
    assert numerics_line(old).startswith("Numerics: not recorded")
