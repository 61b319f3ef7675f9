#!/bin/bash
# torch_ddp_vs_quorum.sh: PyTorch DDP's own gloo allreduce against quorum's DDP
# hook (sync, majority, solo) on fm-s / Fashion-MNIST under the paper's
# imbalance (each step one rank drawn from a shared seed sleeps --delay-ms),
# side by side in one sitting: examples/pytorch_eager_sgd.py under quorum-run,
# the four modes one after the other per round (the order rotates each round),
# a new random seed per round.
#
# Prints per round and mode: images/s, final accuracy, time to the target
# (sync's final test accuracy less 0.5 points) and the strict speedup = sync's
# own time to first reach the target / the mode's time to first reach it
# (MEASURING.md); then the median and worst over the rounds. Targets: quorum
# sync no slower than DDP's gloo; majority and solo >= 1.27x.
#
# Usage: perf/torch_ddp_vs_quorum.sh [--build DIR] [--ranks N] [--epochs N]
#          [--train-limit N] [--delay-ms D] [--rounds N] [--batch N] [--out DIR]
set -eu
build=build ranks=2 epochs=3 train_limit=0 delay_ms=20 rounds=1 batch=64 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --delay-ms) delay_ms="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
"$python" -c 'import torch' 2>/dev/null || { echo "PyTorch not found for $python (Debian: python3-torch)" >&2; exit 77; }
[ -x "$build/tools/quorum-run" ] || { echo "$build/tools/quorum-run not built" >&2; exit 2; }
[ -d "$build/python/quorum" ] || { echo "$build/python/quorum not built (pybind11-dev)" >&2; exit 2; }
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
export QUORUM_TIMEOUT_MS=${QUORUM_TIMEOUT_MS:-120000} OMP_NUM_THREADS=1
[ -n "$out" ] || out=$(mktemp -d /tmp/quorum_ddp_vs_quorum_XXXXXX)
mkdir -p "$out"
echo "fm-s, $ranks ranks, batch $batch per rank, $epochs epochs, imbalance: 1 rank sleeps $delay_ms ms per step; logs in $out"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
modes=(ddp sync majority solo)
for ((r = 0; r < rounds; r++)); do
  seed=$(( (RANDOM << 15 | RANDOM) % 100000 + 1 ))
  for ((i = 0; i < ${#modes[@]}; i++)); do
    mode=${modes[$(( (i + r) % ${#modes[@]} ))]}
    "$build/tools/quorum-run" -n "$ranks" --timeout 3600 -- "$python" \
      "$here/../examples/pytorch_eager_sgd.py" --reduce "$mode" --epochs "$epochs" \
      --batch "$batch" --train-limit "$train_limit" --delay-ms "$delay_ms" --seed "$seed" \
      >"$out/round$r.$mode.log" 2>&1 || { echo "$mode (round $r) failed:"; tail -5 "$out/round$r.$mode.log"; exit 1; }
    echo "round $r seed $seed: $mode done ($(grep -o '"train_seconds": [0-9.]*' "$out/round$r.$mode.log" | tail -1))"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
modes = ["ddp", "sync", "majority", "solo"]

def summary(r, m):
    for line in open(f"{out}/round{r}.{m}.log"):
        line = line.split("] ", 1)[-1]
        if line.startswith("{") and '"summary"' in line:
            return json.loads(line)
    raise SystemExit(f"round {r} {m}: no summary")

def first_time(curve, target):
    return next((t for t, acc in curve if acc >= target), None)

speedups = {m: [] for m in modes}
rates = {m: [] for m in modes}
for r in range(rounds):
    s = {m: summary(r, m) for m in modes}
    target = s["sync"]["final_accuracy"] - 0.005
    sync_t = first_time(s["sync"]["curve"], target)
    print(f"\nround {r}: target = sync's final {100 * s['sync']['final_accuracy']:.2f}% - 0.5 = "
          f"{100 * target:.2f}%; sync first reaches it at {sync_t:.1f} s")
    print(f"{'mode':9} {'images/s':>9} {'train s':>8} {'final %':>8} {'to target s':>12} "
          f"{'strict x':>9} {'fresh':>6} {'agree':>6}")
    for m in modes:
        t = first_time(s[m]["curve"], target)
        x = sync_t / t if t else 0.0
        speedups[m].append(x)
        rates[m].append(s[m]["images_per_s"])
        fresh = s[m].get("mean_fresh", float("nan"))
        print(f"{m:9} {s[m]['images_per_s']:9.0f} {s[m]['train_seconds']:8.1f} "
              f"{100 * s[m]['final_accuracy']:8.2f} {(f'{t:.1f}' if t else 'never'):>12} "
              f"{x:9.2f} {fresh:6.2f} {str(s[m]['replicas_agree']):>6}")
print(f"\nover {rounds} round(s): strict speedup vs sync (median / worst), images/s vs DDP (median)")
for m in modes:
    print(f"{m:9} {statistics.median(speedups[m]):5.2f}x / {min(speedups[m]):5.2f}x   "
          f"images/s {statistics.median(rates[m]):7.0f} ({statistics.median(rates[m]) / statistics.median(rates['ddp']):.2f}x DDP)")
PY
