#!/usr/bin/env bash
# link_flap.sh PROBE: 2 simulated hosts x 2 ranks run checked collectives
# under mpirun (link_flap_probe: allreduces of 8 B, 64 KiB and 4 MiB and a
# solo partial round with carry per iteration, for LINK_FLAP_LOOP_MS, default
# 9 s) and the second host's link goes down for LINK_FLAP_OUTAGE_MS (default
# 2500) in the middle of the loop, then comes back, well below
# QUORUM_TIMEOUT_MS (10 s here). Asserts that every rank finishes every call
# with QUORUM_OK and exact values (and partial conservation after the flush),
# that some call on every rank blocked longer than the outage (so the outage
# hit the job mid-call, and the job came through it), that each host's link
# carried at least the 4 MiB allreduces' volume both ways, and that mpirun
# exits 0. Needs root (skips with 77 otherwise).
set -euo pipefail
probe=$1
source "$(dirname "$0")/common.sh"
multihost_up 2
export QUORUM_TIMEOUT_MS=${LINK_FLAP_TIMEOUT_MS:-10000}
loop_ms=${LINK_FLAP_LOOP_MS:-9000}
outage_ms=${LINK_FLAP_OUTAGE_MS:-2500}
layout=${P}1:2,${P}2:2
np=4
reports=$work/reports
mkdir -p "$reports"
read -r rx1 tx1 < <(link_bytes_each 1)
read -r rx2 tx2 < <(link_bytes_each 2)
start=$(date +%s%N)
MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-60} mpirun_on "$layout" "$np" "$probe" "$reports" "$loop_ms" \
  >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 150); do
  [ "$(grep -c ready "$work/out" || true)" -ge "$np" ] && break
  sleep 0.1
done
if [ "$(grep -c ready "$work/out" || true)" -lt "$np" ]; then
  wait "$pid" || true
  echo "FAIL: the $np ranks did not start:"
  cat "$work/out"
  exit 1
fi
sleep 1.5
ip link set "${P}v2" down
down_at=$(date +%s%N)
sleep "$(awk -v ms="$outage_ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
ip link set "${P}v2" up
up_at=$(date +%s%N)
outage=$(((up_at - down_at) / 1000000))
echo "== ${P}v2 down at $(((down_at - start) / 1000000)) ms for $outage ms" \
  "(QUORUM_TIMEOUT_MS=$QUORUM_TIMEOUT_MS)"
rc=0
wait "$pid" || rc=$?
end=$(date +%s%N)
cat "$reports"/rank.* 2>/dev/null || true
echo "== mpirun exited $rc, $(((end - up_at) / 1000000)) ms after the link came back"

[ "$rc" -eq 0 ] || fail "mpirun exited $rc"
min_iters=
for rank in $(seq 0 $((np - 1))); do
  file=$reports/rank.$rank
  line=$(grep "iterations" "$file" 2>/dev/null || true)
  if [ -z "$line" ]; then
    fail "rank $rank wrote no report"
    continue
  fi
  grep -q "all correct" <<<"$line" || fail "rank $rank: $line"
  grep -q "partial_destroy and finalize returned QUORUM_OK" "$file" ||
    fail "$(grep finalize "$file" || echo "rank $rank: no finalize line")"
  longest=$(sed -E 's/.* longest call ([0-9]+) ms.*/\1/' <<<"$line")
  [ "$longest" -gt "$outage" ] ||
    fail "rank $rank: its longest call ($longest ms) is shorter than the outage ($outage ms)"
  iters=$(sed -E 's/^rank [0-9]+: ([0-9]+) iterations.*/\1/' <<<"$line")
  if [ -z "$min_iters" ] || [ "$iters" -lt "$min_iters" ]; then min_iters=$iters; fi
done
# Host 2's sum needs all of host 1's 4 MiB in every 4 MiB allreduce, and the
# other way round, whatever the algorithm.
if [ -n "$min_iters" ]; then
  read -r rx1b tx1b < <(link_bytes_each 1)
  read -r rx2b tx2b < <(link_bytes_each 2)
  min=$((min_iters * (4 << 20)))
  echo "== link bytes (rx tx): ${P}1 $((rx1b - rx1)) $((tx1b - tx1))," \
    "${P}2 $((rx2b - rx2)) $((tx2b - tx2)); at least $min each"
  for d in $((rx1b - rx1)) $((tx1b - tx1)) $((rx2b - rx2)) $((tx2b - tx2)); do
    [ "$d" -ge "$min" ] || fail "a link carried $d bytes one way (< $min)"
  done
fi
end_if_failed "$work/out"
echo "PASS: a $outage ms outage of ${P}2's link: every call succeeded with exact results"
