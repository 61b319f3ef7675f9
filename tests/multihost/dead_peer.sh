#!/usr/bin/env bash
# dead_peer.sh PROBE: 2 simulated hosts x 2 ranks run allreduces under mpirun
# (link_down_probe) and one rank kills itself (SIGKILL): first rank 1, whose
# host partner (rank 0) reaches it over an endpoint in UCX error mode none
# (QUORUM_UCX_ERROR_MODE=auto), so only quorum's watch of local processes can
# notice the death; then rank 2, on the second host. Asserts that the error
# modes are the ones auto chooses (none to the host partner, peer to the other
# host's ranks), that the victim's host partner notices the death through
# that watch ("process N has exited") and fails its call with
# QUORUM_ERR_PEER_FAILED, that every other survivor fails its call with
# QUORUM_ERR_PEER_FAILED or QUORUM_ERR_TIMEOUT within QUORUM_TIMEOUT_MS + 2 s.
# mpirun runs with orte_enable_recovery, so that it does not kill the
# survivors as soon as the victim dies (the PMIx job then goes on without the
# victim's values); every survivor's quorum_finalize must still return within
# QUORUM_FINALIZE_GRACE_MS + 1.5 s. mpirun only ends at its --timeout
# (MPIRUN_TIMEOUT, default 15 s here; the survivors report within about 3 s).
# Needs root (skips with 77 otherwise).
set -euo pipefail
probe=$1
source "$(dirname "$0")/common.sh"
multihost_up 2
export QUORUM_TIMEOUT_MS=${DEAD_PEER_TIMEOUT_MS:-10000}
export QUORUM_UCX_ERROR_MODE=auto QUORUM_LOG_LEVEL=info QUORUM_UCX_KEEPALIVE_MS=1000
export QUORUM_FINALIZE_GRACE_MS=${QUORUM_FINALIZE_GRACE_MS:-1000}
grace_ms=$QUORUM_FINALIZE_GRACE_MS
layout=${P}1:2,${P}2:2
np=4
bound_ms=$((QUORUM_TIMEOUT_MS + 2000))

for victim in 1 2; do
  partner=$((victim ^ 1))
  reports=$work/reports.$victim
  mkdir -p "$reports"
  echo "== rank $victim kills itself (QUORUM_TIMEOUT_MS=$QUORUM_TIMEOUT_MS)"
  rc=0
  MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-15} mpirun_on "$layout" "$np" --mca orte_enable_recovery 1 \
    "$probe" "$reports" 3000 "$victim" >"$work/out.$victim" 2>&1 || rc=$?
  cat "$reports"/rank.* 2>/dev/null || true
  echo "== mpirun exited $rc"
  for rank in $(seq 0 $((np - 1))); do
    grep -q "rank $rank of $np: .*error mode none to 1, peer to 2" "$work/out.$victim" ||
      fail "rank $rank did not report error mode none to its host partner, peer to the others"
  done
  grep -q "rank $victim: killing itself" "$reports/rank.$victim" 2>/dev/null ||
    fail "rank $victim did not reach its death"
  for rank in $(seq 0 $((np - 1))); do
    [ "$rank" -ne "$victim" ] || continue
    check_probe_report "$reports/rank.$rank" "$rank" "$bound_ms" "$grace_ms"
    line=$probe_line
    [ -n "$line" ] || continue
    if [ "$rank" -eq "$partner" ]; then
      grep -q "QUORUM_ERR_PEER_FAILED" <<<"$line" ||
        fail "rank $rank (host partner of $victim): not a failed peer: $line"
      grep -Eq "rank $rank: lost peer rank $victim: process [0-9]+ has exited" "$work/out.$victim" ||
        fail "rank $rank (host partner of $victim) did not see process $victim exit"
    fi
  done
  end_if_failed "$work/out.$victim"
done
echo "PASS: a dead rank was reported by its host partner (error mode none) and by every survivor"
