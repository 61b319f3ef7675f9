#!/usr/bin/env bash
# build.sh DIR [meson options...]: configures (once) and builds quorum in DIR.
# Quiet on success; on failure prints the end of the configure or build log.
# A CUDA toolkit that is found but cannot configure (and -Dcuda not given)
# gives a warning and a build without CUDA rather than no build.
# QUORUM_BUILD_TARGETS (space-separated ninja targets) builds only those;
# QUORUM_CONFIGURE_ONLY=1 stops after configuring.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true

setup() {
  rm -rf "$dir" && mkdir -p "$dir"
  meson setup "$dir" "$@" >"$dir/setup.log" 2>&1
}

if [ ! -f "$dir/build.ninja" ]; then
  if ! setup "$@"; then
    if [[ " $* " != *" -Dcuda="* ]] && grep -qi "cuda\|nvcc" "$dir/setup.log"; then
      echo "build.sh: WARNING: configuring with CUDA failed; building $dir without CUDA:"
      tail -n 15 "$dir/setup.log"
      if ! setup "$@" -Dcuda=disabled; then
        echo "build.sh: meson setup $dir failed:"; tail -n 60 "$dir/setup.log"; exit 1
      fi
    else
      echo "build.sh: meson setup $dir failed:"; tail -n 60 "$dir/setup.log"; exit 1
    fi
  fi
fi
if [ "${QUORUM_CONFIGURE_ONLY:-0}" = 1 ]; then exit 0; fi
# shellcheck disable=SC2086
if ! ninja -C "$dir" -j "${QUORUM_BUILD_JOBS:-$(nproc)}" ${QUORUM_BUILD_TARGETS:-} \
  >"$dir/build.log" 2>&1; then
  echo "build.sh: build in $dir failed:"
  grep -n -A30 -m3 "FAILED" "$dir/build.log" || tail -n 80 "$dir/build.log"
  exit 1
fi
