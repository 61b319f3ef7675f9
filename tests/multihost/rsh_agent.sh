#!/usr/bin/env bash
# rsh_agent.sh: the "ssh" of the simulated cluster, for mpirun's
# `--mca plm_rsh_agent`: `rsh_agent.sh [ssh options] HOST COMMAND...` runs
# COMMAND (its words joined, as ssh does, and given to bash -c) inside HOST's
# namespaces. Hosts and prefix as in cluster.sh.
set -euo pipefail
while [ $# -gt 0 ] && [[ $1 == -* ]]; do
  case $1 in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;  # ssh options that take a value
    *) shift ;;
  esac
done
[ $# -ge 2 ] || { echo "rsh_agent.sh: usage: rsh_agent.sh HOST COMMAND..." >&2; exit 255; }
host=${1%%:*}
host=${host#*@}
shift
exec "$(dirname "$0")/cluster.sh" exec "$host" bash -c "$*"
