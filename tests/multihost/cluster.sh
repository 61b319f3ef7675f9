#!/usr/bin/env bash
# cluster.sh: a simulated cluster on one machine, for multi-host tests and
# benchmarks. Each host is a network, UTS, IPC and PID namespace of its own
# (so quorum and UCX see separate hosts: own hostname, no shared memory and
# no process watching between them), with its own /proc and /sys; its eth0
# is a veth whose root-side end (PREFIXvI) sits on a bridge.
#
#   cluster.sh up N [RATE]   N hosts PREFIX1..PREFIXN at NET.(10+i); RATE (tc
#                            tbf, e.g. 2gbit) shapes both ends of every link
#   cluster.sh down          removes everything up made, even after a failed up
#   cluster.sh exec HOST CMD...   runs CMD inside HOST
#   cluster.sh launch HOST CMD... the same in the root's PID namespace: for
#                            mpirun, whose rsh agent must enter the other
#                            hosts (a PID namespace cannot enter a sibling)
#   cluster.sh check         exits 0 if namespaces can be made here, else 77
#   cluster.sh bytes         prints "HOST rx tx" of each root-side veth
#
# Env: QUORUM_CLUSTER_PREFIX (default qh: hosts qh1.., links qhv1.., bridge
# qhbr), QUORUM_CLUSTER_NET (default 10.231.0: bridge .1, hosts .11, .12, ..).
# Needs root. Changes to the machine (bridge-nf-call-iptables set to 0,
# /etc/hosts lines) are recorded under /run/PREFIX-cluster and undone by down.
set -Eeuo pipefail

prefix=${QUORUM_CLUSTER_PREFIX:-qh}
net=${QUORUM_CLUSTER_NET:-10.231.0}
state=/run/${prefix}-cluster
bridge=${prefix}br
hosts_tag="# quorum-cluster ${prefix}"
nf_sysctl=/proc/sys/net/bridge/bridge-nf-call-iptables

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() {
  sed -n "2,/^set -E/p" "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Exits 77 (the test harness's "skip") where namespaces cannot be made.
check() {
  if [ "$(id -u)" != 0 ]; then echo "cluster.sh: needs root" >&2; exit 77; fi
  for tool in ip tc unshare nsenter; do
    command -v "$tool" >/dev/null || { echo "cluster.sh: $tool missing" >&2; exit 77; }
  done
  local probe=${prefix}probe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cluster.sh: cannot create network namespaces" >&2
    exit 77
  fi
  ip netns delete "$probe"
  if ! unshare --uts --ipc --pid --fork true 2>/dev/null; then
    echo "cluster.sh: cannot create UTS/IPC/PID namespaces" >&2
    exit 77
  fi
}

host_index() {
  [[ $1 =~ ^${prefix}([0-9]+)$ ]] || die "unknown host '$1' (hosts are ${prefix}1, ${prefix}2, ...)"
  echo "${BASH_REMATCH[1]}"
}

# Runs "$@" inside host $1: its UTS, IPC and PID namespaces, then `ip netns
# exec` for the network (which also mounts the namespace's own /sys, where
# UCX lists interfaces), and a /proc of the host's PID namespace in that
# private mount namespace.
exec_in() {
  local with_pid=$1 host=$2
  shift 2
  host_index "$host" >/dev/null
  [ -e "/run/netns/$host" ] && [ -e "$state/$host.pid" ] || die "host $host is not up"
  if [ "$with_pid" = 0 ]; then
    exec nsenter --uts="$state/$host.uts" --ipc="$state/$host.ipc" ip netns exec "$host" "$@"
  fi
  exec nsenter --uts="$state/$host.uts" --ipc="$state/$host.ipc" --pid="$state/$host.pid" \
    ip netns exec "$host" sh -c 'mount -t proc proc /proc && exec "$@"' "$host" "$@"
}

# Makes host $1's PID namespace, kept alive by its init (a sleep that lives in
# the host's network namespace, so that down ends it with the rest; bound
# from the root mount namespace, where the other namespace files are).
make_pid_namespace() {
  local host=$1
  touch "$state/$host.pid"
  setsid unshare --pid="$state/$host.pid" --fork --kill-child \
    ip netns exec "$host" sleep infinity </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 100); do
    nsenter --pid="$state/$host.pid" true 2>/dev/null && return 0
    sleep 0.05
  done
  echo "cluster.sh: the PID namespace of $host did not come up" >&2
  return 1
}

shape() {  # shape RATE DEV [NETNS]
  local rate=$1 dev=$2 ns=${3:-}
  local cmd=(tc qdisc replace dev "$dev" root tbf rate "$rate" burst 256kb latency 10ms)
  if [ -n "$ns" ]; then ip netns exec "$ns" "${cmd[@]}"; else "${cmd[@]}"; fi
}

up() {
  local n=${1:-}
  local rate=${2:-}
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: N must be 1..200"
  check
  if [ -d "$state" ]; then die "a cluster '$prefix' is already up (run: $0 down)"; fi
  mkdir -p "$state"
  trap 'echo "cluster.sh: up failed; tearing down" >&2; down' ERR
  echo "$n" >"$state/hosts"
  if [ -w "$nf_sysctl" ]; then
    cat "$nf_sysctl" >"$state/bridge-nf-call-iptables"
    echo 0 >"$nf_sysctl"
  fi
  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  ip link set "$bridge" up
  local i host
  for i in $(seq 1 "$n"); do
    host=$prefix$i
    ip netns add "$host"
    touch "$state/$host.uts" "$state/$host.ipc"
    unshare --uts="$state/$host.uts" --ipc="$state/$host.ipc" hostname "$host"
    make_pid_namespace "$host"
    ip link add "${prefix}v$i" type veth peer name "${prefix}e$i"
    ip link set "${prefix}e$i" netns "$host"
    ip -n "$host" link set "${prefix}e$i" name eth0
    ip -n "$host" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    ip link set "${prefix}v$i" master "$bridge" up
    if [ -n "$rate" ]; then
      shape "$rate" "${prefix}v$i"
      shape "$rate" eth0 "$host"
    fi
    echo "$net.$((10 + i)) $host $hosts_tag" >>/etc/hosts
  done
  trap - ERR
  echo "cluster.sh: $n hosts up (${prefix}1..${prefix}$n, $net.11..$net.$((10 + n))${rate:+, links $rate})"
}

# Removes every trace; safe to run any number of times and after a failed up.
down() {
  local ns pid dev
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  for dev in $(ls /sys/class/net 2>/dev/null | grep -E "^${prefix}(v[0-9]+|e[0-9]+|br)$" || true); do
    ip link delete "$dev" 2>/dev/null || true
  done
  if [ -d "$state" ]; then
    for ns in "$state"/*.uts "$state"/*.ipc "$state"/*.pid; do
      [ -e "$ns" ] || continue
      umount "$ns" 2>/dev/null || true
      rm -f "$ns"
    done
    if [ -f "$state/bridge-nf-call-iptables" ] && [ -w "$nf_sysctl" ]; then
      cat "$state/bridge-nf-call-iptables" >"$nf_sysctl"
    fi
    rm -rf "$state"
  fi
  if grep -qF "$hosts_tag" /etc/hosts 2>/dev/null; then
    # In place (not a rename): /etc/hosts may be a bind mount.
    local kept
    kept=$(grep -vF "$hosts_tag" /etc/hosts || true)
    printf '%s\n' "$kept" >/etc/hosts
  fi
}

bytes() {
  [ -f "$state/hosts" ] || die "no cluster '$prefix' is up"
  local i
  for i in $(seq 1 "$(cat "$state/hosts")"); do
    echo "$prefix$i $(cat "/sys/class/net/${prefix}v$i/statistics/rx_bytes")" \
      "$(cat "/sys/class/net/${prefix}v$i/statistics/tx_bytes")"
  done
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  exec) shift; [ $# -ge 2 ] || usage; exec_in 1 "$@" ;;
  launch) shift; [ $# -ge 2 ] || usage; exec_in 0 "$@" ;;
  check) check ;;
  bytes) bytes ;;
  *) usage ;;
esac
