"""harness/loop/metrics.py TensorBoard: the event file records a run completely: every scalar of
metrics.jsonl under the same name and step (the step-0 eval, R0, included), and the resolved config
as text and as hparams. Read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import json

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from harness.config import load_config
from harness.loop import train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from conftest import TINY
    tmp = tmp_path_factory.mktemp("tb")
    cfg = load_config(None, TINY + [f"run.results_dir={tmp / 'r'}", f"run.cache_dir={tmp / 'c'}"])
    summary = train(cfg, progress=False)
    assert summary["status"] == "finished"
    acc = EventAccumulator(str(cfg.run_dir() / "tb"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    return cfg, acc, rows


def test_every_metric_is_a_scalar_with_its_step_including_the_step_0_eval(run):
    cfg, acc, rows = run
    tags = set(acc.Tags()["scalars"])
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 2, 4]
    for name in ("eval/in_dist/pass@1", "eval/held_out/pass@1", "eval/in_dist/stderr"):
        assert name in tags
        got = [(e.step, e.value) for e in acc.Scalars(name)]
        assert got == [(r["step"], pytest.approx(r[name], abs=1e-6)) for r in evals]
    train_rows = [r for r in rows if r["kind"] == "train"]
    got = [(e.step, e.value) for e in acc.Scalars("rollout/reward_mean")]
    assert got == [(r["step"], pytest.approx(r["rollout/reward_mean"], abs=1e-6)) for r in train_rows]


def test_the_resolved_config_is_in_the_event_file_as_text_and_hparams(run):
    cfg, acc, _ = run
    text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text.startswith("```yaml\n") and text.endswith("```")
    saved = yaml.safe_load(text[len("```yaml\n"):-3])
    assert saved == yaml.safe_load((cfg.run_dir() / "config.yaml").read_text())
    assert saved["model"]["scale"] == "tiny-0.3m" and saved["train"]["steps"] == 4
    plugins = acc.PluginTagToContent("hparams")
    assert set(plugins) == {"_hparams_/experiment", "_hparams_/session_start_info",
                            "_hparams_/session_end_info"}
    from tensorboard.plugins.hparams import plugin_data_pb2
    start = plugin_data_pb2.HParamsPluginData.FromString(
        plugins["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["algo.preset"].string_value == "grpo"
    assert start.hparams["rollout.group_size"].number_value == 4
    assert start.hparams["optim.lr"].number_value == pytest.approx(1e-4)
