#!/usr/bin/env bash
# One batched GPU session for the evaluator: baseline eval table, GPU red team, timing trust bench.
#   MODE=smoke|full bash tests/redteam/device_run.sh      (on the GPU box, from the repo root; $OUT optional)
# Each step is time-boxed; a failing smoke step stops the run early so little GPU time is lost.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warpsmith-out}; mkdir -p "$OUT"
MODE=${MODE:-smoke}
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
$PY -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
table() { $PY -c "import json,sys; from warpsmith.commands.eval import print_table; print_table(json.load(open(sys.argv[1])))" "$1"; }

if [ "$MODE" = smoke ]; then
  timeout 90 $PY -m warpsmith eval softmax kernels/softmax/kernel.py --json --shapes "4k x 4k" --samples 20 \
    > "$OUT/eval_smoke.json" 2> "$OUT/eval_smoke.err"; echo "eval rc=$?"; tail -5 "$OUT/eval_smoke.err"
  table "$OUT/eval_smoke.json" || { cat "$OUT/eval_smoke.err" | tail -40; exit 1; }
  timeout 120 $PY tests/redteam/gpu_suite.py --only gpu_side_stream,gpu_uncapturable,gpu_call_count,half_rows_stale,honest_two_kernels \
    --json "$OUT/redteam_smoke.json" 2>&1 | tail -40
  timeout 100 $PY bench/timing_trust.py --trials 8 --repeats 3 --detect-trials 4 --calib-samples 100 \
    --json "$OUT/trust_smoke.json" 2>&1 | tail -20
elif [ "$MODE" = lean ]; then  # one short call: gate, red team, bench; about 5 minutes at most
  timeout 60 $PY -m warpsmith eval softmax kernels/softmax/kernel.py --json --shapes "4k x 4k" --samples 20 \
    > "$OUT/eval_smoke.json" 2> "$OUT/eval_smoke.err"; echo "gate eval rc=$?"
  table "$OUT/eval_smoke.json" || { tail -60 "$OUT/eval_smoke.err"; exit 1; }
  timeout 150 $PY tests/redteam/gpu_suite.py --workers 6 --json "$OUT/redteam.json" 2>&1 | tail -60
  timeout 100 $PY bench/timing_trust.py --detect-trials 12 --calib-samples 120 --json "$OUT/trust.json" 2>&1 | tail -20
elif [ "$MODE" = one ]; then  # everything in one call, cheapest first, stop if the gate fails
  timeout 70 $PY -m warpsmith eval softmax kernels/softmax/kernel.py --json --shapes "4k x 4k" --samples 20 \
    > "$OUT/eval_smoke.json" 2> "$OUT/eval_smoke.err"; echo "gate eval rc=$?"
  table "$OUT/eval_smoke.json" || { tail -60 "$OUT/eval_smoke.err"; exit 1; }
  timeout 170 $PY tests/redteam/gpu_suite.py --json "$OUT/redteam.json" 2>&1 | tail -60
  timeout 150 $PY bench/timing_trust.py --json "$OUT/trust.json" 2>&1 | tail -20
  timeout 110 $PY -m warpsmith eval softmax kernels/softmax/kernel.py --json > "$OUT/eval_aa.json" 2> "$OUT/eval_aa.err"
  echo "eval rc=$?"; table "$OUT/eval_aa.json" || tail -40 "$OUT/eval_aa.err"
else
  timeout 150 $PY -m warpsmith eval softmax kernels/softmax/kernel.py --json > "$OUT/eval_aa.json" 2> "$OUT/eval_aa.err"
  echo "eval rc=$?"; table "$OUT/eval_aa.json" || tail -40 "$OUT/eval_aa.err"
  timeout 200 $PY tests/redteam/gpu_suite.py --json "$OUT/redteam.json" 2>&1 | tail -60
  timeout 200 $PY bench/timing_trust.py --json "$OUT/trust.json" 2>&1 | tail -20
fi
