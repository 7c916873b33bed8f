# rlablate: `make demo` and `make test` each set everything up on a fresh machine first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: setup test test-faults demo lint clean-results help

help:
	@echo "make demo   set up, then train the embedded default (CPU, tiny model), fit its curve, print where the report is"
	@echo "make test   set up, then run the test suite (the fault-injection suite included)"
	@echo "make test-faults   only the fault-injection suite (pytest -m faults; docs/reliability.md)"
	@echo "make setup  create $(VENV) and install rlablate with its dependencies (CPU torch)"

# torch is installed first, pinned, so pip takes the local CPU wheel instead of a multi-GB CUDA build.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# The SLURM tests run against a real single-node cluster: scripts/slurm_up.sh installs (apt) and
# starts it when we are root (CI, a fresh machine). Without root the SLURM tests skip and say why.
# As root (CI) the fault suite also mounts small tmpfs file systems (disk full, read-only).
SLURM_UP = if [ "$$(id -u)" = 0 ]; then bash scripts/slurm_up.sh || exit 1; export RLABLATE_REQUIRE_SLURM=1; \
	  else echo "not root: SLURM and mount-based fault tests will be skipped (run as root to include them)"; fi
test: setup
	@$(SLURM_UP); $(PY) -m pytest -q $(PYTEST_ARGS) tests

test-faults: setup
	@$(SLURM_UP); $(PY) -m pytest -q -m faults $(PYTEST_ARGS) tests

demo: setup
	@start=$$(date +%s); \
	$(VENV)/bin/rlablate train configs/default.yaml run.sweep=demo-default && \
	$(VENV)/bin/rlablate analyze results/demo-default && \
	echo "demo took $$(( $$(date +%s) - start )) s; run dir: results/demo-default/ (tensorboard --logdir results/), report: results/demo-default/analysis/report.md"

lint: setup
	$(VENV)/bin/ruff check .

clean-results:
	rm -rf results/*
