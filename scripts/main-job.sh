#!/usr/bin/env bash
# main-job.sh: installs what is needed, builds, and runs quorum's main job.
# Until the data-parallel trainer lands this is the allreduce sweep on 2 local
# ranks (quorum-bench under quorum-run, over UCX shared memory).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
export UCX_NET_DEVICES=lo
build/tools/quorum-run -n 2 -- build/tools/quorum-bench --coll allreduce -b 8 -e 64M -f 4
