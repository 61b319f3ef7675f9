#!/bin/bash
# files_test.sh: quorum-train's and quorum-bench's files under hostile paths
# and failing disks. A FIFO as --checkpoint is refused (never replaced); a
# FIFO or /dev/zero as --resume fails at once, and so does a FIFO as --data-dir
# or as a data file in it; a write error on --log, on
# stdout (/dev/full) or on quorum-bench's --json-out gives a non-zero exit
# naming the file; SIGTERM during a run with --checkpoint saves it at the next
# step, exits 143, and the resumed run ends bit for bit like an uninterrupted one.
# Under quorum-run (third argument), SIGTERM to the launcher stops both ranks
# the same way.
# Usage: files_test.sh path/to/quorum-train path/to/quorum-bench [path/to/quorum-run]
set -u
train="$1" bench="$2" run="${3:-}"
source "$(dirname "$0")/../support/checks.sh"
unset SLURM_STEP_NUM_TASKS PMI_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMIX_RANK QUORUM_RANK
common=(--data synthetic --batch 32 --epochs 2 --seed 5 --progress-every 0)

# expect_error "description" "text in output" program args...
expect_error() {
  local what="$1" text="$2"
  shift 2
  timeout 60 "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then fail "$what: still running after 60 s"; return; fi
  if [ $rc -eq 0 ]; then fail "$what: exit status 0"; return; fi
  grep -q -- "$text" "$tmp/out" || fail "$what: no '$text' in: $(cat "$tmp/out")"
}

mkfifo "$tmp/fifo"
expect_error "FIFO as --checkpoint" "is a FIFO, not a regular file" \
  "$train" "${common[@]}" --checkpoint "$tmp/fifo"
[ -p "$tmp/fifo" ] || fail "the FIFO given as --checkpoint was replaced"
expect_error "FIFO as --resume" "not a regular file" "$train" "${common[@]}" --resume "$tmp/fifo"
expect_error "/dev/zero as --resume" "not a regular file" "$train" "${common[@]}" --resume /dev/zero
expect_error "FIFO as --data-dir" "is a FIFO, not a folder" \
  "$train" --data fashion-mnist --data-dir "$tmp/fifo" --max-steps 1
mkdir "$tmp/data"
mkfifo "$tmp/data/train-images-idx3-ubyte.gz"
expect_error "FIFO as a data file" "train-images-idx3-ubyte.gz: is a FIFO, not a regular file" \
  "$train" --data fashion-mnist --data-dir "$tmp/data" --no-verify-data --max-steps 1
rm -r "$tmp/data"
left=$(ls "$tmp" | grep -v -x -e fifo -e out)
[ -z "$left" ] || fail "files left behind: $left"

expect_error "--log on a full disk" "--log /dev/full: cannot write" \
  "$train" "${common[@]}" --max-steps 3 --log /dev/full
timeout 60 "$train" "${common[@]}" --max-steps 3 >/dev/full 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "quorum-train to a full stdout: exit status $rc"
grep -q "stdout: cannot write" "$tmp/err" || fail "full stdout not reported: $(cat "$tmp/err")"
expect_error "quorum-bench --json-out on a full disk" "--json-out file '/dev/full'" \
  "$bench" -b 8 -e 8 -n 2 -w 1 --json-out /dev/full
timeout 60 "$bench" -b 8 -e 8 -n 2 -w 1 >/dev/full 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "quorum-bench to a full stdout: exit status $rc"
grep -q "cannot write stdout" "$tmp/err" || fail "full stdout not reported: $(cat "$tmp/err")"

# SIGTERM once the run is training (its log shows a step): checkpoint, exit 143.
long=(--data synthetic --batch 32 --epochs 40 --seed 5 --progress-every 0)
"$train" "${long[@]}" --checkpoint "$tmp/ckpt" --log "$tmp/log" --log-every 1 >"$tmp/part" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q '"event":"step"' "$tmp/log" 2>/dev/null && break
  sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "SIGTERM with --checkpoint: exit status $rc: $(cat "$tmp/part")"
grep -q "stopped by SIGTERM at step" "$tmp/part" || fail "stop not reported: $(cat "$tmp/part")"
step=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\).*/\1/p' "$tmp/part")
if [ -n "$step" ] && [ -f "$tmp/ckpt" ]; then
  "$train" "${long[@]}" --max-steps $((step + 10)) >"$tmp/whole" 2>&1 || fail "whole run"
  "$train" "${long[@]}" --max-steps $((step + 10)) --resume "$tmp/ckpt" >"$tmp/rest" 2>&1 ||
    fail "resume after SIGTERM: $(cat "$tmp/rest")"
  want=$(grep -o 'done:.*' "$tmp/whole")
  got=$(grep -o 'done:.*' "$tmp/rest")
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "resumed after SIGTERM: '$got', uninterrupted '$want'"
else
  fail "no checkpoint after SIGTERM: $(cat "$tmp/part")"
fi
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary checkpoint left behind: $(ls "$tmp")"

if [ -n "$run" ]; then
  "$run" -n 2 -- "$train" "${long[@]}" --checkpoint "$tmp/ckpt2" --log "$tmp/log2" --log-every 1 \
    >"$tmp/part2" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q '"event":"step"' "$tmp/log2" 2>/dev/null && break
    sleep 0.05
  done
  kill -TERM $pid
  wait $pid
  rc=$?
  [ $rc -eq 143 ] || fail "2 ranks, SIGTERM to quorum-run: exit status $rc: $(cat "$tmp/part2")"
  [ "$(grep -c 'quorum-train: stopped by SIGTERM at step' "$tmp/part2")" -eq 2 ] ||
    fail "2 ranks: not both stopped: $(cat "$tmp/part2")"
  [ -f "$tmp/ckpt2" ] || fail "2 ranks: no checkpoint after SIGTERM: $(cat "$tmp/part2")"
fi
echo "stopped by SIGTERM at step $step; the resumed run matched"
finish "trainer files"
