#!/usr/bin/env bash
# link_down.sh PROBE [LAYOUT]: takes the second simulated host's link down
# for good while 2 hosts (LAYOUT, default 2 ranks each) run allreduces under
# mpirun (link_down_probe), and reports what every rank saw: the status and
# message of the failing call, how long it blocked, how long quorum_finalize
# took, and when mpirun ended with which status. QUORUM_TIMEOUT_MS (default
# 5000) bounds each call, mpirun --timeout MPIRUN_TIMEOUT (default 60 s) the
# job. Needs root (skips with 77 otherwise).
set -euo pipefail
probe=$1
source "$(dirname "$0")/common.sh"
layout=${2:-${P}1:2,${P}2:2}
multihost_up 2
export QUORUM_TIMEOUT_MS=${QUORUM_TIMEOUT_MS:-5000}
np=$(awk -F, '{ n = 0; for (i = 1; i <= NF; ++i) { split($i, a, ":"); n += a[2] } print n }' \
  <<<"$layout")
start=$(date +%s%N)
MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-60} mpirun_on "$layout" "$np" "$probe" >"$work/out" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ "$(grep -c ready "$work/out" || true)" -ge "$np" ] && break
  sleep 0.1
done
sleep 1
ip link set "${P}v2" down
down_at=$(date +%s%N)
echo "== ${P}v2 down at $(((down_at - start) / 1000000)) ms (QUORUM_TIMEOUT_MS=$QUORUM_TIMEOUT_MS)"
rc=0
wait "$pid" || rc=$?
end=$(date +%s%N)
grep -v ready "$work/out" | grep -v "^\s*$" | head -n 40
echo "== mpirun exited $rc, $(((end - down_at) / 1000000)) ms after the link went down"
