#!/usr/bin/env bash
# slurm_cluster.sh: a private Slurm cluster on the simulated hosts of
# cluster.sh (which must be up): munged and slurmctld in the root namespace
# (slurmctld on the bridge's address), one `slurmd -N HOST` inside each
# host's namespaces. State, logs and config live in one folder.
#
#   slurm_cluster.sh up DIR     starts the daemons; prints "export SLURM_CONF=..."
#   slurm_cluster.sh down DIR   stops them (by the pids recorded in DIR) and removes DIR
#
# Inside a host, `srun -N2 --mpi=pmix ...` then runs across the hosts (give
# SLURM_CONF). Two things the hosts need that one machine does not: `ip netns
# exec` mounts a fresh /sys without cgroups, so the slurmd wrapper mounts
# the v1 controllers Slurm looks for (and a "systemd" named hierarchy) on a
# tmpfs in its private mount
# namespace; and the hosts share /tmp, so every node gets its own TmpFS
# (%n) or the PMIx plugin's per-job folders collide. Needs root, munge and a
# Slurm with the pmix plugin (exit 77 otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${QUORUM_CLUSTER_PREFIX:-qh}
net=${QUORUM_CLUSTER_NET:-10.231.0}
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 2; }

down() {
  local f pid
  for f in "$dir"/pids/*; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$dir"/pids/*; do
    [ -e "$f" ] || continue
    kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$dir"
}

up() {
  for p in slurmctld slurmd srun munged; do
    command -v "$p" >/dev/null || { echo "slurm_cluster.sh: $p not installed" >&2; exit 77; }
  done
  [ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: needs root" >&2; exit 77; }
  [ -r /etc/munge/munge.key ] || { echo "slurm_cluster.sh: no munge key" >&2; exit 77; }
  [ -f "/run/$prefix-cluster/hosts" ] || { echo "slurm_cluster.sh: run cluster.sh up first" >&2; exit 1; }
  local n i nodes="" ctld_port=6917 slurmd_port=6918
  n=$(cat "/run/$prefix-cluster/hosts")
  mkdir -p "$dir"/{state,log,pids,tmp}
  chmod 755 "$dir"
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/spool/$prefix$i" "$dir/tmp/$prefix$i"
    nodes+="NodeName=$prefix$i NodeAddr=$net.$((10 + i)) NodeHostname=$prefix$i CPUs=$(nproc) State=UNKNOWN"$'\n'
  done
  cat >"$dir/slurm.conf" <<CONF
ClusterName=quorummh
SlurmctldHost=$(hostname -s)($net.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
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
${nodes}PartitionName=hosts Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
  export SLURM_CONF=$dir/slurm.conf
  if ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then
    echo "slurm_cluster.sh: this Slurm has no PMIx plugin" >&2
    exit 77
  fi
  trap 'echo "slurm_cluster.sh: up failed" >&2; down' ERR
  munged -F --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
    --seed-file="$dir/munge.seed" --log-file="$dir/log/munged.log" -f >"$dir/log/munged.out" 2>&1 &
  echo $! >"$dir/pids/munged"
  for _ in $(seq 50); do [ -S "$dir/munge.sock" ] && break; sleep 0.1; done
  slurmctld -D >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/pids/slurmctld"
  for i in $(seq 1 "$n"); do
    "$here/cluster.sh" exec "$prefix$i" env SLURM_CONF="$SLURM_CONF" bash -c '
      mount -t tmpfs cgroup_root /sys/fs/cgroup
      for c in freezer cpuset memory devices none,name=systemd; do
        mkdir -p "/sys/fs/cgroup/${c#none,name=}"
        mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/${c#none,name=}"
      done
      exec slurmd -D -N "$0"' "$prefix$i" >"$dir/log/slurmd.$prefix$i.out" 2>&1 &
    echo $! >"$dir/pids/slurmd.$prefix$i"
  done
  local idle=0
  for _ in $(seq 60); do
    idle=$(timeout 2 sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" { print $2 }' || true)
    [ "${idle:-0}" = "$n" ] && break
    sleep 0.5
  done
  if [ "${idle:-0}" != "$n" ]; then
    echo "slurm_cluster.sh: $n nodes not idle: $(sinfo 2>&1 | tail -3)" >&2
    for f in "$dir"/log/*; do echo "--- $f"; tail -n 5 "$f"; done >&2
    down
    exit 1
  fi
  trap - ERR
  echo "export SLURM_CONF=$SLURM_CONF"
}

case $cmd in
  up) up ;;
  down) down ;;
  *) echo "slurm_cluster.sh: up DIR | down DIR" >&2; exit 2 ;;
esac
