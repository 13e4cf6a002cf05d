#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA GPU (the rare lent device machine):
# installs the project, lists targets, runs the GPU targets' tests, then a
# short campaign on the GPU targets. Fits in 8 minutes; prints what it skips.
#   usage: bash bench/gpu_check.sh [campaign-seconds, default 120]
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_BUDGET="${1:-120}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
# A lent GPU machine reaches no package index and may not have Python 3.11:
# there, bring the toolchain's wheels, install them with
# `pip install --no-index --no-deps`, and this script uses them as they are.
if python3 -c "import iree.compiler, iree.runtime, torch, torch_mlir.fx" 2>/dev/null; then
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    dlrm-fuzz() { python3 -m fuzz "$@"; }
else
    python3 -m venv /tmp/dlrm-fuzz-gpu && . /tmp/dlrm-fuzz-gpu/bin/activate
    pip install --quiet -e '.[test]' || { echo "install failed"; exit 1; }
fi
nvidia-smi -L || echo "nvidia-smi not found"
dlrm-fuzz targets | tee "$OUT/targets.txt"
timeout 240 python3 -m pytest -q -m "gpu or pipeline" tests/test_targets.py tests/test_devices.py \
    -k "cuda or vulkan or gpu_target" 2>&1 | tail -20 | tee "$OUT/gpu_tests.txt"
GPU_TARGETS=$(python3 - <<'PY'
from fuzz.targets import TARGETS
print(",".join(n for n in ("iree-cuda", "iree-cuda-dyn", "iree-vulkan", "iree-vulkan-dyn")
               if TARGETS[n].availability()[0]))
PY
)
if [ -z "$GPU_TARGETS" ]; then echo "no GPU target available here"; exit 0; fi
# refbackend is the blame witness: with GPU targets alone, torch-mlir's known
# wrong answers (the weighted-pooling bug) are blamed on iree:cuda, in new buckets.
timeout $((SECONDS_BUDGET + 120)) python3 -m fuzz run --budget "${SECONDS_BUDGET}s" --seed 0 \
    --targets "$GPU_TARGETS,refbackend,refbackend-dyn" --corpus "$OUT/corpus" --workers 4 2>&1 | tee "$OUT/campaign.txt" | tail -40
