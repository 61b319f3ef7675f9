#!/bin/bash
# distributed_test.sh QUORUM_RUN QUORUM_TRAIN: data-parallel training as processes.
#  1. 2 ranks at batch 16 under sync end on the same parameters (within float
#     tolerance) as 1 rank at batch 32: same examples per step, averaged gradient;
#     and on exactly those of one allreduce per step with --bucket-kb (the
#     average of 2 floats does not depend on how the gradient is cut).
#  2. sync, solo and majority with injected imbalance keep replicas bitwise
#     identical every epoch (quorum-train compares checksums; exit 3 if not).
#     With --evals-per-epoch 3 the ranks score the test set (split among them)
#     twice inside each epoch too: 6 points on the summary's curve, in order,
#     and 4 "eval" records in the JSON log.
#  3. --sync-epochs makes a partial run synchronous through its first epochs.
#  4. A rank that falls behind skips the steps the others ran (catch-up), or
#     computes them all with --no-catch-up.
#  5. A diverging majority run stops on every rank with a clear error (and the
#     partial object, never destroyed on that path, is released at finalize).
#  6. Ranks given different options, or other copies of the data, stop before
#     training, each naming the option or the example count.
#  7. A rank that cannot set up stops every rank at once, each naming it.
set -u
run=$1
train=$2
source "$(dirname "$0")/../support/checks.sh"
common=(--data synthetic --model fm-s --epochs 2 --lr 0.02 --seed 5 --progress-every 0)
partial=(--max-staleness 4)  # solo and majority only: sync refuses their options

param_sum() { grep -o 'params crc32 [0-9a-f]* sum [-0-9.e]*' "$1" | tail -1 | awk '{print $5}'; }

# The ref backend (the oracle): the cpu backend's convolution algorithms depend
# on the batch size, which changes float rounding.
eq=(--backend ref --max-steps 6 --lr-decay cosine)
"$train" "${common[@]}" "${eq[@]}" --batch 32 >"$tmp/one" 2>&1 || fail "1 rank: $(tail -3 "$tmp/one")"
"$run" -n 2 --timeout 300 -- "$train" "${common[@]}" "${eq[@]}" --batch 16 --reduce sync >"$tmp/two" 2>&1 ||
  fail "2 ranks sync: $(tail -5 "$tmp/two")"
a=$(param_sum "$tmp/one")
b=$(param_sum "$tmp/two")
echo "parameter sum: 1 rank x 32 = $a, 2 ranks x 16 = $b"
python3 -c "import sys; a, b = float('$a'), float('$b'); sys.exit(0 if abs(a - b) <= 1e-5 * max(1.0, abs(a)) else 1)" ||
  fail "parameters differ: $a vs $b"
# The same with the gradient allreduced in buckets during the backward pass.
"$run" -n 2 --timeout 300 -- "$train" "${common[@]}" "${eq[@]}" --batch 16 --reduce sync \
  --bucket-kb 16 >"$tmp/buckets" 2>&1 || fail "2 ranks sync, buckets: $(tail -5 "$tmp/buckets")"
c=$(param_sum "$tmp/buckets")
n=$(grep -o 'bucket_allreduces=[0-9]*' "$tmp/buckets" | cut -d= -f2)
echo "parameter sum: 2 ranks x 16 in ${n:-?} buckets = $c"
[ "${n:-0}" -gt 1 ] || fail "buckets: ${n:-no} allreduces per step, expected several"
[ "$c" = "$b" ] || fail "buckets: parameters differ from one allreduce per step: $c vs $b"

for mode in sync solo majority; do
  extra=()
  [ $mode != sync ] && extra=("${partial[@]}")
  for np in 2 3; do
    "$run" -n $np --timeout 300 -- "$train" "${common[@]}" "${extra[@]}" --batch 16 --reduce $mode \
      --imbalance paper:3:1 --evals-per-epoch 3 --log "$tmp/$mode$np.jsonl" >"$tmp/$mode$np" 2>&1 ||
      fail "$mode on $np ranks: $(tail -5 "$tmp/$mode$np")"
    grep -q "replicas=agree" "$tmp/$mode$np" || fail "$mode on $np ranks: no replicas=agree"
    curve=$(grep -o 'curve=[^ ]*' "$tmp/$mode$np" | cut -d= -f2)
    python3 -c "import sys; t = [float(p.split('s:')[0]) for p in '$curve'.split(',')]
sys.exit(0 if len(t) == 6 and t == sorted(t) and t[0] > 0 else 1)" ||
      fail "$mode on $np ranks, 3 evaluations per epoch: curve '$curve'"
    [ "$(grep -c '"event":"eval"' "$tmp/$mode$np.jsonl")" -eq 4 ] ||
      fail "$mode on $np ranks: not 4 eval records in the log"
    # Late gradients are reported with their lateness (none under sync).
    late=$(grep -o 'carried [0-9]* ([0-9.]* steps late)' "$tmp/$mode$np" | head -1)
    [ -n "$late" ] || fail "$mode on $np ranks: no 'carried N (X steps late)' in the epoch line"
    if [ $mode = sync ]; then
      [ "$late" = "carried 0 (0.00 steps late)" ] || fail "sync on $np ranks: $late"
    fi
    grep "summary" "$tmp/$mode$np"
  done
done
# --sync-epochs: the partial run reduces synchronously through its first epoch
# (every rank fresh, nothing carried), replicas still agree.
"$run" -n 3 --timeout 300 -- "$train" "${common[@]}" "${partial[@]}" --batch 16 --reduce solo --sync-epochs 1 \
  --imbalance paper:3:1 >"$tmp/sync_start" 2>&1 || fail "solo --sync-epochs 1: $(tail -5 "$tmp/sync_start")"
grep -q "replicas=agree" "$tmp/sync_start" || fail "solo --sync-epochs 1: no replicas=agree"
grep "epoch 1:" "$tmp/sync_start" | grep -q "fresh 3.00 carried 0 (0.00 steps late)" ||
  fail "solo --sync-epochs 1: epoch 1 was not synchronous: $(grep 'epoch 1:' "$tmp/sync_start")"

# Catching up: rank 0 sleeps 20 ms every step it computes, so the others run
# the rounds without it; it then applies those steps without computing them
# (skipped > 0), or with --no-catch-up computes every one (skipped 0, more of
# its gradients late). Replicas agree either way.
for catch in on off; do
  extra=()
  [ $catch = off ] && extra=(--no-catch-up)
  "$run" -n 3 --timeout 300 -- "$train" "${common[@]}" "${partial[@]}" --batch 16 --reduce solo \
    --imbalance slow:0:20 "${extra[@]}" >"$tmp/catch_$catch" 2>&1 ||
    fail "solo, slow rank 0, catch-up $catch: $(tail -5 "$tmp/catch_$catch")"
  grep -q "replicas=agree" "$tmp/catch_$catch" || fail "catch-up $catch: no replicas=agree"
  skipped=$(grep "epoch 2:" "$tmp/catch_$catch" | grep -o 'skipped [0-9]*' | awk '{print $2}')
  echo "slow rank 0, catch-up $catch: skipped ${skipped:-?} of 42 steps in epoch 2"
  if [ $catch = on ]; then
    [ "${skipped:-0}" -gt 0 ] || fail "catch-up on: the slow rank skipped no step"
  else
    [ "${skipped:-x}" = 0 ] || fail "catch-up off: the slow rank skipped ${skipped:-?} steps"
  fi
done

# Different options on one rank (here its batch, or its bucket size): every
# rank stops before training with a message naming the option, no hang.
for opt in batch bucket-kb; do
  if "$run" -n 3 --timeout 120 -- bash -c "exec \"\$0\" \"\$@\" --$opt \$((16 + (QUORUM_RANK == 2)))" \
    "$train" "${common[@]}" --reduce sync >"$tmp/differ_$opt" 2>&1; then
    fail "--$opt differing on rank 2: exit status 0"
  fi
  [ "$(grep -c "quorum-train: .*different settings: '${opt/-/_}'.* differs on ranks 2" \
    "$tmp/differ_$opt")" -eq 3 ] || fail "--$opt differing on rank 2: $(tail -6 "$tmp/differ_$opt")"
done

# Ranks with other copies of the data (here 64 training examples on rank 2,
# 96 elsewhere; the folder is each rank's own) would take other steps per
# epoch: they stop before training, naming the count.
python3 "$(dirname "$0")/make_idx.py" "$tmp/idx96" 96 32
python3 "$(dirname "$0")/make_idx.py" "$tmp/idx64" 64 32
if "$run" -n 3 --timeout 120 -- bash -c "exec \"\$0\" \"\$@\" --data-dir $tmp/idx\$((96 - 32 * (QUORUM_RANK == 2)))" \
  "$train" --data fashion-mnist --no-verify-data --batch 16 --reduce sync >"$tmp/differ_data" 2>&1; then
  fail "other data on rank 2: exit status 0"
fi
[ "$(grep -c "quorum-train: .*different settings: 'train_examples' (here [0-9]*).* differs on ranks 2" \
  "$tmp/differ_data")" -eq 3 ] || fail "other data on rank 2: $(tail -6 "$tmp/differ_data")"

# A rank that cannot set up (here its --log) stops every rank at once, each
# naming it, rather than leaving them to wait until the timeout (20 s here).
start=$SECONDS
if "$run" -n 3 --timeout 120 -- bash -c "exec \"\$0\" \"\$@\" --log $tmp/\$([ \$QUORUM_RANK = 2 ] && echo none/)log" \
  "$train" "${common[@]}" --batch 16 --reduce sync >"$tmp/setup" 2>&1; then
  fail "rank 2 cannot open its log: exit status 0"
fi
took=$((SECONDS - start))
[ "$(grep -c "quorum-train: .*rank 2 failed to set up: .*--log $tmp/none/log: cannot open" "$tmp/setup")" -eq 3 ] ||
  fail "rank 2 cannot open its log: $(tail -6 "$tmp/setup")"
[ $took -lt 15 ] || fail "rank 2 cannot open its log: the ranks stopped after $took s"

# Divergence: every rank reports it, quorum-run fails, nothing crashes.
if "$run" -n 3 --timeout 300 -- "$train" --data synthetic --model fm-s --epochs 2 --lr 1e6 \
  --seed 5 --progress-every 0 --batch 16 --reduce majority >"$tmp/diverge" 2>&1; then
  fail "diverging run exited 0"
fi
[ "$(grep -c 'quorum-train: .*training diverged' "$tmp/diverge")" -eq 3 ] ||
  fail "diverging run: not every rank reported it: $(tail -8 "$tmp/diverge")"
grep -qi "segmentation\|signal 11" "$tmp/diverge" && fail "diverging run crashed: $(tail -8 "$tmp/diverge")"

finish distributed
