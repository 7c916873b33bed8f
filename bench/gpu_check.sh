#!/usr/bin/env bash
# Device check of the GPU path, one command, <= 8 minutes on one H200, no network:
#   bash bench/gpu_check.sh
# 1. the GPU-marked tests (when pytest and the harness's CPU dependencies are installed);
# 2. bench/gpu_check.py: a Qwen2.5-0.5B-shaped model with random weights (no download) ->
#    bf16 + fp32 LM head, LoRA on the GPU, rollout tokens/s (HF engine; vLLM if importable),
#    update-step tokens/s and MFU, peak memory. Its last line is `RESULT {json}`.
# 3. the whole loop end to end on the GPU: `rlablate train` on the embedded default (tiny-1m,
#    chain_sum) with run.device=cuda for 40 steps, then bf16 + fp32 head + LoRA for 20 steps; each
#    prints its first and last eval and seconds per step (log and metrics copied to $OUT when set).
# Packages the GPU image lacks travel as wheels in .whl/ (and sdists in .whlsrc/, built there):
# they are installed into /tmp/site first, which then precedes the image's own packages.
# bench/gpu_wheels.sh fetches them (the versions .venv holds).
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --no-build-isolation --upgrade --target /tmp/site .whl/*.whl .whlsrc/* 2>&1 | tail -3
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
if $PY -c "import pytest, reasoning_gym, math_verify, submitit, tensorboard" 2>/dev/null; then
  timeout 150 $PY -m pytest -q -p no:xdist -p no:cacheprovider --continue-on-collection-errors -m gpu tests; rc_tests=$?
else
  echo "GPU tests not run: pytest or a CPU dependency of the test suite is missing here"; rc_tests=skipped
fi
timeout 300 $PY bench/gpu_check.py; rc_check=$?
RUNS=/tmp/gpu_check_runs
loop() {  # name, then config overrides: one run of the whole loop, its first and last eval
  local name=$1; shift
  timeout 150 $PY -m harness.cli train configs/default.yaml run.device=${LOOP_DEVICE:-cuda} run.results_dir=$RUNS \
    run.sweep=gpu run.name=$name "$@" --quiet > $RUNS/$name.log 2>&1; local rc=$?
  $PY - "$RUNS" "$name" "$rc" <<'PYEOF'
import json, sys, glob
runs, name, rc = sys.argv[1:]
f = glob.glob(f"{runs}/**/{name}*/metrics.jsonl", recursive=True)
rows = [json.loads(l) for l in open(f[0])] if f else []
ev = [r for r in rows if r["kind"] == "eval"]
tr = [r for r in rows if r["kind"] == "train"]
step_s = sorted(r["perf/step_s"] for r in tr)
print(f"loop {name}: rc={rc}, {len(tr)} steps, median {step_s[len(step_s)//2] if step_s else float('nan'):.3f} s/step, "
      f"pass@1 {ev[0]['eval/in_dist/pass@1'] if ev else None} -> {ev[-1]['eval/in_dist/pass@1'] if ev else None}")
PYEOF
  [ $rc = 0 ] || tail -5 $RUNS/$name.log
  if [ -n "${OUT:-}" ]; then  # the device tool brings back files under $OUT (8 at most)
    cp $RUNS/$name.log "$OUT/" 2>/dev/null
    cp "$(find $RUNS -path "*$name*" -name metrics.jsonl | head -1)" "$OUT/$name.metrics.jsonl" 2>/dev/null
  fi
  return $rc
}
mkdir -p $RUNS
loop cuda_fp32 train.steps=40; rc_loop1=$?
loop cuda_bf16_lora train.steps=20 model.dtype=bf16 algo.fp32_lm_head=true model.lora_rank=8 \
  model.lora_alpha=16; rc_loop2=$?
echo "gpu tests: rc=$rc_tests; gpu_check.py: rc=$rc_check; loops: rc=$rc_loop1,$rc_loop2; wall $(( $(date +%s) - start )) s"
[ "$rc_check" = 0 ] && [ "$rc_loop1" = 0 ] && [ "$rc_loop2" = 0 ]
