#!/usr/bin/env bash
# The GPU figures of the README, in one go, on a CUDA box (the H200 of the device tool here).
#   bash bench/h200.sh [SECTION...]     sections: tuner compare dispatch e2e throughput timing
# Writes logs to $OUT (or ./h200-out). Needs torch + triton; tree-sitter etc. from .whl/ if present.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/h200-out}
mkdir -p "$OUT"
if ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$REPO"/.whl/*.whl
  export PYTHONPATH=/tmp/site:$REPO
else
  export PYTHONPATH=$REPO
fi
export PYTHONUNBUFFERED=1
sections=${*:-tuner compare dispatch e2e}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
WS=$(mktemp -d)
for s in $sections; do
  start=$(date +%s)
  case $s in
    tuner)
      (cd "$WS" && timeout ${TUNER_TIMEOUT:-360} python3 -m harness run softmax --headless --agent tuner \
          --iterations ${TUNER_ITERS:-20} --auto --quiet) 2>&1 | tee "$OUT/tuner_softmax.log"
      sid=$(ls "$WS/.warpsmith/sessions" | head -1)
      cp "$WS/.warpsmith/sessions/$sid/results.tsv" "$OUT/tuner_softmax_results.tsv"
      (cd "$WS" && python3 -m harness sessions export "$sid" -o "$WS/softmax_best.py") 2>&1 | tail -2
      ;;
    compare)
      k=""; [ -f "$WS/softmax_best.py" ] && k="--kernel $WS/softmax_best.py"
      python3 "$REPO/bench/compare.py" softmax $k 2>&1 | tee "$OUT/compare_softmax.txt"
      ;;
    dispatch)
      python3 "$REPO/bench/dispatch.py" softmax --kernel "$REPO/kernels/softmax/candidates/onepass.py" \
          --out "$WS/dispatch_softmax.py" 2>&1 | tee "$OUT/dispatch_softmax.txt"
      ;;
    e2e)
      python3 "$REPO/bench/e2e.py" --workload softmax --kernel softmax="$REPO/kernels/softmax/candidates/onepass.py" \
          --kernel rmsnorm="$REPO/kernels/rmsnorm/kernel.py" 2>&1 | tee "$OUT/e2e.txt"
      ;;
    throughput)
      python3 "$REPO/bench/throughput.py" 2>&1 | tee "$OUT/throughput.txt"
      ;;
    timing)
      python3 "$REPO/bench/timing_trust.py" 2>&1 | tee "$OUT/timing_trust.txt"
      ;;
  esac
  echo "== section $s took $(( $(date +%s) - start )) s" | tee -a "$OUT/sections.txt"
done
