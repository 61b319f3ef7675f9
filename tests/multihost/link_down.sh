#!/usr/bin/env bash
# link_down.sh PROBE: 2 simulated hosts x 2 ranks run allreduces under mpirun
# (link_down_probe) and the second host's link goes down for good. Asserts
# that every rank (those behind the dead link too: they write their report to
# a shared folder) ends its call with QUORUM_ERR_TIMEOUT or
# QUORUM_ERR_PEER_FAILED within QUORUM_TIMEOUT_MS + 2 s, naming the ranks of
# the other host, that quorum_finalize then returns within a short bound, and
# that mpirun exits non-zero. Prints what every rank saw. LINK_DOWN_TIMEOUT_MS
# (default 3000, whatever QUORUM_TIMEOUT_MS the suite sets) bounds each call,
# MPIRUN_TIMEOUT (default 16 s) the job:
# Open MPI cannot reach its daemon behind the dead link, so mpirun itself only
# ends at that limit. Needs root (skips with 77 otherwise).
set -euo pipefail
probe=$1
source "$(dirname "$0")/common.sh"
multihost_up 2
export QUORUM_TIMEOUT_MS=${LINK_DOWN_TIMEOUT_MS:-3000}
grace_ms=${QUORUM_FINALIZE_GRACE_MS:-1000}
layout=${P}1:2,${P}2:2
np=4
reports=$work/reports
mkdir -p "$reports"
start=$(date +%s%N)
# Each rank lingers 2 s after its report, so that mpirun's abort on the first
# non-zero exit does not cut the others short.
MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-16} mpirun_on "$layout" "$np" "$probe" "$reports" 2000 \
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
sleep 1
ip link set "${P}v2" down
down_at=$(date +%s%N)
echo "== ${P}v2 down at $(((down_at - start) / 1000000)) ms (QUORUM_TIMEOUT_MS=$QUORUM_TIMEOUT_MS)"
rc=0
wait "$pid" || rc=$?
end=$(date +%s%N)
cat "$reports"/rank.* 2>/dev/null || true
echo "== mpirun exited $rc, $(((end - down_at) / 1000000)) ms after the link went down"

[ "$rc" -ne 0 ] || fail "mpirun exited 0"
bound_ms=$((QUORUM_TIMEOUT_MS + 2000))
for rank in $(seq 0 $((np - 1))); do
  file=$reports/rank.$rank
  if [ "$rank" -lt 2 ]; then others='2,3'; else others='0,1'; fi
  check_probe_report "$file" "$rank" "$bound_ms" "$grace_ms"
  line=$probe_line
  [ -n "$line" ] || continue
  # The unreachable ranks are named: the probe's silent list, or a failed peer.
  if ! grep -Fq "no answer within" <<<"$line" || ! grep -Fq "[$others]" <<<"$line"; then
    grep -Eq "QUORUM_ERR_PEER_FAILED.*rank [${others/,/}]" <<<"$line" ||
      fail "rank $rank does not name ranks $others: $line"
  fi
done
end_if_failed "$work/out"
echo "PASS: every rank named the other host's ranks within $bound_ms ms"
