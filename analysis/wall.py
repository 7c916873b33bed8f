"""What a sweep design costs in wall-clock time, predicted from a pilot's measured runs.

The power planner says what a design can resolve; this says what it costs on the machine that ran
the pilot. Each pilot run's time splits into three parts, read from its own files:

* training: the sum of its ``perf/step_s`` (sampling + update, every step), per train step;
* evaluation: its last cumulative ``compute/wall_s`` minus the training sum, per evaluated
  in-distribution sequence (items x k) per eval point. Whatever else the loop does between steps
  (logging, checkpoints) is charged here too, and the held-out set is assumed to scale with the
  in-distribution one;
* fixed: the summary's ``wall_s`` minus the cumulative wall (model and warm-start load), plus the
  launch: the time from the sweep's job record (``jobs.jsonl``) to the summary's last write, less
  the summary's ``wall_s`` (process start, imports: ~4.7 s a run on the 2-core machine).

A run of another design costs ``fixed + steps x train + n_evals x items x k x eval`` with each
part the MEAN over the pilot's runs of that arm, not the median: a run whose responses run away
to the length limit costs 2-3x, and the mean charges that risk at the rate the pilot saw it. An arm
the pilot did not run gets the reference's cost (the plan says which). The sweep's wall is
the list schedule of its runs, in the spec's order, on ``local.parallel`` workers (each job goes to
the first free worker, as the local executor does). Not counted: set-up, the sweep's shared warm
start and the analysis. It is a projection from one machine's pilot under that pilot's load: a
busy machine, run-aways (longer responses) and dynamic sampling's extra rounds make real runs
slower.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class RunCost:
    """Mean seconds of one arm's pilot runs, split as the module docstring says."""

    train_s_per_step: float
    eval_s_per_seq: float   # per evaluated in-dist sequence (items x k) per eval point
    fixed_s: float
    n_runs: int

    def seconds(self, steps: int, every: int, n_items: int, k: int) -> float:
        """Predicted wall of one run of ``steps`` with an eval every ``every`` steps (and at 0)."""
        n_evals = steps // every + 1
        return self.fixed_s + steps * self.train_s_per_step + n_evals * n_items * k * self.eval_s_per_seq


def split_run(rows: list[dict], summary_wall: float | None, launch_s: float = 0.0) -> dict | None:
    """One run's (train, eval, fixed) seconds, steps, eval points and in-dist sequences per eval,
    from its metrics rows, its summary's wall and its launch overhead; None when the run logged
    no timing."""
    train = [r for r in rows if r.get("kind") == "train" and r.get("perf/step_s") is not None]
    evals = [r for r in rows if r.get("kind") == "eval"]
    walls = [r["compute/wall_s"] for r in rows if r.get("compute/wall_s") is not None]
    if not train or not evals or not walls:
        return None
    train_s = float(sum(r["perf/step_s"] for r in train))
    cum = float(max(walls))
    seqs = [r.get("eval/in_dist/n_items", 0) * r.get("eval/in_dist/k", 1) for r in evals]
    return {"steps": len(train), "train_s": train_s, "eval_s": max(cum - train_s, 0.0),
            "n_evals": len(evals), "seqs": float(np.median(seqs)) or 1.0,
            "fixed_s": (max(float(summary_wall) - cum, 0.0) if summary_wall else 0.0) + launch_s}


def job_records(sweep_dir: Path) -> list[tuple[str, float]]:
    """(run_id, time) of every record in a sweep directory's ``jobs.jsonl`` (empty without one)."""
    try:
        lines = (sweep_dir / "jobs.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line) if line.strip() else {}
        except ValueError:
            continue
        if "run_id" in rec and "time" in rec:
            out.append((rec["run_id"], float(rec["time"])))
    return out


def launch_overheads(sweep_dir: Path) -> dict[str, float]:
    """{run_id: seconds from its job record to its summary's last write, less the summary's
    wall_s} for a sweep directory with a ``jobs.jsonl`` (the last record of a run counts)."""
    out = {}
    for run_id, t in dict(job_records(sweep_dir)).items():
        summ = sweep_dir / run_id / "summary.json"
        try:
            wall = json.loads(summ.read_text()).get("wall_s")
            if wall is not None:
                out[run_id] = max(summ.stat().st_mtime - t - float(wall), 0.0)
        except (OSError, ValueError):
            continue
    return out


def run_costs(run_dirs: dict[str, list[Path]]) -> dict[str, RunCost]:
    """{variant: RunCost} from each variant's run directories (metrics.jsonl, summary.json)."""
    out, launch = {}, {}
    for sweep_dir in {Path(d).parent for dirs in run_dirs.values() for d in dirs}:
        launch.update({str(sweep_dir / r): s for r, s in launch_overheads(sweep_dir).items()})
    for variant, dirs in run_dirs.items():
        parts = []
        for d in dirs:
            try:
                rows = [json.loads(x) for x in (Path(d) / "metrics.jsonl").read_text().splitlines()
                        if x.strip()]
                wall = json.loads((Path(d) / "summary.json").read_text()).get("wall_s")
            except (OSError, ValueError):
                continue
            s = split_run(rows, wall, launch.get(str(d), 0.0))
            if s is not None:
                parts.append(s)
        if parts:
            out[variant] = RunCost(
                train_s_per_step=float(np.mean([p["train_s"] / p["steps"] for p in parts])),
                eval_s_per_seq=float(np.mean([p["eval_s"] / (p["n_evals"] * p["seqs"])
                                              for p in parts])),
                fixed_s=float(np.mean([p["fixed_s"] for p in parts])), n_runs=len(parts))
    return out


def pilot_run_dirs(pilot_dir: str) -> dict[str, list[Path]]:
    """{variant label (as the planner names arms): [run dirs]} of a pilot's results tree."""
    from analysis.groups import assign_groups, pilot_axes
    from analysis.load import load_results
    results = load_results(pilot_dir)
    if results.runs.empty:
        return {}
    runs = assign_groups(results, pilot_axes(results))
    return {v: [Path(d) for d in g["run_dir"]] for v, g in runs.groupby("variant")}


def list_schedule(seconds: list[float], workers: int) -> float:
    """Makespan of jobs run in the given order, each on the first worker to come free."""
    free = [0.0] * max(int(workers), 1)
    for s in seconds:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def run_seconds(groups, costs: dict[str, RunCost], reference: str) -> tuple[list[float], list[str]]:
    """(predicted seconds of every run the planner's ``groups`` hold, in the spec's order; arms
    timed as the reference because the pilot did not run them)."""
    ref = costs.get(reference)
    assumed, secs = [], []
    for g in groups:
        c = costs.get(g.variant, ref)
        if c is None:
            raise ValueError(f"the pilot has no timed run of {reference!r} or {g.variant!r}")
        if g.variant not in costs:
            assumed.append(g.variant)
        secs += [c.seconds(g.steps, g.every, g.n_items, g.k)] * g.seeds
    return secs, assumed


def sweep_wall(groups, costs: dict[str, RunCost], reference: str, workers: int
               ) -> tuple[float, float, list[str]]:
    """(predicted wall s, summed run s, arms timed as the reference) of every run the planner's
    ``groups`` hold (each group's seeds), scheduled group by group as the spec lists them."""
    secs, assumed = run_seconds(groups, costs, reference)
    return list_schedule(secs, workers), float(sum(secs)), assumed


def workers_for(seconds: list[float], target_s: float) -> int | None:
    """The fewest workers whose list schedule of ``seconds`` (in order) ends within ``target_s``;
    None when even one worker per run misses it (the longest run alone is longer). Scanned from
    one worker up, not bisected: a list schedule need not shorten monotonically with workers."""
    for m in range(1, len(seconds) + 1):
        if list_schedule(seconds, m) <= target_s:
            return m
    return None


def workers_line(groups, costs: dict[str, RunCost], reference: str, target_min: float) -> str:
    """One line for the plan's printout: how many workers would bring the sweep within
    ``target_min`` minutes, at the pilot's measured run times."""
    secs, _ = run_seconds(groups, costs, reference)
    m, longest = workers_for(secs, target_min * 60), max(secs) / 60
    head = f"wall target {target_min:g} min for {len(secs)} runs ({sum(secs) / 3600:.1f} run-hours): "
    tail = ("; each worker a core as fast as the pilot's, one run at a time, no slowdown from "
            "sharing the machine (set-up, warm start and analysis not counted)")
    if m is None:
        return head + (f"no number of workers reaches it: the longest run alone takes "
                       f"{longest:.1f} min") + tail
    return head + (f"{m} workers (estimated {list_schedule(secs, m) / 60:.1f} min; the longest "
                   f"run {longest:.1f} min)") + tail


def spec_workers(spec_path: str) -> int:
    """The spec's ``local.parallel`` (1 when absent)."""
    import yaml
    spec = yaml.safe_load(Path(spec_path).read_text()) or {}
    return int(((spec.get("local") or {}).get("parallel")) or 1)


def estimate(groups, costs: dict[str, RunCost], reference: str, workers: int
             ) -> tuple[float | None, str]:
    """(predicted wall s or None, one line for the plan's printout)."""
    if not costs:
        return None, ("estimated wall: none (the pilot's runs logged no step times: "
                      "perf/step_s, compute/wall_s)")
    try:
        w, total, assumed = sweep_wall(groups, costs, reference, workers)
    except ValueError as exc:
        return None, f"estimated wall: none ({exc})"
    n = sum(g.seeds for g in groups)
    line = (f"estimated wall: {w / 60:.1f} min for {n} runs on {workers} local worker(s) "
            f"({total / 60:.1f} run-min), from the pilot's mean step, eval and launch times; "
            f"set-up, the shared warm start and the analysis not counted (analysis/wall.py)")
    if assumed:
        line += ("; timed as " + reference + " (the pilot did not run them): "
                 + ", ".join(sorted(set(assumed))))
    return w, line


def budget_walls(budget: pd.DataFrame, groups, costs: dict[str, RunCost], reference: str,
                 workers: int) -> list[float]:
    """Minutes of the whole sweep (every group) at each row's budget (seeds, steps, eval items)."""
    from dataclasses import replace
    out = []
    for row in budget.to_dict("records"):
        n_items = int(str(row["eval"]).split("x")[0])
        gs = [replace(g, seeds=int(row["seeds"]), steps=int(row["steps"]), n_items=n_items)
              for g in groups]
        try:
            out.append(sweep_wall(gs, costs, reference, workers)[0] / 60)
        except ValueError:
            out.append(float("nan"))
    return out


def _records_below(root: str | Path) -> list[tuple[Path, str, float]]:
    """(sweep directory, run_id, time) of every job record of the sweep(s) at or below ``root``."""
    root = Path(root)
    return [(d, run_id, t) for d in [root, *sorted(p for p in root.glob("*") if p.is_dir())]
            for run_id, t in job_records(d)]


def submitted_runs(root: str | Path) -> int:
    """How many distinct runs the sweep(s) at or below ``root`` submitted (their job records): a
    sweep that found some of its runs finished skipped them, and its wall covers only these."""
    return len({run_id for _, run_id, _ in _records_below(root)})


def achieved_wall(root: str | Path) -> float | None:
    """Seconds from the first job record (``jobs.jsonl``) of the sweep(s) at or below ``root`` to
    the last write of any of their runs' summaries: what the sweep took, launches and gaps
    included (a resumed sweep counts its pause). None without job records."""
    first, last = None, None
    for sweep_dir, run_id, t in _records_below(root):
        first = t if first is None else min(first, t)
        summ = sweep_dir / run_id / "summary.json"
        if summ.exists():
            m = summ.stat().st_mtime
            last = m if last is None else max(last, m)
    return None if first is None or last is None else last - first
