"""The DataFrame API: a results tree as three tidy pandas frames, and their export.

    from analysis import load
    r = load("results/demo")                  # a run dir, a sweep dir or a parent of sweeps
    r.evals.groupby(["algo.preset", "eval_set", "step"])["pass_rate"].mean()

``load(path)`` (the module ``analysis.load`` is callable: it is ``analysis.load.load_frames``) returns
:class:`Frames`:

* ``runs``: one row per run: ``sweep``, ``run_id``, ``run_dir``, ``status``, ``last_step``,
  ``total_steps``, ``error``, ``diverged_step``, ``n_eval_rows``, ``algorithm`` and every key of
  the run's resolved config (``config.yaml``) as a column (``algo.preset``, ``optim.lr``,
  ``model.scale``, ``run.seed``, ...);
* ``evals``: one row per eval point per eval set: ``step``, ``eval_set``, ``compute`` (cumulative
  FLOPs), ``compute_tokens``, ``wall_s``, ``pass_rate`` (pass@1), ``stderr``, ``n_items``, ``k``,
  any other ``eval/<set>/<metric>``, and the config columns;
* ``train``: one row per RL step with every training metric of metrics.jsonl under its own name
  (``rollout/reward_mean``, ``policy/entropy``, ``loss/policy``, ``compute/flops``, ...) and the
  config columns;
* ``issues``: what could not be read (truncated lines, missing files: ``analysis.load.LoadIssue``).

``export(path, out, fmt)`` writes them as ``runs``/``evals``/``train`` ``.parquet`` (pyarrow) or
``.csv``: ``rlablate export RESULTS_DIR --parquet``. A frame without rows still has its header,
so ``pd.read_csv`` reads every file back.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from analysis.load import Frames, load_frames

__all__ = ["Frames", "load_frames", "write_frame", "export"]

FRAMES = ("runs", "evals", "train")


def write_frame(df: pd.DataFrame, path: Path) -> Path:
    """CSV or Parquet by suffix; lists (e.g. ``model.lora_target_modules``) become strings, and
    a frame without columns gets one (``pd.read_csv`` cannot read a file with no header)."""
    if not len(df.columns):
        df = pd.DataFrame(columns=["empty"])
    df = df.copy()
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (list, tuple, dict))).any():
            df[col] = df[col].map(lambda v: str(v) if isinstance(v, (list, tuple, dict)) else v)
    if path.suffix == ".parquet":
        for col in df.columns:  # one type per column: mixed object columns become strings
            if df[col].dtype == object:
                df[col] = df[col].map(lambda v: None if v is None or v != v else str(v))
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


def export(path: str | os.PathLike, out: str | os.PathLike, fmt: str = "parquet") -> list[Path]:
    """Write runs, evals and train of the tree at ``path`` into ``out`` as ``fmt`` files."""
    frames = load_frames(path)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [write_frame(getattr(frames, name), out / f"{name}.{fmt}") for name in FRAMES]
