"""Successive halving: the decision rule on synthetic sweeps with known truth, and the pause that
makes it possible (a run paused at a rung and resumed is bit-identical to one never paused)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.halving import compute_saved, decide_at, decide_from_dir, ranking_agreement
from sweeplib import synthetic_sweep

TRUE_A = {"grpo": 0.60, "dapo": 0.62, "cispo": 0.72, "vapo": 0.45, "rloo": 0.50}


def _sweep(root, steps=400, seeds=(0, 1, 2)):
    synthetic_sweep(root, TRUE_A, steps=steps, seeds=seeds)


def test_halving_keeps_the_true_best_and_stops_the_clearly_worse(tmp_path):
    _sweep(tmp_path)
    table = decide_from_dir(tmp_path, rung=150, n_boot=300).set_index("arm")
    assert table.loc["cispo", "decision"] == "continue"  # the true best is never stopped
    assert "leader" in table.loc["cispo", "reason"]
    # 0.50, 0.60 and 0.62 lie below 0.72: identified, their intervals cannot reach the leader's
    assert set(table.index[table["decision"] == "stop"]) >= {"rloo", "grpo"}
    for arm in table.index:
        if table.loc[arm, "decision"] == "stop":
            assert table.loc[arm, "A_hi"] < table.loc["cispo", "A_lo"]
        elif arm != "cispo":  # kept: either A is not known yet or it may still reach the leader
            assert (not table.loc[arm, "identified"]
                    or table.loc[arm, "A_hi"] >= table.loc["cispo", "A_lo"])
    # measured: vapo (A 0.45, a gain of 0.15) is not identified at step 150 (its profile
    # interval reaches 1), so the rule keeps it: unknown is not worse
    total = {rid: 400 for ids in table["run_ids"] for rid in ids}  # 5 arms x 3 seeds
    saved = compute_saved([(150, table.reset_index())], total)
    n_stopped = int((table["decision"] == "stop").sum())
    assert len(total) == 15
    assert saved == pytest.approx(n_stopped * 3 * (400 - 150) / (15 * 400), rel=1e-9)


def test_halving_stops_nothing_when_fits_are_not_identified(tmp_path):
    """At step 20 the curves have barely started (C_mid at step 30): no A is known, nothing stops."""
    _sweep(tmp_path, steps=40)
    table = decide_from_dir(tmp_path, rung=20, n_boot=100)
    assert (table["decision"] == "continue").all()
    assert table["reason"].str.contains("not identified").all()


def test_ranking_agreement():
    full = {"a": 0.7, "b": 0.6, "c": 0.5, "d": 0.4}
    same = ranking_agreement(full, {"a": 0.71, "b": 0.61, "c": 0.45, "d": 0.44})
    assert same["kendall_tau"] == pytest.approx(1.0) and same["same_best"] is True
    flipped = ranking_agreement(full, {"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.4})
    assert flipped["kendall_tau"] == pytest.approx(0.0) and flipped["same_best"] is False


def test_a_run_paused_at_a_rung_resumes_bit_identical(tmp_path, tiny_overrides):
    """train(pause_at=4) stops with a checkpoint at step 4 (status interrupted, stop_reason
    paused); the next call finishes it; its metrics equal an uninterrupted run's."""
    from harness.config import load_config
    from harness.loop import train

    over = [o for o in tiny_overrides if not o.startswith("train.steps")] + ["train.steps=8"]
    straight = load_config(None, over + ["run.sweep=straight"])
    paused = load_config(None, over + ["run.sweep=paused"])
    train(straight, progress=False)
    first = train(paused, progress=False, pause_at=4)
    assert first["status"] == "interrupted" and first["stop_reason"] == "paused"
    assert first["step"] == 4
    again = train(paused, progress=False, pause_at=4)  # already at the rung: returns at once
    assert again["step"] == 4
    done = train(paused, progress=False)
    assert done["status"] == "finished" and done["step"] == 8

    def rows(cfg):
        out = []
        for line in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines():
            r = json.loads(line)
            out.append({k: v for k, v in r.items() if not k.startswith(("perf/", "compute/wall_s"))})
        return out
    assert rows(straight) == rows(paused)


def test_replay_on_a_finished_sweep_saves_what_the_stops_skip_and_prices_the_ranking(tmp_path):
    """Replaying a rung at 150 on a finished 400-step sweep: the same decisions as at the rung,
    the steps the stopped arms skip, and the ranking cost: a stopped arm drops below every
    survivor, so an unidentified weak survivor (vapo, A 0.45) now ranks above stopped grpo/rloo."""
    from scipy import stats

    from analysis.halving import replay
    _sweep(tmp_path)
    rec = replay(tmp_path, [150], n_boot=300)
    table = decide_from_dir(tmp_path, rung=150, n_boot=300)
    stopped = set(table.loc[table["decision"] == "stop", "arm"])
    assert {k.split(" @ ")[0] for k in rec["stopped"]} == stopped >= {"rloo", "grpo"}
    assert rec["train_steps_saved_frac"] == pytest.approx(len(stopped) * 3 * 250 / (15 * 400))
    (scale, rk), = rec["ranking"].items()
    full = sorted(TRUE_A, key=TRUE_A.get)                      # worst .. best: the true order
    survivors = sorted(set(TRUE_A) - stopped, key=TRUE_A.get)  # finals keep the true order here
    halved = sorted(stopped, key=TRUE_A.get) + survivors
    tau = stats.kendalltau([full.index(a) for a in TRUE_A], [halved.index(a) for a in TRUE_A])[0]
    assert rk["n_arms"] == 5 and rk["same_best"] is True
    assert rk["kendall_tau"] == pytest.approx(tau)
    assert rk["kendall_tau"] < 1.0  # vapo now ranks above the stopped grpo and rloo


def test_analyze_halving_replay_writes_its_section_and_refuses_bad_rungs(tmp_path, capsys):
    from analysis.cli import main
    _sweep(tmp_path, seeds=(0, 1))
    assert main([str(tmp_path), "--bootstrap", "100", "--calibrate", "0", "--plan", "0",
                 "--halving-replay", "150"]) == 0
    md = (tmp_path / "analysis" / "report.md").read_text()
    assert "Successive halving, replayed on this sweep" in md and "Kendall tau" in md
    assert (tmp_path / "analysis" / "halving.csv").exists()
    for bad in ("150,100", "x", "0"):
        with pytest.raises(SystemExit) as e:
            main([str(tmp_path), "--halving-replay", bad])
        assert e.value.code == 2
        assert "--halving-replay" in capsys.readouterr().err


def test_resolved_rule_stops_what_is_decided_and_keeps_the_reference_while_any_is_open(tmp_path):
    """The sequential rule at step 150 of the synthetic sweep (truth: A grpo 0.60, dapo 0.62,
    cispo 0.72, vapo 0.45, rloo 0.50; margin 0.05): cispo (+0.12) and rloo (-0.10) have moved A
    and stop; vapo's fit is not identified yet (measured above), so it and the reference go on.
    Every stop carries a resolved verdict, every continue an open one."""
    from analysis.halving import RESOLVED
    _sweep(tmp_path)
    table = decide_from_dir(tmp_path, rung=150, n_boot=300, rule="resolved",
                            margin=0.05).set_index("arm")
    assert table.loc["cispo", "decision"] == "stop" and table.loc["cispo", "verdict"] == "moved A"
    assert table.loc["cispo", "reason"].startswith("moved A vs grpo: dA +0.1")
    assert table.loc["rloo", "decision"] == "stop"
    assert table.loc["rloo", "reason"].startswith("moved A vs grpo: dA -0.1")
    assert table.loc["vapo", "decision"] == "continue"
    assert table.loc["vapo", "verdict"] == "not resolved (fit not identified)"
    assert table.loc["vapo", "reason"].startswith("not resolved (fit not identified) vs grpo")
    assert table.loc["grpo", "decision"] == "continue" and "vapo" in table.loc["grpo", "reason"]
    assert table.loc["grpo", "verdict"] == ""  # the reference is not compared with itself
    for arm in ("dapo", "cispo", "rloo", "vapo"):
        verdict = table.loc[arm, "verdict"]
        assert table.loc[arm, "reason"].startswith(verdict + " vs grpo")
        assert (table.loc[arm, "decision"] == "stop") == (verdict in RESOLVED), (arm, verdict)


def test_rung_looks_fit_in_the_reports_window(tmp_path):
    """A look fits the window the report fits (analyze --fit-start-step), not the default one: with
    the window starting at step 200, a look at 150 has no points to fit, so nothing can be decided
    and every arm goes on, where the default window stops cispo and rloo (test above)."""
    from analysis.fit import FitWindow
    from analysis.load import load_results
    _sweep(tmp_path)
    late = decide_at(load_results(tmp_path), 150, None, n_boot=100, rule="resolved", margin=0.05,
                     window=FitWindow(start_step=200)).set_index("arm")
    assert (late["decision"] == "continue").all(), late[["decision", "reason"]]
    assert (late.drop(index="grpo")["verdict"].str.startswith("not resolved")).all()


def test_resolved_rule_stops_the_reference_once_all_is_decided_and_replays(tmp_path):
    """Without the unidentified arm every comparison resolves at step 150: the reference stops
    too. Replayed on the finished sweep: the steps saved by hand (every run stopped at 150 of
    400), and each verdict read at 150 agrees with the full sweep's."""
    from analysis.halving import replay
    _sweep(tmp_path)
    for run in tmp_path.glob("vapo-*"):
        import shutil
        shutil.rmtree(run)
    table = decide_from_dir(tmp_path, rung=150, n_boot=300, rule="resolved", margin=0.05)
    assert (table["decision"] == "stop").all(), table[["arm", "reason"]]
    rec = replay(tmp_path, [150], n_boot=300, rule="resolved", margin=0.05)
    assert rec["rule"] == "resolved"
    assert rec["train_steps_saved_frac"] == pytest.approx(250 / 400)
    verdicts = {v["arm"]: v for v in rec["verdicts"]}
    assert set(verdicts) == {"dapo", "cispo", "rloo"}
    assert all(v["read_at"] == 150 for v in verdicts.values())
    assert verdicts["cispo"]["sequential"] == verdicts["cispo"]["full"] == "moved A"
    assert verdicts["rloo"]["agree"] is True
    # ranked by A: each arm's A at the end (400) against its A where it stopped (150)
    from analysis.halving import ranking_agreement
    end = decide_from_dir(tmp_path, rung=400, n_boot=300, rule="resolved", margin=0.05)
    a_end, a_150 = (dict(zip(t["arm"], t["A"])) for t in (end, table))
    assert a_end != a_150 and set(a_end) == {"grpo", "dapo", "cispo", "rloo"}
    (scale,) = rec["ranking_A"]
    assert rec["ranking_A"][scale] == ranking_agreement(a_end, a_150)
    assert -1 <= rec["ranking_A"][scale]["kendall_tau"] <= 1


def test_sweep_cli_refuses_halving_rule_flags_that_cannot_act(tmp_path, capsys):
    """One line and exit 2, nothing written: a rule flag without --halving, a reference or a
    margin with the bound rule, a reference that is no preset of the sweep, a margin outside
    (0, 1)."""
    from harness.cli import main
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ngrid:\n  algo.preset: [grpo, dapo]\nset:\n  train.steps: 40\n"
                    f"  model.scale: tiny-0.3m\n  run.results_dir: {tmp_path / 'out'}\nseeds: 1\n")
    cases = [(["--halving-rule", "resolved"], "--halving-rule: has no effect without --halving"),
             (["--halving", "20", "--halving-margin", "0.05"], "--halving-margin: only with "
              "--halving-rule resolved"),
             (["--halving", "20", "--halving-rule", "resolved", "--halving-reference", "ppo"],
              "--halving-reference = 'ppo': not an algo.preset of this sweep (allowed: dapo, grpo)"),
             (["--halving", "20", "--halving-rule", "resolved", "--halving-margin", "1.5"],
              "--halving-margin = 1.5: must lie in (0, 1)")]
    for args, message in cases:
        assert main(["sweep", str(spec)] + args) == 2, args
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0, err
    assert not (tmp_path / "out").exists()


def test_analyze_replays_the_resolved_rule(tmp_path):
    from analysis.cli import main
    _sweep(tmp_path, seeds=(0, 1, 2))
    assert main([str(tmp_path), "--bootstrap", "200", "--calibrate", "0", "--plan", "0",
                 "--margin", "0.05", "--halving-replay", "150", "--halving-rule", "resolved"]) == 0
    md = (tmp_path / "analysis" / "report.md").read_text()
    assert "Sequential looks (stop what is resolved), replayed on this sweep" in md
    assert "against the full sweep's:" in md
    assert "ranking by A, every arm run to the end against the sequential design" in md
    assert "Kendall tau between the full ranking (final pass rate)" not in md
    table = pd.read_csv(tmp_path / "analysis" / "halving.csv")
    stops = table[table["decision"] == "stop"]
    assert set(stops["arm"]) >= {"cispo", "rloo"}
    assert stops["reason"].str.contains(" vs grpo").all()
    assert stops["verdict"].isin(["moved A", "moved A and B", "only B", "no effect",
                                  "no effect on A"]).all(), stops[["arm", "verdict"]]


@pytest.mark.slow
def test_live_sweep_with_the_resolved_rule_records_and_reports_it(tmp_path, cache_dir, capsys):
    """`rlablate sweep --halving 4 --halving-rule resolved` for real (local executor, tiny runs
    of 8 steps): at step 4 no fit is identified, so every arm goes on and the runs finish;
    halving.json records the rule, the reference and the margin; `rlablate analyze` on the sweep
    prints the record as run (no replay asked)."""
    from harness.cli import main
    from sweeplib import drop_swept, tiny_spec, write_spec
    spec = drop_swept(tiny_spec(tmp_path, cache_dir, grid={"algo.preset": ["grpo", "dapo"]},
                                seeds=2))
    spec["set"].update({"train.steps": 8, "train.checkpoint_every": 4})
    path = write_spec(tmp_path, spec)
    assert main(["sweep", str(path), "--executor", "local", "--parallel", "2", "--halving", "4",
                 "--halving-rule", "resolved", "--halving-margin", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "halving at step 4: " in out and "4 of 4 submitted runs finished" in out
    sdir = tmp_path / "results" / "t"
    rec = json.loads((sdir / "halving.json").read_text())
    assert rec["rule"] == "resolved" and rec["reference"] == "grpo" and rec["margin"] == 0.05
    (step,) = rec["steps"]
    assert {d["arm"]: d["decision"] for d in step["decisions"]} == {"grpo": "continue",
                                                                    "dapo": "continue"}
    verdicts = {d["arm"]: d["verdict"] for d in step["decisions"]}
    assert verdicts["grpo"] == "" and verdicts["dapo"].startswith("not resolved"), verdicts
    # 4 steps: grpo has no fit yet, so the look cannot plan the end (NaN, not a crash)
    assert all(d["planned_width"] != d["planned_width"] for d in step["decisions"])
    assert len(rec["live_runs"]) == 4 and rec["train_steps_saved_frac"] == 0.0
    from analysis.cli import main as analyze
    assert analyze([str(sdir), "--bootstrap", "50", "--calibrate", "0", "--plan", "0",
                    "--no-run-fits"]) == 0
    md = (sdir / "analysis" / "report.md").read_text()
    assert "Sequential looks (stop what is resolved), as run (halving.json)" in md
    assert "| tiny-0.3m | dapo | (at the end) | end |" in md


def test_a_look_plans_the_end_of_each_comparison_it_leaves_open(tmp_path):
    """Under the resolved rule a look also plans the end: each comparison it leaves open gets the
    95% dA width the planner expects at the runs' last step, simulated from the runs as they
    stood at the look with each arm's own noise (`rlablate plan --pilot-up-to-step
    --per-variant-noise` on the same runs gives the same width). Known truth: dapo = grpo (A 0.60,
    4 seeds), margin 0.01, so the comparison stays open at 200 of 400. Measured: width at the look
    0.047, planned for 400 0.034, achieved at 400 0.023 (ratio 0.66). The plan must lie below
    the look's own width (more steps narrow it) and within a factor 2 of the end's; the reference
    and a stopped comparison get none."""
    from analysis import plan
    from analysis.halving import replay
    from analysis.schedule import Group
    synthetic_sweep(tmp_path, {"grpo": 0.60, "dapo": 0.60}, seeds=(0, 1, 2, 3))
    rec = replay(tmp_path, [200], n_boot=300, rule="resolved", margin=0.01, plan_sweeps=20)
    look = {d["arm"]: d for d in rec["steps"][0]["decisions"]}
    assert look["dapo"]["decision"] == "continue" and look["dapo"]["verdict"] == "not resolved"
    planned = look["dapo"]["planned_width"]
    assert planned < look["dapo"]["dA_hi"] - look["dapo"]["dA_lo"]
    assert np.isnan(look["grpo"]["planned_width"])
    (verdict,) = rec["verdicts"]
    assert verdict["planned_at"] == 200 and verdict["planned_width"] == planned
    assert 0.5 < verdict["ratio"] < 2.0, verdict
    assert verdict["ratio"] == pytest.approx(verdict["width_at_end"] / planned)
    scale = look["dapo"]["scale"]
    pilot = plan.pilot_from_dir(str(tmp_path), "grpo", "in_dist", [], per_variant=True,
                                up_to_step=200)
    by_cli = plan.predict([Group("grpo", scale, 400, 10, 4, 256, 4),
                           Group("dapo", scale, 400, 10, 4, 256, 4)], pilot, 20, 0, 0.01)
    assert by_cli.loc[0, "dA_width"] == pytest.approx(planned, rel=1e-12)
    # at margin 0.05 the same look resolves it: stopped, so nothing is planned for it
    rec = replay(tmp_path, [200], n_boot=300, rule="resolved", margin=0.05, plan_sweeps=20)
    stopped = {d["arm"]: d for d in rec["steps"][0]["decisions"]}["dapo"]
    assert stopped["decision"] == "stop" and np.isnan(stopped["planned_width"])
