"""Which config columns define variants, scale and seed (analysis/groups.py), on configs shaped
like the harness's resolved config.yaml."""
import pandas as pd
import pytest

from analysis.fit import FitError, FitWindow
from analysis.groups import assign_groups, detect_axes, fit_all, scale_sort_key
from analysis.load import Results


def results_from(configs: list[dict]) -> Results:
    runs = pd.DataFrame([{"sweep": "s", "run_id": f"r{i}", "run_dir": f"/x/r{i}",
                          "status": "finished", **c} for i, c in enumerate(configs)])
    cols = [c for c in runs.columns if "." in c]
    return Results(evals=pd.DataFrame(), runs=runs, config_columns=cols)


def harness_like(preset, scale, seed, clip_high=0.2):
    return {"algo.preset": preset, "algo.advantage": "group_mean" if preset == "dr_grpo"
            else "group_norm", "algo.clip_high": clip_high, "model.scale": scale,
            "model.path": None, "run.seed": seed, "run.name": f"{preset}-{scale}-s{seed}",
            "run.sweep": "s", "run.results_dir": "results", "eval.seed": 1234}


def test_detects_preset_scale_and_seed_and_ignores_bookkeeping():
    cfgs = [harness_like(p, s, k) for p in ("grpo", "dr_grpo") for s in ("tiny-1m", "tiny-4m")
            for k in (0, 1)]
    axes = detect_axes(results_from(cfgs))
    assert axes.seed == "run.seed" and axes.scale == "model.scale"
    assert axes.variant == ("algo.preset",)  # advantage follows the preset; run.name is per run


def test_a_design_choice_inside_a_preset_refines_the_variants():
    cfgs = [harness_like("dapo", "tiny-1m", k, clip_high=c) for c in (0.2, 0.28) for k in (0, 1)]
    cfgs += [harness_like("grpo", "tiny-1m", k) for k in (0, 1)]
    res = results_from(cfgs)
    axes = detect_axes(res)
    assert axes.variant == ("algo.preset", "algo.clip_high")
    labels = set(assign_groups(res, axes)["variant"])
    assert labels == {"algo.preset=dapo, algo.clip_high=0.2", "algo.preset=dapo, algo.clip_high=0.28",
                      "algo.preset=grpo, algo.clip_high=0.2"}
    assert detect_axes(res, by=["algo.clip_high"]).variant == ("algo.clip_high",)
    with pytest.raises(FitError, match="unknown axis 'algo.nope'"):
        detect_axes(res, by=["algo.nope"])
    assert detect_axes(res, scale_col="none").scale is None


def test_pretrained_models_are_scaled_by_their_path():
    cfgs = [dict(harness_like("grpo", "pretrained", 0), **{"model.path": "/m/Qwen2.5-0.5B"}),
            dict(harness_like("grpo", "pretrained", 1), **{"model.path": "/m/Qwen2.5-1.5B/"})]
    res = results_from(cfgs)
    runs = assign_groups(res, detect_axes(res))
    assert runs["scale_value"].tolist() == ["Qwen2.5-0.5B", "Qwen2.5-1.5B"]


def test_scales_sort_by_size():
    assert sorted(["14B", "1.5B", "7B", "0.5B"], key=scale_sort_key) == ["0.5B", "1.5B", "7B", "14B"]
    assert sorted(["tiny-4m", "pretrained", "tiny-0.3m", "tiny-1m"], key=scale_sort_key) == [
        "tiny-0.3m", "tiny-1m", "tiny-4m", "pretrained"]


def test_one_seed_group_with_a_seed_bootstrap_gets_a_clear_note(tmp_path):
    from analysis.load import load_results
    from analysis.synth import write_demo_sweep
    write_demo_sweep(tmp_path, algos={"grpo": (0.6, 1.5, 0.4)}, scales=("0.5B",), seeds=(0,),
                     n_items=None, steps=100, eval_every=10)
    res = load_results(tmp_path)
    fits = fit_all(res, detect_axes(res), window=FitWindow(), n_boot=50, method="seeds")
    group = next(g for g in fits if g.level == "group" and g.eval_set == "in_dist")
    assert group.fit is not None and group.boot is None
    assert "seed bootstrap needs >= 2 runs" in group.error
    run = next(g for g in fits if g.level == "run" and g.eval_set == "in_dist")
    assert run.boot is not None and run.boot.method == "residuals"


def test_nan_eval_points_are_dropped_with_a_note_and_linear_rise_is_flagged(tmp_path):
    import json

    import yaml

    from analysis.load import load_results
    d = tmp_path / "s" / "r"
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"algo": {"preset": "grpo"}, "run": {"seed": 0}}))
    rows = [{"kind": "eval", "step": s, "compute/flops": s * 1e12,
             "eval/in_dist/pass@1": None if s == 30 else 0.3 + 0.003 * s,
             "eval/in_dist/stderr": 0.01} for s in range(0, 101, 10)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "summary.json").write_text(json.dumps({"status": "finished"}))
    res = load_results(tmp_path)
    fits = fit_all(res, detect_axes(res), window=FitWindow(), n_boot=0)
    group = next(g for g in fits if g.level == "group")
    assert group.fit is not None and group.fit.n_points == 9  # 10 points, one NaN dropped
    assert "dropped 1 eval point(s)" in group.notes and "[30]" in group.notes
    # a straight line never saturates: A runs to its bound and the fit says so
    assert not group.fit.converged and "no saturation" in group.fit.message


def test_finals_are_read_at_the_step_every_run_of_the_scale_reached(tmp_path):
    """A sweep that runs one variant further (to fit its asymptote) must not compare that
    variant's later pass rate with the others' earlier one."""
    import json

    import yaml

    from analysis.groups import final_points
    from analysis.load import load_results

    def run(name, preset, scale, steps, slope):
        d = tmp_path / "s" / name
        d.mkdir(parents=True)
        (d / "config.yaml").write_text(yaml.safe_dump(
            {"algo": {"preset": preset}, "model": {"scale": scale}, "run": {"seed": 0}}))
        rows = [{"kind": "eval", "step": s, "compute/flops": s * 1e12,
                 "eval/in_dist/pass@1": 0.2 + slope * s, "eval/in_dist/stderr": 0.01}
                for s in range(0, steps + 1, 20)]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "summary.json").write_text(json.dumps({"status": "finished"}))

    run("long", "grpo", "tiny-1m", 300, 0.001)
    run("short", "dapo", "tiny-1m", 60, 0.001)
    run("small", "grpo", "tiny-0.3m", 100, 0.0005)
    res = load_results(tmp_path)
    runs = assign_groups(res, detect_axes(res))
    f = final_points(res, runs).set_index("run_id")
    assert f.loc["long", "final_step"] == 60 and f.loc["short", "final_step"] == 60
    assert f.loc["long", "final"] == pytest.approx(0.26)  # 0.2 + 0.001 * 60, not its step-300 0.5
    assert f.loc["small", "final_step"] == 100  # another scale keeps its own common step
    assert f.loc["long", "r0"] == pytest.approx(0.2)
