#!/bin/bash
# partial_training.sh: time-to-accuracy of data-parallel fm-s training on
# Fashion-MNIST with sync, majority and solo gradient reduction, one run each,
# one after the other, under eager-SGD's load imbalance (per step K ranks drawn
# from a shared seed sleep D ms). Prints each run's training time and final
# accuracy, and when it reached the sync run's final accuracy less 0.5 points.
#
# Usage: perf/partial_training.sh [--build DIR] [--ranks N] [--epochs N]
#          [--train-limit N] [--delay MS] [--drawn K|K1-K2] [--seed N]
#          [--evals N] [--runs "sync majority solo"] [--keep DIR] [--plot OUT.png]
#          [-- extra quorum-train arguments]
# Defaults: 4 ranks, 5 epochs, paper:20:1-2, seed 1, 4 evaluations per epoch,
# and the runs "sync majority:epochs=6:carry=0.5
# solo:delay=8:epochs=7:scale=sqrt:carry=0.5"
# (the recipes that reached the issue's target most often; trainer/README.md).
# A run is sync, majority or solo, with ":drop" for --drop-late, ":carry=W" for
# --carry-weight W, ":no-catch-up" for --no-catch-up, ":delay=MS" for
# --activation-delay-ms MS, ":sync=E" for E synchronous epochs first (default
# 0.5), ":scale=S" for --partial-scale S, ":ema=D" for --ema-decay D (the
# evaluations score a moving average of the parameters) and ":epochs=N" for its
# own number of epochs (e.g. majority:drop, majority:carry=0.5,
# solo:drop:delay=2:epochs=8, solo:drop:scale=sqrt, sync:ema=0.99).
# Recipe for all: cosine decay after a half-epoch warmup; the partial runs
# reduce synchronously during that warmup (--sync-epochs 0.5). --evals N scores
# the test set N times per epoch (--evals-per-epoch; the last at its end), so
# that when a run reached the mark is seen within 1/N of an epoch. --keep DIR
# keeps each run's whole output there (DIR/LABEL, e.g. DIR/majority-drop) and
# its JSON-lines log (DIR/LABEL.jsonl); a run listed again is LABEL-2, and so
# on. --plot draws every run's loss and test accuracy against training time
# (perf/plot_training.py; target: sync's final accuracy less 0.5 points, when
# sync ran).
set -eu
build=build ranks=4 epochs=5 limit=0 delay=20 drawn=1-2 seed=1 evals=4 keep= plot=
runs="sync majority:epochs=6:carry=0.5 solo:delay=8:epochs=7:scale=sqrt:carry=0.5"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --train-limit) limit="$2"; shift 2 ;;
    --delay) delay="$2"; shift 2 ;;
    --drawn) drawn="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --evals) evals="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --plot) plot="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

labels=()
for run in $runs; do
  mode=${run%%:*}
  args=(--reduce "$mode")
  sync_epochs=0.5
  run_epochs=$epochs
  for opt in $(echo "${run#"$mode"}" | tr ':' ' '); do
    case "$opt" in
      drop) args+=(--drop-late) ;;
      carry=*) args+=(--carry-weight "${opt#carry=}") ;;
      no-catch-up) args+=(--no-catch-up) ;;
      delay=*) args+=(--activation-delay-ms "${opt#delay=}") ;;
      scale=*) args+=(--partial-scale "${opt#scale=}") ;;
      ema=*) args+=(--ema-decay "${opt#ema=}") ;;
      epochs=*) run_epochs=${opt#epochs=} ;;
      sync=*) sync_epochs=${opt#sync=} ;;
      *) echo "unknown run option '$opt' in $run" >&2; exit 2 ;;
    esac
  done
  [ "$mode" != sync ] && args+=(--sync-epochs "$sync_epochs")
  # A run listed again gets its own label (solo, solo-2, ...) and outputs.
  label=${run//:/-} n=1
  while [[ " ${labels[*]-} " == *" $label "* ]]; do n=$((n + 1)) label=${run//:/-}-$n; done
  labels+=("$label")
  echo "== $run: $ranks ranks, imbalance paper:$delay:$drawn, $run_epochs epochs" >&2
  "$build/tools/quorum-run" -n "$ranks" -- "$build/tools/quorum-train" --data fashion-mnist \
    --model fm-s --batch 64 --epochs "$run_epochs" --train-limit "$limit" --seed "$seed" \
    --lr-decay cosine --warmup-epochs 0.5 --imbalance "paper:$delay:$drawn" \
    --evals-per-epoch "$evals" --progress-every 0 --log "$out/$label.jsonl" "${args[@]}" "$@" > "$out/$label"
  grep -E "epoch [0-9]+:|summary" "$out/$label" | sed 's/^\[0\] //' | cut -c1-160 >&2
done
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  for label in "${labels[@]}"; do cp "$out/$label" "$out/$label.jsonl" "$keep/"; done
fi
if [ -n "$plot" ]; then
  target=()
  if [ -f "$out/sync" ]; then
    acc=$(grep -o 'test_accuracy=[0-9.]*' "$out/sync" | tail -1 | cut -d= -f2)
    [ -n "$acc" ] && target=(--target "$(python3 -c "print(round($acc - 0.5, 2))")")
  fi
  # Debian's python3 has matplotlib; another python3 first in PATH may not.
  py=python3
  [ -x /usr/bin/python3 ] && py=/usr/bin/python3
  logs=()
  for label in "${labels[@]}"; do logs+=("$out/$label.jsonl"); done
  "$py" perf/plot_training.py -o "$plot" "${target[@]}" "${logs[@]}" >&2
fi
python3 scripts/compare_runs.py "$out" "${labels[@]}"
