#!/usr/bin/env bash
# tune_validate.sh: checks quorum-tune's predictions against real training.
#
#   perf/tune_validate.sh [--build DIR] [--target ACC] [--train-limit N] [--test-limit N]
#                         [--seeds "1 2 3"] [--evals-per-epoch E] [--max-epochs N] [--out DIR]
#                         [--reduce sync|solo|majority] [--imbalance SPEC]
#                         [--tune-flags "..."]   (more quorum-tune flags, e.g. --pilot-batch 32)
#   perf/tune_validate.sh --report-only --out DIR   (the comparison again, from DIR's logs)
#
# 1. quorum-tune on 2 ranks (quorum-run -n 2, --ranks 1,2) predicts time and
#    cost to ACC% for every (batch, K) of its grid (--json). Without --seeds,
#    five seeds are drawn at random (and printed).
# 2. quorum-train then trains for real at configurations taken from that
#    table: both ends of the K = 1 batch range, the tuner's choice, two
#    interior K = 1 batches and two K = 2 configurations (sync allreduce), each
#    with the learning rate and warmup the tuner gives, once per seed, until
#    the first test evaluation at or above ACC% (the run is then stopped).
#    With --reduce/--imbalance the tuner predicts that reduction under that
#    injected imbalance, and the K = 2 runs train that way (its flags).
#    Then one quorum-train run with its defaults (5 epochs at batch 64) on 2
#    ranks, timed whole, against which the tuning's own time is set.
# 3. It prints per configuration the predicted and measured (median over
#    seeds) time and cost to the target with the error of each, and the mean
#    and worst error; also the steps to the target, predicted and measured
#    (the statistical model's error apart from the step time's).
# Time is training time (test evaluations left out), as quorum-train's
# summary counts it; cost = time x K (rank-seconds). The machine is shared:
# take the figures as this sitting's, and rerun to see their spread.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build target=85 train_limit=20000 test_limit=2000 seeds="" evals=20 max_epochs=12
out="" report_only=0 reduce=sync imbalance=none tune_flags=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --test-limit) test_limit="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --evals-per-epoch) evals="$2"; shift 2 ;;
    --max-epochs) max_epochs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    --reduce) reduce="$2"; shift 2 ;;
    --imbalance) imbalance="$2"; shift 2 ;;
    --tune-flags) tune_flags="$2"; shift 2 ;;
    *) echo "tune_validate.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
[ -n "$seeds" ] || seeds=$(shuf -i 1-999999 -n 5 | tr '\n' ' ')
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
[ -n "$out" ] || out=$(mktemp -d /tmp/tune_validate_XXXXXX)
mkdir -p "$out"
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
data=(--train-limit "$train_limit" --test-limit "$test_limit")
echo "tune_validate: target ${target}%, ${train_limit} training / ${test_limit} test examples," \
  "seeds ${seeds}, output in ${out}; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# 1. Predictions.
if [ "$report_only" = 0 ]; then
start=$(date +%s.%N)
# shellcheck disable=SC2086  # --tune-flags: split into words on purpose
"$build/tools/quorum-run" -n 2 "$build/tools/quorum-tune" "${data[@]}" --target-accuracy "$target" \
  --batch-min 16 --batch-max 512 --ranks 1,2 --evals-per-epoch "$evals" \
  --reduce "$reduce" --imbalance "$imbalance" $tune_flags \
  --json "$out/tune.json" >"$out/tune.txt" 2>"$out/tune.err" ||
  { echo "quorum-tune failed:"; tail -5 "$out/tune.err"; exit 1; }
tuning_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "quorum-tune took ${tuning_s} s in all" >&2
grep -E "^\[0\] (choice|run it|tuning)" "$out/tune.txt" | sed 's/^\[0\] //' >&2
# A default run on the same ranks and data, timed whole as the tuning was.
start=$(date +%s.%N)
"$build/tools/quorum-run" -n 2 "$build/tools/quorum-train" "${data[@]}" --progress-every 0 \
  >"$out/default_run.txt" 2>&1 || { echo "the default run failed:"; tail -5 "$out/default_run.txt"; exit 1; }
default_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "a default run (quorum-train, 5 epochs at batch 64, 2 ranks) took ${default_s} s in all;" \
  "quorum-tune took ${tuning_s} s in all: $(awk -v t="$tuning_s" -v d="$default_s" 'BEGIN { printf "%.0f", 100 * t / d }')% of it" |
  tee "$out/tuning_cost.txt" >&2
fi

# 2. The configurations: "K b lr ref warmup predicted_s predicted_cost label
#    predicted_steps extra_flags" lines (extra: comma-joined, "-" for none).
"$py" - "$out/tune.json" >"$out/configs.txt" <<'PY'
import json, math, sys
doc = json.load(open(sys.argv[1]))
rows = doc["rows"]
def flags(r):
    return r["ranks"], r["local_batch"]
def train_args(r):
    # quorum-tune's own quorum-train flags for the row: rate, reference batch,
    # warmup, and the reduction flags (a comma-joined field; "-" for none).
    f = r["train_flags"].split()
    extra = f[f.index("--warmup-epochs") + 2:]
    return (f[f.index("--lr") + 1], f[f.index("--lr-reference-batch") + 1],
            f[f.index("--warmup-epochs") + 1], ",".join(extra) or "-")
one = sorted((r for r in rows if r["ranks"] == 1), key=lambda r: r["global_batch"])
two = sorted((r for r in rows if r["ranks"] == 2), key=lambda r: r["global_batch"])
picked = []
def add(r, label):
    for p, _ in picked:
        if flags(p) == flags(r):
            return
    picked.append((r, label))
c = doc["choice"]
add(next(r for r in rows if flags(r) == (c["ranks"], c["local_batch"])), "chosen")
add(one[0], "K1-smallest")
add(one[-1], "K1-largest")
for r in one[1:-1]:
    if sum(1 for _, l in picked if l == "K1-interior") < 2 and r["global_batch"] in (64, 128):
        add(r, "K1-interior")
add(min(two, key=lambda r: r["seconds"]), "K2-fastest")
add(two[len(two) // 2 - 1], "K2-interior")
for r, label in picked:
    lr, ref, warmup, extra = train_args(r)
    print(r["ranks"], r["local_batch"], lr, ref, warmup,
          f"{r['seconds']:.4f}", f"{r['cost']:.4f}", label, f"{r['steps']:.0f}", extra)
PY

# The training seconds and step of the first evaluation at or above the
# target in a quorum-train --log (awk: light enough to poll beside the run).
first_at_target() {
  [ -f "$1" ] || return 0
  awk -v t="$target" '/"event":"start"/ {
      if (match($0, /"steps_per_epoch":[0-9]+/)) spe = substr($0, RSTART + 18, RLENGTH - 18)
    }
    /"event":"(eval|epoch)"/ {
      if (match($0, /"test_accuracy":[-0-9.e]+/)) acc = substr($0, RSTART + 16, RLENGTH - 16)
      if (match($0, /"train_seconds":[-0-9.e]+/)) s = substr($0, RSTART + 16, RLENGTH - 16)
      if (match($0, /"step":[0-9]+/)) st = substr($0, RSTART + 7, RLENGTH - 7)
      else if (match($0, /"epoch":[0-9]+/)) st = substr($0, RSTART + 8, RLENGTH - 8) * spe
      if (100 * acc >= t) { print s, st; exit }
    }' "$1"
}

# Trains one configuration until the first evaluation at or above the
# target; prints its training seconds and step there (or "never").
train_to_target() {
  local k="$1" b="$2" lr="$3" ref="$4" warmup="$5" seed="$6" log="$7" extra="$8"
  rm -f "$log"
  local cmd=("$build/tools/quorum-train" "${data[@]}" --batch "$b" --lr "$lr"
    --lr-reference-batch "$ref" --warmup-epochs "$warmup" --epochs "$max_epochs"
    --evals-per-epoch "$evals" --seed "$seed" --log "$log" --log-every 0 --progress-every 0)
  if [ "$extra" != - ]; then
    local flags
    IFS=, read -r -a flags <<<"$extra"
    cmd+=("${flags[@]}")
  fi
  if [ "$k" -gt 1 ]; then
    cmd=("$build/tools/quorum-run" -n "$k" "${cmd[@]}")
  fi
  "${cmd[@]}" </dev/null >"$log.out" 2>&1 &
  local pid=$!
  local seconds=""
  while kill -0 "$pid" 2>/dev/null; do
    seconds=$(first_at_target "$log")
    if [ -n "$seconds" ]; then
      kill "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
  done
  wait "$pid" 2>/dev/null || true
  if [ -z "$seconds" ]; then
    seconds=$(first_at_target "$log")
  fi
  echo "${seconds:-never}"
}

# 3. Train (or, with --report-only, read the earlier runs' logs) and compare.
if [ "$report_only" = 1 ]; then
  : >"$out/measured.txt"
  while read -r k b lr ref warmup pred_s pred_c label pred_steps extra; do
    for log in "$out"/train_k"${k}"_b"${b}"_s*.log; do
      seed=${log##*_s}
      s=$(first_at_target "$log")
      echo "$k $b ${seed%.log} ${s:-never}" >>"$out/measured.txt"
    done
  done <"$out/configs.txt"
else
: >"$out/measured.txt"
while read -r k b lr ref warmup pred_s pred_c label pred_steps extra; do
  for seed in $seeds; do
    s=$(train_to_target "$k" "$b" "$lr" "$ref" "$warmup" "$seed" "$out/train_k${k}_b${b}_s${seed}.log" "$extra")
    echo "$k $b $seed $s" >>"$out/measured.txt"
    echo "  K=$k b=$b ($label) seed $seed: ${s% *} s (step ${s#* }) to ${target}% (predicted ${pred_s} s)" >&2
  done
done <"$out/configs.txt"
fi

"$py" - "$out/configs.txt" "$out/measured.txt" "$target" <<'PY'
import statistics, sys
configs = [l.split() for l in open(sys.argv[1])]
meas = {}
steps = {}
for k, b, seed, s, *st in (l.split() for l in open(sys.argv[2])):
    meas.setdefault((k, b), []).append(None if s == "never" else float(s))
    if st:
        steps.setdefault((k, b), []).append(int(st[0]))
print(f"predicted vs measured time and cost to {sys.argv[3]}% (median over seeds; cost = time x K rank-s)")
print(f"{'config':>14} {'B':>5} {'K':>2} {'b':>4} {'pred s':>8} {'meas s':>8} {'runs':>22} {'time err':>9} {'pred cost':>9} {'meas cost':>9} {'cost err':>9} {'pred steps':>10} {'meas steps':>10} {'steps err':>9}")
terr, cerr, serr = [], [], []
for k, b, lr, ref, warmup, ps, pc, label, pst, *_ in configs:
    runs = meas.get((k, b), [])
    ok = [x for x in runs if x is not None]
    ps, pc = float(ps), float(pc)
    if len(ok) < len(runs) or not ok:
        print(f"{label:>14} {int(k)*int(b):5d} {k:>2} {b:>4} {ps:8.1f} {'never':>8}  (target not reached in some runs)")
        continue
    m = statistics.median(ok)
    mc = m * int(k)
    te, ce = abs(ps - m) / m, abs(pc - mc) / mc
    terr.append(te), cerr.append(ce)
    spread = ",".join(f"{x:.1f}" for x in ok)
    ms = statistics.median(steps.get((k, b), [0]))
    se = abs(float(pst) - ms) / ms if ms else float("nan")
    serr.append(se)
    print(f"{label:>14} {int(k)*int(b):5d} {k:>2} {b:>4} {ps:8.1f} {m:8.1f} {spread:>22} {100*te:8.1f}% {pc:9.1f} {mc:9.1f} {100*ce:8.1f}% {float(pst):10.0f} {ms:10.0f} {100*se:8.1f}%")
if terr:
    print(f"time error: mean {100*statistics.mean(terr):.1f}%, worst {100*max(terr):.1f}% over {len(terr)} configurations")
    print(f"cost error: mean {100*statistics.mean(cerr):.1f}%, worst {100*max(cerr):.1f}%")
    print(f"steps error (the statistical model alone, free of the machine's load): mean {100*statistics.mean(serr):.1f}%, worst {100*max(serr):.1f}%")
    fastest = min(statistics.median([x for x in meas[(k, b)]]) for k, b, *_ in configs if all(x is not None for x in meas.get((k, b), [None])))
    chosen = [c for c in configs if c[7] == "chosen"][0]
    cm = meas.get((chosen[0], chosen[1]), [])
    if cm and all(x is not None for x in cm):
        m = statistics.median(cm)
        slowest = max(statistics.median(meas[(k, b)]) for k, b, *_ in configs if all(x is not None for x in meas.get((k, b), [None])))
        print(f"chosen: {m:.1f} s measured; fastest measured {fastest:.1f} s ({m / fastest:.2f}x of it), slowest {slowest:.1f} s ({slowest / m:.2f}x slower than the choice)")
PY
