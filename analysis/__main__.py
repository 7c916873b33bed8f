"""``python -m analysis RESULTS_DIR [--by AXIS ...] [--out DIR] ...`` (same as rlablate analyze)."""
from analysis.cli import main

raise SystemExit(main())
