#!/usr/bin/env bash
# Device check of the GPU path, one command, <= 8 minutes on one H200, no network:
#   bash bench/gpu_check.sh
# 1. the GPU-marked tests (when pytest and the harness's CPU dependencies are installed);
# 2. bench/gpu_check.py: a Qwen2.5-0.5B-shaped model with random weights (no download) ->
#    bf16 + fp32 LM head, LoRA on the GPU, rollout tokens/s (HF engine; vLLM if importable),
#    update-step tokens/s and MFU, peak memory. Its last line is `RESULT {json}`.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH=$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
if $PY -c "import pytest, reasoning_gym, math_verify, submitit, tensorboard" 2>/dev/null; then
  timeout 150 $PY -m pytest -q -p no:xdist -p no:cacheprovider -m gpu tests; rc_tests=$?
else
  echo "GPU tests not run: pytest or a CPU dependency of the test suite is missing here"; rc_tests=skipped
fi
timeout 300 $PY bench/gpu_check.py; rc_check=$?
echo "gpu tests: rc=$rc_tests; gpu_check.py: rc=$rc_check; wall $(( $(date +%s) - start )) s"
[ "$rc_check" = 0 ]
