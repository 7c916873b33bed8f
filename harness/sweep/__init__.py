"""Sweeps: a YAML spec of runs -> validated, expanded, launched through submitit, and watched.

    spec.py       Spec, load_spec, parse_spec (one validator per section), SpecError
    resources.py  the `slurm:` / `local:` key tables and their checks
    expand.py     expand(spec) -> [Run] (deterministic run ids), select (--only), sweep_dir
    job.py        RunJob (the submitit job) and StopRequest (USR2 -> stop at a step boundary)
    record.py     sweep.json, spec.yaml, jobs.jsonl, attempts.jsonl
    progress.py   SweepProgress (one bar over every run's steps)
    executors.py  the executor table: local | slurm | debug -> how a launch runs its runs
    status.py     RunState, run_states, status_report, slurm_job_states
    launch.py     plan, launch (idempotent; one launch of a sweep at a time)
    cli.py        `rlablate sweep` / `rlablate status` (a table of two commands)

Imports go one way: resources <- spec <- expand; job, progress, record <- executors <- spec,
status; status, executors, record, expand <- launch <- cli. This file imports nothing: submitit
unpickles `harness.sweep.job.RunJob` before its signal handlers exist, so the package stays light.
"""
