#!/usr/bin/env bash
# batch_auto_vs_fixed.sh: does quorum-train --batch auto's switch of batch pay
# off? Per seed (drawn at random unless given), 2 ranks train to the target
# test accuracy twice, alternating: with --batch auto (it starts at local
# batch 64 and re-decides at every epoch end) and fixed at auto's own start
# (local batch 64 at the rate auto starts with). Both evaluate at epoch ends;
# the time to the target is the training seconds at the first epoch end at or
# above it, for auto plus its profile before training (strict). Prints each
# run's time, the batches auto trained at, and per seed fixed / auto; then
# the median and the worst.
#
#   perf/batch_auto_vs_fixed.sh [--build DIR] [--target ACC] [--train-limit N]
#       [--test-limit N] [--seeds "S1 S2 S3"] [--max-epochs N] [--link RATE] [--out DIR]
#
# --link RATE (root): the 2 ranks on 2 simulated hosts (tests/multihost/
# cluster.sh) joined by a link shaped to RATE (e.g. 100mbit), under mpirun,
# where the gradient's allreduce weighs on every step; without it, both
# ranks on this host under quorum-run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build target=88 train_limit=20000 test_limit=2000 seeds="" max_epochs=8 link="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --test-limit) test_limit="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --max-epochs) max_epochs="$2"; shift 2 ;;
    --link) link="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "batch_auto_vs_fixed.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
[ -n "$seeds" ] || seeds="$((RANDOM * 32768 + RANDOM)) $((RANDOM * 32768 + RANDOM)) $((RANDOM * 32768 + RANDOM))"
[ -n "$out" ] || out=$(mktemp -d /tmp/batch_auto_XXXXXX)
mkdir -p "$out"
train=$(realpath "$build/tools/quorum-train")
common=(--train-limit "$train_limit" --test-limit "$test_limit" --epochs "$max_epochs"
  --progress-every 0 --log-every 0)

if [ -n "$link" ]; then
  source tests/multihost/common.sh
  multihost_up 2 "$link"
  launch() { MPIRUN_TIMEOUT=3600 mpirun_on "${P}1:1,${P}2:1" 2 "$train" "$@"; }
else
  export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
  launch() { "$build/tools/quorum-run" -n 2 "$train" "$@"; }
fi
echo "batch_auto_vs_fixed: target ${target}%, ${train_limit} training / ${test_limit} test examples," \
  "seeds ${seeds}, ${link:-one host}; output in ${out}; load $(cut -d' ' -f1-3 /proc/loadavg)"

# seconds_to_target LOG: training seconds at the first epoch end at or above
# the target, plus the batch tuner's profile where the run had one; and the epoch.
seconds_to_target() {
  python3 - "$1" "$target" <<'PY'
import json, sys
profile = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "batch_decision" and r["decision"] == "profiled":
        profile = r["profile_seconds"]
    if r.get("event") == "epoch" and 100 * r["test_accuracy"] >= float(sys.argv[2]):
        print(f"{profile + r['train_seconds']:.2f} {r['epoch']}")
        break
else:
    print("never")
PY
}

: >"$out/results.txt"
for seed in $seeds; do
  launch "${common[@]}" --seed "$seed" --batch auto --target-accuracy "$target" \
    --log "$out/auto_$seed.log" >"$out/auto_$seed.out" 2>&1 </dev/null ||
    { echo "auto run failed:"; tail -5 "$out/auto_$seed.out"; exit 1; }
  # auto's start: its local batch and rate, no warmup.
  read -r batch lr global < <(python3 - "$out/auto_$seed.log" <<'PY'
import json, sys
d = next(r for r in map(json.loads, open(sys.argv[1]))
         if r.get("event") == "batch_decision" and r["decision"] == "start")
print(d["batch"], d["lr"], d["global_batch"])
PY
)
  batches=$(python3 - "$out/auto_$seed.log" <<'PY'
import json, sys
print(",".join(str(r["batch"]) for r in map(json.loads, open(sys.argv[1]))
               if r.get("event") == "batch_decision" and r["decision"] in ("start", "switch", "keep")))
PY
)
  launch "${common[@]}" --seed "$seed" --batch "$batch" --lr "$lr" --lr-reference-batch "$global" \
    --target-accuracy "$target" \
    --log "$out/fixed_$seed.log" >"$out/fixed_$seed.out" 2>&1 </dev/null ||
    { echo "fixed run failed:"; tail -5 "$out/fixed_$seed.out"; exit 1; }
  a=$(seconds_to_target "$out/auto_$seed.log") f=$(seconds_to_target "$out/fixed_$seed.log")
  echo "$seed $a $f $batches" | tee -a "$out/results.txt"
done

python3 - "$out/results.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"{'seed':>12} {'auto s':>8} {'epochs':>6} {'fixed s':>8} {'epochs':>6} {'fixed/auto':>10}  auto's batches per epoch")
print("(auto's seconds include its profile before training)")
ratios = []
for r in rows:
    seed, rest = r[0], r[1:]
    auto = rest[:2] if rest[0] != "never" else ["never", "-"]
    rest = rest[2:] if rest[0] != "never" else rest[1:]
    fixed = rest[:2] if rest[0] != "never" else ["never", "-"]
    batches = rest[-1]
    if auto[0] == "never":
        ratio = 0.0  # auto missed the target: the worst case
    elif fixed[0] == "never":
        ratio = float("inf")
    else:
        ratio = float(fixed[0]) / float(auto[0])
    ratios.append(ratio)
    print(f"{seed:>12} {auto[0]:>8} {auto[1]:>6} {fixed[0]:>8} {fixed[1]:>6} {ratio:10.2f}  {batches}")
print(f"fixed / auto: median {statistics.median(ratios):.2f}, worst {min(ratios):.2f} over {len(ratios)} seeds"
      " (above 1: auto reached the target sooner)")
PY
