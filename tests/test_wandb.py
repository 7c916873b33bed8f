"""Optional W&B logging (harness/loop/metrics.py WandbLog): with RLABLATE_WANDB=<project> and
WANDB_MODE=offline (no network) a run writes a real W&B offline run under <run_dir>/wandb/ whose
history has the rows of metrics.jsonl under the same names at the same steps (the step-0 eval
included) and whose config is the resolved config. The run file is read back record by record
(W&B's leveldb-log framing of wandb_internal_pb2.Record protobufs)."""

from __future__ import annotations

import json
import struct

import pytest

from conftest import TINY
from harness.config import load_config
from harness.loop import train

wandb = pytest.importorskip("wandb", reason="the optional extra rlablate[wandb] (in [dev])")


def records(path):
    from wandb.proto import wandb_internal_pb2 as pb
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, buf, block = 7, b"", 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            break
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            rec = pb.Record()
            rec.ParseFromString(buf)
            buf = b""
            yield rec


def test_offline_wandb_run_has_the_metrics_and_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("RLABLATE_WANDB", "rlablate-test")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = load_config(None, TINY + [f"run.results_dir={tmp_path / 'r'}",
                                    f"run.cache_dir={tmp_path / 'c'}"])
    assert train(cfg, progress=False)["status"] == "finished"
    files = list((cfg.run_dir() / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1 and files[0].name == f"run-{cfg.run_id()}.wandb"
    history, config = {}, {}
    for rec in records(files[0]):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            history[rec.history.step.num] = {
                (i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                for i in rec.history.item if not (i.key or i.nested_key[0]).startswith("_")}
        elif kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in rec.config.update})
    rows = [json.loads(x) for x in (cfg.run_dir() / "metrics.jsonl").read_text().splitlines()]
    want: dict[int, dict] = {}
    for r in rows:
        want.setdefault(r["step"], {}).update(
            {k: v for k, v in r.items() if "/" in k and isinstance(v, (int, float))
             and not isinstance(v, bool)})
    assert sorted(history) == sorted(want) == [0, 1, 2, 3, 4]
    for step, values in want.items():
        assert set(history[step]) == set(values), step
        for k, v in values.items():
            assert history[step][k] == pytest.approx(v, rel=1e-6), (step, k)
    assert history[0]["eval/in_dist/pass@1"] == rows[0]["eval/in_dist/pass@1"]  # R0
    section = {k: (v["value"] if isinstance(v, dict) and "value" in v else v)
               for k, v in config.items()}
    assert section["algo"]["preset"] == "grpo" and section["rollout"]["group_size"] == 4
    assert section["model"] == cfg.to_dict()["model"]
