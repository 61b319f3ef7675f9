#!/usr/bin/env bash
# build.sh DIR [meson options...]: configures (once) and builds quorum in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" -j "${QUORUM_BUILD_JOBS:-$(nproc)}" >/dev/null
