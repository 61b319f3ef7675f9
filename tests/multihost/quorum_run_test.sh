#!/usr/bin/env bash
# quorum_run_test.sh QUORUM_RUN COLLECTIVES_PROC: quorum-run across 2
# simulated hosts, torchrun style (one quorum-run per host, the store on the
# first, a shared token): the collectives pass on 2 x 2 ranks and their data
# crosses the links; a node with the wrong token is refused and both
# quorum-runs exit non-zero; bad multi-node options fail at once. Skips (77)
# without root or namespaces.
set -euo pipefail
quorum_run=$1 collectives=$2
source "$(dirname "$0")/common.sh"

# Option errors need no cluster: exit status 2 and a message naming the fix.
expect_usage_error() {  # expect_usage_error PATTERN ARGS...
  local pattern=$1 out rc=0
  shift
  out=$(env -u QUORUM_RDZV_TOKEN "$quorum_run" -n 1 "$@" -- true 2>&1) || rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: quorum-run $* gave status $rc: $out"
    exit 1
  fi
}
expect_usage_error "needs --node-rank" --nnodes 2 --rdzv 127.0.0.1:1
expect_usage_error "needs --rdzv" --nnodes 2 --node-rank 1
expect_usage_error "QUORUM_RDZV_TOKEN" --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:1
expect_usage_error "not below --nnodes" --nnodes 2 --node-rank 2 --rdzv 127.0.0.1:1
expect_usage_error "not ADDR:PORT" --nnodes 2 --node-rank 0 --rdzv nowhere
expect_usage_error "cannot read a token" --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:1 \
  --rdzv-token-file /nonexistent

multihost_up 2
rdzv=$cluster_net.11:29517
token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
filter=ProcessCollectives.RunsOverUcx:ProcessCollectives.Allreduce:ProcessCollectives.Bcast
filter+=:ProcessCollectives.Allgather:ProcessCollectives.ReduceScatter:ProcessCollectives.Barrier

node() {  # node R TOKEN TIMEOUT_MS ARGS...: quorum-run of node R on host R+1
  local r=$1 tok=$2 timeout_ms=$3
  shift 3
  "$cluster" exec "$P$((r + 1))" env UCX_NET_DEVICES=eth0 QUORUM_TIMEOUT_MS="$timeout_ms" \
    QUORUM_RDZV_TOKEN="$tok" "$quorum_run" -n 2 --nnodes 2 --node-rank "$r" --rdzv "$rdzv" \
    --timeout 90 -- "$collectives" "$@"
}

echo "== 2 nodes x 2 ranks, one quorum-run per node"
b1=$(link_bytes 1) b2=$(link_bytes 2)
# Node 1 first: its ranks wait for the store on node 0.
node 1 "$token" 20000 --gtest_filter="$filter" >"$work/node1.log" 2>&1 &
pid1=$!
rc0=0
node 0 "$token" 20000 --gtest_filter="$filter" || rc0=$?
rc1=0
wait "$pid1" || rc1=$?
sed 's/^/node1: /' "$work/node1.log"
echo "== node 0 exit $rc0, node 1 exit $rc1"
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] || { echo "FAIL: a node failed"; exit 1; }
grep -q '^\[3\] .*PASSED' "$work/node1.log" || { echo "FAIL: node 1 does not run global rank 3"; exit 1; }
d1=$(($(link_bytes 1) - b1)) d2=$(($(link_bytes 2) - b2))
echo "== links: ${P}1 $d1 B, ${P}2 $d2 B"
[ "$d1" -ge $((1 << 20)) ] && [ "$d2" -ge $((1 << 20)) ] || { echo "FAIL: no traffic"; exit 1; }

echo "== node 1 with the wrong token: refused, both nodes fail"
node 1 "wrong$token" 3000 --gtest_filter=ProcessCollectives.Barrier >"$work/node1.log" 2>&1 &
pid1=$!
rc0=0
node 0 "$token" 3000 --gtest_filter=ProcessCollectives.Barrier >"$work/node0.log" 2>&1 || rc0=$?
rc1=0
wait "$pid1" || rc1=$?
sed 's/^/node1: /' "$work/node1.log" | tail -n 5
sed 's/^/node0: /' "$work/node0.log" | tail -n 5
echo "== node 0 exit $rc0, node 1 exit $rc1"
[ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] || { echo "FAIL: a node succeeded"; exit 1; }
grep -q "token" "$work/node1.log" || { echo "FAIL: node 1 does not say its token was refused"; exit 1; }
echo "PASS"
