#!/bin/bash
# partial_training.sh: time to accuracy of data-parallel fm-s training on
# Fashion-MNIST with sync and partial (majority, solo, quorum:K) gradient
# reduction under eager-SGD's load imbalance (per step K ranks drawn from a
# shared seed sleep D ms). For every seed the runs go one after the other,
# sync first, so each partial run is compared with the sync run of its own
# seed, side by side. Per run (scripts/compare_runs.py): the time to reach the
# target (sync's final accuracy less 0.5 points), sync's own time to first
# reach it and their ratio (the strict speedup), the epochs to the target and
# the statistical efficiency (sync's epochs to it / the run's) next to the
# per-epoch throughput gain, and the equal-epochs view (time ratio at sync's
# number of epochs, accuracy difference there); then, over the seeds, the
# median and the worst of each, and how many seeds met 1.27x with the final
# accuracy at or above the target.
#
# Usage: perf/partial_training.sh [--build DIR] [--ranks N] [--epochs N]
#          [--train-limit N] [--delay MS] [--drawn K|K1-K2] [--seeds N]
#          [--seed S ...] [--evals N] [--runs "sync majority solo"] [--keep DIR]
#          [--plot OUT.png] [-- extra quorum-train arguments]
# Defaults: 4 ranks, 5 epochs, paper:20:1-2, 10 seeds drawn at random for this
# sitting (printed; --seed S, repeatable, runs the seeds given instead, e.g.
# to rerun a sitting), 4 evaluations per epoch, and the runs "sync
# majority:epochs=6:carry=0.5 solo:delay=8:epochs=7:scale=sqrt:carry=0.5"
# (trainer/README.md).
# A run is sync, majority, solo or quorum:K (K of P ranks activate a round),
# with ":drop" for --drop-late, ":carry=W" for --carry-weight W,
# ":no-catch-up" for --no-catch-up, ":delay=MS" for --activation-delay-ms MS,
# ":sync=E" for E synchronous epochs first (default 0.5), ":scale=S" for
# --partial-scale S, ":ema=D" for --ema-decay D (the evaluations score a moving
# average of the parameters), ":arg=FLAG[=V]" for any other quorum-train
# option --FLAG [V] (e.g. majority:arg=momentum=0.8) and ":epochs=N" for its
# own number of epochs (e.g. majority:drop, quorum:3:epochs=6,
# solo:drop:delay=2:epochs=8, solo:drop:scale=sqrt, sync:ema=0.99).
# Recipe for all: cosine decay after a half-epoch warmup; the partial runs
# reduce synchronously during that warmup (--sync-epochs 0.5). --evals N scores
# the test set N times per epoch (--evals-per-epoch; the last at its end), so
# that when a run reached the mark is seen within 1/N of an epoch. --keep DIR
# keeps each run's whole output there (DIR/seed-S/LABEL, e.g.
# DIR/seed-7/majority-drop) and its JSON-lines log (LABEL.jsonl); a run listed
# again is LABEL-2, and so on. --plot draws the first seed's runs: loss and
# test accuracy against training time (perf/plot_training.py; target: sync's
# final accuracy less 0.5 points, when sync ran).
set -eu
build=build ranks=4 epochs=5 limit=0 delay=20 drawn=1-2 nseeds=10 seeds= evals=4 keep= plot=
runs="sync majority:epochs=6:carry=0.5 solo:delay=8:epochs=7:scale=sqrt:carry=0.5"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --train-limit) limit="$2"; shift 2 ;;
    --delay) delay="$2"; shift 2 ;;
    --drawn) drawn="$2"; shift 2 ;;
    --seed) seeds="$seeds $2"; shift 2 ;;
    --seeds) nseeds="$2"; shift 2 ;;
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
if [ -z "$seeds" ]; then
  # Drawn anew every sitting: no recipe gets tuned to a fixed list of seeds.
  seeds=$(shuf -i 1-999999 -n "$nseeds" | tr '\n' ' ')
  echo "== seeds drawn for this sitting: $seeds" >&2
fi
seeds=$(echo $seeds)

for seed in $seeds; do
  mkdir -p "$out/seed-$seed"
  labels=()
  for run in $runs; do
    mode=${run%%:*}
    reduce=$mode rest=${run#"$mode"}
    if [ "$mode" = quorum ]; then
      k=${rest#:}; k=${k%%:*}
      reduce=quorum:$k rest=${rest#:"$k"}
    fi
    args=(--reduce "$reduce")
    sync_epochs=0.5
    run_epochs=$epochs
    for opt in $(echo "$rest" | tr ':' ' '); do
      case "$opt" in
        drop) args+=(--drop-late) ;;
        carry=*) args+=(--carry-weight "${opt#carry=}") ;;
        no-catch-up) args+=(--no-catch-up) ;;
        delay=*) args+=(--activation-delay-ms "${opt#delay=}") ;;
        scale=*) args+=(--partial-scale "${opt#scale=}") ;;
        ema=*) args+=(--ema-decay "${opt#ema=}") ;;
        epochs=*) run_epochs=${opt#epochs=} ;;
        sync=*) sync_epochs=${opt#sync=} ;;
        arg=*) a=${opt#arg=}; [[ $a == *=* ]] && args+=("--${a%%=*}" "${a#*=}") || args+=("--$a") ;;
        *) echo "unknown run option '$opt' in $run" >&2; exit 2 ;;
      esac
    done
    [ "$mode" != sync ] && args+=(--sync-epochs "$sync_epochs")
    # A run listed again gets its own label (solo, solo-2, ...) and outputs.
    label=${run//:/-} n=1
    while [[ " ${labels[*]-} " == *" $label "* ]]; do n=$((n + 1)) label=${run//:/-}-$n; done
    labels+=("$label")
    echo "== seed $seed, $run: $ranks ranks, imbalance paper:$delay:$drawn, $run_epochs epochs" >&2
    "$build/tools/quorum-run" -n "$ranks" -- "$build/tools/quorum-train" --data fashion-mnist \
      --model fm-s --batch 64 --epochs "$run_epochs" --train-limit "$limit" --seed "$seed" \
      --lr-decay cosine --warmup-epochs 0.5 --imbalance "paper:$delay:$drawn" \
      --evals-per-epoch "$evals" --progress-every 0 --log "$out/seed-$seed/$label.jsonl" "${args[@]}" "$@" \
      > "$out/seed-$seed/$label"
    grep -E "epoch [0-9]+:|summary" "$out/seed-$seed/$label" | sed 's/^\[0\] //' | cut -c1-160 >&2
  done
done
first=$out/seed-${seeds%% *}
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  cp -r "$out"/seed-* "$keep/"
fi
if [ -n "$plot" ]; then
  target=()
  if [ -f "$first/sync" ]; then
    acc=$(grep -o 'test_accuracy=[0-9.]*' "$first/sync" | tail -1 | cut -d= -f2)
    [ -n "$acc" ] && target=(--target "$(python3 -c "print(round($acc - 0.5, 2))")")
  fi
  # Debian's python3 has matplotlib; another python3 first in PATH may not.
  py=python3
  [ -x /usr/bin/python3 ] && py=/usr/bin/python3
  logs=()
  for label in "${labels[@]}"; do logs+=("$first/$label.jsonl"); done
  "$py" perf/plot_training.py -o "$plot" "${target[@]}" "${logs[@]}" >&2
fi
echo "== seeds of this sitting: $seeds" >&2
python3 scripts/compare_runs.py --seeds "${seeds// /,}" "$out" "${labels[@]}"
