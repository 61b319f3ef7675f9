#!/usr/bin/env bash
# latency_ab.sh: small-message allreduce latency of two quorum builds side by
# side in one run (A = before, B = after a change), on the shared-memory path
# and on the message path (QUORUM_SHM=0), 2 ranks under quorum-run.
#
#   perf/latency_ab.sh A_BUILD_DIR B_BUILD_DIR [ROUNDS] [BYTES]
#
# Builds nothing. Alternates A and B ROUNDS times (default 7) per path, each
# run quorum-bench -b BYTES -e BYTES (default 8) with ITERS timed calls
# (default 20000, env), and prints per path and build the best, median and
# worst of the runs' average in-place time (us, averaged over ranks) and the
# ratios B/A of the medians and of the bests (on a loaded machine the best run
# is the one least disturbed by other processes). Extra environment (e.g. QUORUM_SIGNATURE_CHECK=0) passes
# through to both builds.
set -euo pipefail
a=${1:?A build dir}
b=${2:?B build dir}
rounds=${3:-7}
bytes=${4:-8}
iters=${ITERS:-20000}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # build path
  local dir=$1 path=$2 env=()
  [ "$path" = msg ] && env=(QUORUM_SHM=0)
  env "${env[@]}" "$dir/tools/quorum-run" -n 2 -- "$dir/tools/quorum-bench" -b "$bytes" \
    -e "$bytes" -n "$iters" -w $((iters / 10)) --json 2>/dev/null |
    grep -o '"in_place":{[^}]*}' | head -1 | grep -o '"time_us":[0-9.e+-]*' | cut -d: -f2
}

for ((i = 0; i < rounds; ++i)); do
  for path in shm msg; do
    run "$a" "$path" >>"$tmp/A_$path"
    run "$b" "$path" >>"$tmp/B_$path"
  done
done

stats() {  # file -> "best median worst"
  sort -g "$1" | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
    printf "%.3f %.3f %.3f", v[1], m, v[NR]}'
}
printf "%-5s %-22s %-22s %-8s %s\n" path "A best/median/worst" "B best/median/worst" \
  "B/A med" "B/A best"
for path in shm msg; do
  read -r ab am aw <<<"$(stats "$tmp/A_$path")"
  read -r bb bm bw <<<"$(stats "$tmp/B_$path")"
  printf "%-5s %-22s %-22s %-8.3f %.3f\n" "$path" "$ab/$am/$aw" "$bb/$bm/$bw" \
    "$(awk -v a="$am" -v b="$bm" 'BEGIN {print b / a}')" \
    "$(awk -v a="$ab" -v b="$bb" 'BEGIN {print b / a}')"
done
