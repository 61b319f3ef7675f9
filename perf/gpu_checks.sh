#!/bin/bash
# gpu_checks.sh: every check of the cuda trainer backend in one go (a few minutes):
#   1. configure with CUDA required and build only what the checks need;
#   2. the GPU test suite (cuda vs ref per kernel/layer and whole steps, plus the
#      CPU emulation of the same algorithms and the no-device checks);
#   3. throughput of fm-s (images/s at batch 64 and 256) on cuda, and on the cpu
#      backend (1 thread and half the cores) in the same run for comparison;
#   4. one epoch of real training (Fashion-MNIST if installed, else synthetic)
#      on cuda and on cpu (1 thread): loss and test accuracy side by side.
# Results go to $OUT if set, else ./gpu-results (summary.txt first). On a machine
# without a GPU the device checks report SKIP and the script still succeeds.
#
# Usage: perf/gpu_checks.sh [BUILD_DIR]   (default build-gpu; JOBS=N for ninja)
# Exit status: 0 when every check passed or was skipped for want of a device.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${1:-build-gpu}
out=${OUT:-$here/gpu-results}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out"
# The default folder sits in the source tree: keep it out of git.
[ -z "${OUT:-}" ] && echo '*' >"$out/.gitignore"
summary="$out/summary.txt"
: >"$summary"
status=0
say() { echo "$*" | tee -a "$summary"; }
# Runs a step with its output in $out/<name>.log; records pass/fail/skip.
step() {
  local name="$1"
  shift
  local t0=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local verdict=PASS
  if [ "$rc" -eq 77 ]; then
    verdict=SKIP
  elif [ "$rc" -ne 0 ]; then
    verdict="FAIL (exit $rc)"
    status=1
  fi
  say "$(printf '%-24s %-14s %4ss  (log: %s.log)' "$name" "$verdict" $((SECONDS - t0)) "$name")"
  return "$rc"
}

say "quorum gpu checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "host: $(nproc) cores; jobs $jobs"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$out/nvidia-smi.txt" 2>&1
  say "gpu: $(tail -n +2 "$out/nvidia-smi.txt" | head -1)"
else
  say "gpu: nvidia-smi not found (no driver?)"
fi

# 1. Configure (CUDA required) and build the targets of the checks only.
if [ -f "$build/build.ninja" ]; then
  step configure meson configure "$build" -Dcuda=enabled -Dperf=true -Dtests=true
else
  step configure meson setup "$build" -Dcuda=enabled -Dperf=true -Dtests=true
fi || { say "configure failed: see $out/configure.log"; exit 1; }
targets=(tests/gpu/gpu_cuda_vs_ref_test tests/gpu/gpu_kernel_emulation_test
  tests/gpu/gpu_cuda_unavailable_test tools/quorum-train perf/gpu_train_bench)
step build ninja -C "$build" -j "$jobs" "${targets[@]}" || { say "build failed: see $out/build.log"; exit 1; }

# cuBLAS is a shared library: make sure the loader finds it (not every system lists it).
if ldd "$build/tools/quorum-train" 2>/dev/null | grep -q 'libcublas.*not found'; then
  cuda_lib=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")/lib64
  export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "note: libcublas not on the loader path; using LD_LIBRARY_PATH=$cuda_lib"
fi

# 2. The GPU suite (no rebuild: only the targets above exist).
step gpu-tests meson test -C "$build" --suite gpu --no-rebuild --print-errorlogs
grep -E '^ *[0-9]+/[0-9]+ ' "$out/gpu-tests.log" | sed 's/^/    /' | tee -a "$summary"
cp "$build/meson-logs/testlog.txt" "$out/gpu-testlog.txt" 2>/dev/null

# 3. Throughput: cuda, then cpu with one thread and with every core.
bench="$build/perf/gpu_train_bench"
json="$out/bench.jsonl"
: >"$json"
have_device=1
step bench-cuda "$bench" --backends cuda --model fm-s --batches 64,256 --steps 300 --warmup 30 \
  --json "$json" || { [ $? -eq 77 ] && have_device=0; }
grep -E 'images/s|unavailable' "$out/bench-cuda.log" | sed 's/^/    /' | tee -a "$summary"
step bench-cpu-1 "$bench" --backends cpu --model fm-s --batches 64,256 --steps 20 --warmup 3 \
  --threads 1 --json "$json"
grep -E 'images/s' "$out/bench-cpu-1.log" | sed 's/^/    /' | tee -a "$summary"
# Half the cores: the cpu backend's OpenMP pool gets this many threads (with
# every core taken it ran much slower, measured when OpenBLAS kept a second pool).
half=$(($(nproc) / 2))
if [ "$half" -ge 2 ]; then
  step bench-cpu-$half "$bench" --backends cpu --model fm-s --batches 64,256 --steps 30 \
    --warmup 3 --threads "$half" --json "$json"
  grep -E 'images/s' "$out/bench-cpu-$half.log" | sed 's/^/    /' | tee -a "$summary"
fi

# 4. One epoch of real training on both backends.
data=synthetic
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && data=fashion-mnist
train="$build/tools/quorum-train"
common=(--model fm-s --data "$data" --epochs 1 --batch 64 --lr 0.05 --momentum 0.9
  --log-every 0 --progress-every 0)
[ "$data" = synthetic ] && common+=(--train-limit 20000)
if [ "$have_device" = 1 ]; then
  step train-cuda "$train" --backend cuda "${common[@]}" --log "$out/train-cuda.jsonl"
else
  say "$(printf '%-24s %-14s' train-cuda 'SKIP (no CUDA device)')"
fi
step train-cpu "$train" --backend cpu --threads 1 "${common[@]}" \
  --log "$out/train-cpu.jsonl"
python3 - "$out" "$data" <<'PY' 2>/dev/null | tee -a "$summary"
import json, os, sys
out, data = sys.argv[1], sys.argv[2]
for b in ("cuda", "cpu"):
    p = os.path.join(out, f"train-{b}.jsonl")
    if not os.path.exists(p):
        continue
    ep = [json.loads(l) for l in open(p) if '"event":"epoch"' in l]
    if ep:
        e = ep[-1]
        print(f"    {b:5s} 1 epoch {data}: train loss {e['train_loss']:.4f}, test accuracy "
              f"{100 * e['test_accuracy']:.2f}%, {e['images_per_s']:.0f} images/s")
PY

if [ "$status" -eq 0 ] && [ "$have_device" = 0 ]; then
  say "result: SKIP: no CUDA device here (device tests, cuda benchmark and cuda training skipped;"
  say "        the CPU emulation of the kernels and the no-device checks ran and passed)"
elif [ "$status" -eq 0 ]; then
  say "result: PASS"
else
  say "result: FAIL (see the logs in $out)"
fi
exit "$status"
