"""One progress bar over the RL steps of every run a local launch submitted (`--progress`).

Each run's step is read from the tail of its metrics.jsonl (`storage.last_step`): no IPC with the
jobs, so a job that dies mid-write cannot break the bar.
"""

from __future__ import annotations

from ..storage import last_step


class SweepProgress:
    """One progress bar over the RL steps of every submitted run (resumed steps count as done),
    with the runs' states in its postfix: `12/48 done, 1 failed | grpo-tiny-1m-s0 34/60, ...`.
    Each run's step is read from the tail of its metrics.jsonl (no IPC with the jobs)."""

    def __init__(self, runs: list, states: dict, enabled: bool = True):
        from tqdm.auto import tqdm  # here: `rlablate --help` does not pay its import
        self.runs = {r.run_id: r for r in runs}
        self.total = {r.run_id: r.cfg.train.steps for r in runs}
        self.start = {r.run_id: (states[r.run_id].step or 0) if r.run_id in states else 0
                      for r in runs}
        # smoothing=0: the rate (hence the ETA) is the average since the launch, so the runs'
        # start-ups, warm starts and evals count in it; tqdm's default moving average of recent
        # steps forgets them and promises too early an end
        self.bar = tqdm(total=sum(self.total.values()), unit="step", dynamic_ncols=True,
                        desc=f"{len(runs)} runs", disable=not enabled,
                        initial=sum(self.start.values()), smoothing=0)

    def _step(self, rid: str) -> int:
        step = last_step(self.runs[rid].cfg.run_dir() / "metrics.jsonl")
        return min(step or 0, self.total[rid])

    def update(self, active: dict, results: dict) -> None:
        if self.bar.disable:
            return
        done = sum(self.total[rid] if results.get(rid) == "finished" else self._step(rid)
                   for rid in self.total if rid in results)
        now = {rid: self._step(rid) for rid in active}
        self.bar.n = done + sum(now.values()) + sum(self.start[rid] for rid in self.total
                                                   if rid not in results and rid not in active)
        failed = sum(1 for v in results.values() if v != "finished")
        running = ", ".join(f"{self.runs[rid].cfg.run_name()} {now[rid]}/{self.total[rid]}"
                            for rid in active)
        self.bar.set_postfix_str(f"{len(results)}/{len(self.total)} done"
                                 + (f", {failed} not finished" if failed else "")
                                 + (f" | {running}" if running else ""), refresh=False)
        self.bar.refresh()

    def write(self, text: str) -> None:
        self.bar.write(text) if not self.bar.disable else print(text)

    def close(self) -> None:
        self.bar.close()
