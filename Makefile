# rlablate: `make demo` and `make test` each set everything up on a fresh machine first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: setup test demo bench lint clean-results help

help:
	@echo "make demo   set up, then train the embedded default (CPU, tiny model), fit its curve, print where the report is"
	@echo "make test   set up, then run the test suite"
	@echo "make setup  create $(VENV) and install rlablate with its dependencies (CPU torch)"
	@echo "make bench  rlablate's loop vs TRL GRPOTrainer on the same work (creates bench/.venv-trl); BENCH_ARGS=..."

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
test: setup
	@if [ "$$(id -u)" = 0 ]; then bash scripts/slurm_up.sh || exit 1; export RLABLATE_REQUIRE_SLURM=1; \
	  else echo "not root: SLURM tests will be skipped (run scripts/slurm_up.sh as root to include them)"; fi; \
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

demo: setup
	@start=$$(date +%s); \
	$(VENV)/bin/rlablate train configs/default.yaml run.sweep=demo-default && \
	$(VENV)/bin/rlablate analyze results/demo-default && \
	echo "demo took $$(( $$(date +%s) - start )) s; run dir: results/demo-default/ (tensorboard --logdir results/), report: results/demo-default/analysis/report.md"

# TRL lives in its own venv (its pins differ from ours); torch first, pinned to the CPU wheel.
BENCH_VENV := bench/.venv-trl
BENCH_ARGS ?=
$(BENCH_VENV)/.installed-stamp: bench/requirements-trl.txt
	test -x $(BENCH_VENV)/bin/python || python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q torch==2.13.0
	$(BENCH_VENV)/bin/pip install -q -r bench/requirements-trl.txt
	touch $@

bench: setup $(BENCH_VENV)/.installed-stamp
	$(PY) bench/vs_trl.py $(BENCH_ARGS)

lint: setup
	$(VENV)/bin/ruff check .

clean-results:
	rm -rf results/*
