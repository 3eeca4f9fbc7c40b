#!/usr/bin/env bash
# The first minutes on a GPU machine, in one command (issue 35 item 5). Prints, side by side in one run and
# under 8 minutes on one GPU: each built-in target's k = 7 seeds on the CPU vs the GPU, the sample project's
# suite cold under -n 0 and under -n 2 with both workers on the GPU (--privleak-devices=cuda:0,cuda:0), and
# each recurrent target's 7 seeds stacked vs one by one (bench/bench_seeds_cost.py, when present); see
# bench/gpu_check.py for the sections, the budget and the output.
#
#   bash bench/gpu_check.sh                 # on the GPU machine (no network needed)
#   bash bench/gpu_check.sh --dry-run       # anywhere, on the CPU, tiny: what CI runs
#   bash bench/gpu_check.sh --fetch-wheels  # on a machine with network, before going: fills .whl/
#
# What the GPU machine needs beyond its python3 (which holds a CUDA torch; the project needs torch >= 2.2,
# transformers, numpy, scipy, safetensors, filelock, pytest and pytest-xdist, which such an image has) travels as
# wheels in .whl/ (git-ignored: carry it): pytorch-crf, pure Python. The checkout itself travels as the working
# tree and is used from here through PYTHONPATH (the plugin loaded with -p where it is not installed).
# all-MiniLM-L6-v2 (88 MB) does not travel: the sample project's encoder tests are skipped there, and say so.
# With this workplace's device tool, from the checkout root after --fetch-wheels:
#   run(command="PYTHONUNBUFFERED=1 bash bench/gpu_check.sh 2>&1 | tee $OUT/gpu_check.log", carry=[".whl"],
#       timeout_s=540)
# The budget (450 s of sections, plus a few seconds of set-up) leaves room under 8 minutes and under the tool's
# 10-minute command limit; --budget SECONDS changes it.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

if [ "${1:-}" = "--fetch-wheels" ]; then
  exclude="$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)"
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
  exec "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl "pytorch-crf==0.7.2"
fi

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  site="${TMPDIR:-/tmp}/privleak-gpu-check-site"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || { echo "gpu_check: could not install the wheels in .whl/" >&2; exit 3; }
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" bench/gpu_check.py "$@"
