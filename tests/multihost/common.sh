# common.sh: sourced by the multi-host tests. Brings up a simulated cluster of
# $1 hosts (prefix qht, so a cluster a user brought up with cluster.sh stays
# untouched) and tears it down on exit; skips (77) where namespaces or mpirun
# are missing. Gives mpirun_on (mpirun across the hosts), link_bytes, fail and
# check_probe_report (the fault tests' checks), and $work, a scratch folder
# removed on exit.
# shellcheck shell=bash
multihost_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export QUORUM_CLUSTER_PREFIX=${QUORUM_CLUSTER_PREFIX:-qht}
cluster=$multihost_dir/cluster.sh
cluster_net=${QUORUM_CLUSTER_NET:-10.231.0}
P=$QUORUM_CLUSTER_PREFIX
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

multihost_up() {
  "$cluster" check
  command -v mpirun >/dev/null || { echo "mpirun missing: skipped"; exit 77; }
  "$cluster" down  # what a killed earlier run may have left
  trap '"$cluster" down; rm -rf "$work"' EXIT
  "$cluster" up "$@"
}

# mpirun_on HOSTS NP PROG ARGS...: mpirun started on the first host (in the
# root's PID namespace, so its rsh agent can enter the others), ranks on
# HOSTS (e.g. qht1:2,qht2:2), UCX on each host's eth0, PMIx bootstrap; the
# job is ended after MPIRUN_TIMEOUT seconds (default 100).
mpirun_on() {
  local hosts=$1 np=$2
  shift 2
  "$cluster" launch "${P}1" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    UCX_NET_DEVICES=eth0 mpirun --host "$hosts" -np "$np" --timeout "${MPIRUN_TIMEOUT:-100}" \
    --mca plm_rsh_agent "$multihost_dir/rsh_agent.sh" \
    --mca oob_tcp_if_include "$cluster_net.0/24" --mca btl_tcp_if_include "$cluster_net.0/24" \
    -x UCX_NET_DEVICES -x QUORUM_TIMEOUT_MS "$@"
}

# link_bytes I: bytes host I has received plus sent on its link (root side).
link_bytes() {
  local s=/sys/class/net/${P}v$1/statistics
  echo $(($(cat "$s/rx_bytes") + $(cat "$s/tx_bytes")))
}

# link_bytes_each I: "rx tx" of host I's link, as the host sees it (its
# received bytes are the root side's transmitted ones).
link_bytes_each() {
  local s=/sys/class/net/${P}v$1/statistics
  echo "$(cat "$s/tx_bytes") $(cat "$s/rx_bytes")"
}

failures=0
# fail MESSAGE: a failed check, counted in $failures.
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# check_probe_report FILE RANK BOUND_MS GRACE_MS: link_down_probe's report for
# RANK says its call failed with QUORUM_ERR_PEER_FAILED or _TIMEOUT within
# BOUND_MS and quorum_finalize then returned within GRACE_MS + 1.5 s. Leaves
# the failed call's line in $probe_line (empty if there was none).
check_probe_report() {
  local file=$1 rank=$2 bound_ms=$3 grace_ms=$4 took fin fin_ms
  probe_line=$(grep "call .* failed after" "$file" 2>/dev/null || true)
  if [ -z "$probe_line" ]; then
    fail "rank $rank reported no failed call"
    return
  fi
  took=$(sed -E 's/.* failed after ([0-9]+) ms.*/\1/' <<<"$probe_line")
  [ "$took" -le "$bound_ms" ] || fail "rank $rank: the call failed after $took ms (> $bound_ms)"
  grep -Eq "QUORUM_ERR_(TIMEOUT|PEER_FAILED)" <<<"$probe_line" ||
    fail "rank $rank: not a timeout or a failed peer: $probe_line"
  fin=$(grep -E "finalize returned .* after [0-9]+ ms" "$file" || true)
  if [ -z "$fin" ]; then
    fail "rank $rank: quorum_finalize did not return"
  else
    fin_ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$fin")
    [ "$fin_ms" -le $((grace_ms + 1500)) ] ||
      fail "rank $rank: quorum_finalize took $fin_ms ms (> $((grace_ms + 1500)))"
  fi
}

# end_if_failed OUTPUT: after a failed check, shows the start of the job's
# OUTPUT (without the probes' ready lines) and exits 1.
end_if_failed() {
  [ "$failures" -gt 0 ] || return 0
  echo "== mpirun's output:"
  grep -v ready "$1" | grep -v "^\s*$" | head -n 40
  exit 1
}
