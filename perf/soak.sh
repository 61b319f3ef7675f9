#!/usr/bin/env bash
# soak.sh [MINUTES] [RANKS] [SEED]: a soak run of quorum on this host: RANKS
# (default 4) processes under quorum-run do random collectives, sizes, dtypes,
# ops and synchronous partial rounds for MINUTES (default 30) through the
# public C API, checking every result, and each rank checks that its resident
# memory grew by at most 5 % after the warm-up (a tenth of the run, at least
# 30 s) and its open fds not at all
# (build/perf/quorum_soak; see perf/soak.cpp). Prints each rank's counts;
# exits non-zero on any wrong result, error or growth.
#   perf/soak.sh 1     # a one-minute run
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
ranks=${2:-4}
seed=${3:-$RANDOM}
build=${QUORUM_BUILD_DIR:-build}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
seconds=$(python3 -c "print(int(float('$minutes') * 60))")
echo "soak: $ranks ranks, $seconds s, seed $seed"
# The job's own limit: the run plus its finalize, with room for a loaded machine.
"$build/tools/quorum-run" -n "$ranks" --timeout $((seconds + 300)) -- \
  "$build/perf/quorum_soak" --seconds "$seconds" --seed "$seed"
