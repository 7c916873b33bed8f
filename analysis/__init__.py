"""rlablate analysis: results/ -> ScaleRL curve fits, CIs, leaderboards and a report.

The DataFrame API (analysis/frames.py)::

    from analysis import load
    r = load("results/demo")       # r.runs, r.evals, r.train: tidy pandas, config as columns

Reads only run directories (docs/run_format.md); never imports the training harness.
Modules: load (run dirs -> tidy DataFrame), fit (the ScaleRL curve and a batched fitter),
bootstrap (group fits, seed/item/residual bootstrap), groups (axes, per-run and per-group fits),
compare (A-then-B rule, extrapolation, resolution), leaderboard (ranking, OXRL gains, scale),
plots, report, cli (``rlablate analyze`` / ``python -m analysis``), synth (synthetic run dirs).
"""
