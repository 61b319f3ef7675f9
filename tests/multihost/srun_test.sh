#!/usr/bin/env bash
# srun_test.sh COLLECTIVES_PROC: `srun -N2 --mpi=pmix` across 2 simulated
# hosts, one slurmd per host (slurm_cluster.sh): 2 x 2 ranks run the
# collectives (PMIx bootstrap, UCX over the links, results asserted) and
# their data crosses the links. Skips (77) without root, namespaces, Slurm
# with PMIx or munge.
set -euo pipefail
collectives=$1
source "$(dirname "$0")/common.sh"
multihost_up 2
slurm_dir=$work/slurm
trap '"$multihost_dir/slurm_cluster.sh" down "$slurm_dir"; "$cluster" down; rm -rf "$work"' EXIT
"$multihost_dir/slurm_cluster.sh" up "$slurm_dir"

filter=ProcessCollectives.RunsOverUcx:ProcessCollectives.Allreduce:ProcessCollectives.Bcast
filter+=:ProcessCollectives.Barrier
b1=$(link_bytes 1) b2=$(link_bytes 2)
"$cluster" exec "${P}1" env SLURM_CONF="$slurm_dir/slurm.conf" UCX_NET_DEVICES=eth0 \
  QUORUM_TIMEOUT_MS=20000 timeout 120 srun -N2 -n4 --ntasks-per-node=2 --overcommit --time=2 \
  --mpi=pmix "$collectives" --gtest_color=no --gtest_filter="$filter" >"$work/srun.out" 2>&1 ||
  { tail -n 30 "$work/srun.out"; echo "FAIL: srun exited non-zero"; exit 1; }
grep -E "PASSED|FAILED" "$work/srun.out"
[ "$(grep -c 'PASSED' "$work/srun.out")" -eq 4 ] || { echo "FAIL: not 4 ranks passed"; exit 1; }
d1=$(($(link_bytes 1) - b1)) d2=$(($(link_bytes 2) - b2))
echo "== links: ${P}1 $d1 B, ${P}2 $d2 B"
[ "$d1" -ge $((1 << 20)) ] && [ "$d2" -ge $((1 << 20)) ] || { echo "FAIL: no traffic"; exit 1; }
echo "PASS"
