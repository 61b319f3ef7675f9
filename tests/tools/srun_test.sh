#!/usr/bin/env bash
# srun_test.sh QUORUM_BENCH COLLECTIVES_PROC_TEST: quorum under a real Slurm.
# Starts a private one-node cluster (munged, slurmctld, slurmd on free ports,
# state in a temp dir), then runs with `srun --mpi=pmix`:
#   1. the collective cases as 3 processes (PMIx bootstrap, ucx, results checked);
#   2. quorum-bench allreduce on 2 ranks (its #wrong column must be 0).
# Exit 77 (skipped) when Slurm or munge is not installed or not run as root
# (the daemons need it); every step has a timeout and the daemons are stopped
# on every exit.
set -uo pipefail
bench=$1
proc_test=$2

for p in slurmctld slurmd srun sinfo munged; do
  command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: the private Slurm cluster needs root"; exit 77; }
[ -r /etc/munge/munge.key ] || { echo "SKIP: no /etc/munge/munge.key"; exit 77; }

tmp=$(mktemp -d /tmp/quorum_srun_XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/log/*.log; do echo "--- $f"; tail -20 "$f"; done
  exit 1
}

# Free ports for slurmctld and slurmd (bound once, then released).
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=quorumtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$tmp/slurm.conf
if ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then
  echo "SKIP: this Slurm has no PMIx plugin: $(timeout 10 srun --mpi=list 2>&1 | tr '\n' ' ')"
  exit 77
fi

munged -F --socket="$tmp/munge.sock" --pid-file="$tmp/munged.pid" --seed-file="$tmp/munge.seed" \
  --log-file="$tmp/log/munged.log" -f &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/munge.sock" ] || { echo "SKIP: munged did not start"; exit 77; }
slurmctld -D >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 30); do
  if timeout 2 sinfo -h -o %T 2>/dev/null | grep -q idle; then up=1; break; fi
  sleep 0.5
done
# A cluster that cannot start or run a trivial step is this machine's
# problem, not quorum's: skip with the reason.
skip_env() {
  echo "SKIP: $*"
  for f in "$tmp"/log/*.log; do echo "--- $f"; tail -5 "$f"; done
  exit 77
}
[ $up = 1 ] || skip_env "the private Slurm node did not come up: $(sinfo 2>&1 | tail -2)"
echo "private Slurm cluster up: $(sinfo -h 2>&1)"
timeout 30 srun -n 1 --time=1 true >"$tmp/log/probe.out" 2>&1 ||
  skip_env "srun cannot run a trivial step here: $(tail -3 "$tmp/log/probe.out")"

export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
out=$(timeout 100 srun --mpi=pmix -n 3 --overcommit --time=5 "$proc_test" 2>&1)
rc=$?
echo "$out" | tail -15
[ $rc = 0 ] || fail "collective cases under srun -n 3 exited $rc"
echo "$out" | grep -q "PASSED" || fail "no gtest PASSED line from the collective cases"

out=$(timeout 60 srun --mpi=pmix -n 2 --overcommit --time=5 "$bench" allreduce -b 8 -e 1M -f 8 --json 2>&1)
rc=$?
echo "$out" | tail -5
[ $rc = 0 ] || fail "quorum-bench under srun exited $rc"
echo "$out" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
assert len(rows) >= 5, f"{len(rows)} JSON rows"
for r in rows:
    assert r["nranks"] == 2 and r["transport"] == "ucx", r
    assert r["in_place"]["wrong"] == 0 and r["out_of_place"]["wrong"] == 0, r
print(len(rows), "sizes checked")' || fail "quorum-bench rows under srun"
echo "srun checks passed"
