#!/bin/bash
# stop_ranks_test.sh: quorum-train --checkpoint on 2 ranks under quorum-run,
# with the stop signal delivered to the ranks themselves, not to quorum-run:
#   1. SIGTERM to rank 1 only (rank 0, which writes the checkpoint, gets none):
#      both ranks stop at the same step, the checkpoint holds that step, every
#      rank and quorum-run exit 143, and the resumed run ends bit for bit like
#      an uninterrupted one;
#   2. SIGINT to rank 0, then SIGTERM to rank 1 a moment later: again one stop
#      step for both, its checkpoint, and one exit status (143 if SIGTERM got
#      into the agreement, 130 if the stop was agreed on before it arrived).
#      Under --keep-going, so that quorum-run's own SIGTERM to the rank left
#      (after the first one exits) cannot be a second signal that kills it.
# A short QUORUM_TIMEOUT_MS makes a rank left waiting in a collective fail fast.
# Usage: stop_ranks_test.sh path/to/quorum-run path/to/quorum-train
set -u
run="$1" train="$2"
source "$(dirname "$0")/../support/checks.sh"
unset SLURM_STEP_NUM_TASKS PMI_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMIX_RANK QUORUM_RANK
export QUORUM_TIMEOUT_MS=5000
long=(--data synthetic --train-limit 512 --test-limit 256 --batch 32 --epochs 200 --seed 5
  --progress-every 0)

# The pid of rank $2 among quorum-run $1's children.
rank_pid() {
  local p
  for p in $(ps -o pid= --ppid "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "QUORUM_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}

# start NAME [quorum-run options]: 2 ranks training in the background;
# waits until they train.
start() {
  local name="$1"
  shift
  "$run" -n 2 --timeout 60 "$@" -- "$train" "${long[@]}" --checkpoint "$tmp/$name.ckpt" \
    --log "$tmp/$name.log" --log-every 1 >"$tmp/$name.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q '"event":"step"' "$tmp/$name.log" 2>/dev/null && break
    sleep 0.05
  done
  rank0=$(rank_pid $pid 0) rank1=$(rank_pid $pid 1)
  [ -n "$rank0" ] && [ -n "$rank1" ] || fail "$name: ranks not found under quorum-run $pid"
}

# check NAME SIGNAL STATUS: after the run, both ranks report a stop by SIGNAL
# at the same step (printed in $step), the checkpoint is at that step, and
# quorum-run and both ranks exited with STATUS.
check() {
  local name="$1" sig="$2" status="$3" out="$tmp/$1.out"
  [ $rc -eq "$status" ] || fail "$name: quorum-run exit status $rc, expected $status: $(cat "$out")"
  local steps
  steps=$(sed -n "s/.*quorum-train: stopped by $sig at step \([0-9]*\).*/\1/p" "$out" | sort -u)
  [ "$(grep -c "quorum-train: stopped by $sig at step" "$out")" -eq 2 ] &&
    [ "$(echo "$steps" | wc -l)" -eq 1 ] || fail "$name: not both stopped by $sig at one step: $(cat "$out")"
  for r in 0 1; do
    grep -q "rank $r exited with status $status" "$out" ||
      fail "$name: rank $r did not exit with status $status: $(cat "$out")"
  done
  step=$(echo "$steps" | head -1)
  [ -f "$tmp/$name.ckpt" ] || { fail "$name: no checkpoint"; return; }
  # A resume to that very step has nothing left: the checkpoint is at it.
  "$run" -n 2 --timeout 60 -- "$train" "${long[@]}" --max-steps "$step" \
    --resume "$tmp/$name.ckpt" >"$tmp/$name.at" 2>&1 || fail "$name: resume: $(cat "$tmp/$name.at")"
  grep -q "is at step $step," "$tmp/$name.at" ||
    fail "$name: the checkpoint is not at step $step: $(cat "$tmp/$name.at")"
}

# 1. Only rank 1 gets the signal.
start one
kill -TERM "$rank1"
wait $pid
rc=$?
check one SIGTERM 143
echo "1: SIGTERM to rank 1 only: both stopped at step $step"
if [ -n "$step" ]; then
  end=$((step + 3))
  "$run" -n 2 --timeout 60 -- "$train" "${long[@]}" --max-steps $end >"$tmp/whole" 2>&1 ||
    fail "uninterrupted run: $(cat "$tmp/whole")"
  "$run" -n 2 --timeout 60 -- "$train" "${long[@]}" --max-steps $end --resume "$tmp/one.ckpt" \
    >"$tmp/rest" 2>&1 || fail "resumed run: $(cat "$tmp/rest")"
  want=$(grep -o 'done:.*' "$tmp/whole")
  got=$(grep -o 'done:.*' "$tmp/rest")
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "resumed: '$got', uninterrupted: '$want'"
fi

# 2. Different signals to the two ranks, at different times.
start two --keep-going
kill -INT "$rank0"
sleep 0.1
kill -TERM "$rank1" 2>/dev/null
wait $pid
rc=$?
if [ $rc -eq 143 ]; then check two SIGTERM 143; else check two SIGINT 130; fi
echo "2: SIGINT to rank 0, SIGTERM to rank 1: both stopped at step $step (exit $rc)"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary checkpoint left behind: $(ls "$tmp")"
finish "stop on several ranks"
