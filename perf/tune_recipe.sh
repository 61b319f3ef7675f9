#!/usr/bin/env bash
# tune_recipe.sh: test accuracy at a large batch with the standard recipe
# (linear scaling + warmup, quorum-train's --lr-reference-batch) against the
# tuner's (square-root scaling), at equal epochs, one process.
#
#   perf/tune_recipe.sh [--build DIR] [--batch B] [--epochs N] [--train-limit N]
#                       [--test-limit N] [--seeds "1 2"] [--lr LR] [--warmup-epochs W]
#
# Both start from --lr at batch 64 (quorum-train's default reference):
# linear: lr x B / 64 with a W-epoch warmup; sqrt: lr x sqrt(B / 64), no warmup.
# Prints each run's final test accuracy and the mean difference.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build batch=512 epochs=3 train_limit=20000 test_limit=2000 seeds="1 2" lr=0.02 warmup=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --train-limit) train_limit="$2"; shift 2 ;;
    --test-limit) test_limit="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --warmup-epochs) warmup="$2"; shift 2 ;;
    *) echo "tune_recipe.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
done
sqrt_lr=$(awk -v l="$lr" -v b="$batch" 'BEGIN { printf "%.6g", l * sqrt(b / 64) }')
common=(--train-limit "$train_limit" --test-limit "$test_limit" --batch "$batch" --epochs "$epochs"
  --progress-every 0)
echo "batch $batch, $epochs epochs, $train_limit training examples; load $(cut -d' ' -f1-3 /proc/loadavg)"
sum_lin=0 sum_sqrt=0 n=0
for seed in $seeds; do
  # A diverged run (the standard recipe's failure at large batches) scores 10%.
  lin=$("$build/tools/quorum-train" "${common[@]}" --seed "$seed" --lr "$lr" \
    --lr-reference-batch 64 --warmup-epochs "$warmup" 2>&1 |
    sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p' | tail -1)
  sq=$("$build/tools/quorum-train" "${common[@]}" --seed "$seed" --lr "$sqrt_lr" \
    --lr-reference-batch "$batch" 2>&1 | sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p' | tail -1)
  lin=${lin:-10} sq=${sq:-10}
  echo "seed $seed: linear+warmup (lr $(awk -v l="$lr" -v b="$batch" 'BEGIN{print l*b/64}')) ${lin}%, sqrt (lr $sqrt_lr) ${sq}%"
  sum_lin=$(awk -v a="$sum_lin" -v b="$lin" 'BEGIN{print a+b}')
  sum_sqrt=$(awk -v a="$sum_sqrt" -v b="$sq" 'BEGIN{print a+b}')
  n=$((n + 1))
done
awk -v l="$sum_lin" -v s="$sum_sqrt" -v n="$n" \
  'BEGIN { printf "mean: linear+warmup %.2f%%, sqrt %.2f%%, sqrt - linear = %+.2f points\n", l/n, s/n, (s-l)/n }'
