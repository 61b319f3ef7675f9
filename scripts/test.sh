#!/usr/bin/env bash
# test.sh: installs what is needed, builds, and runs the whole test suite:
#   1. the normal build (debugoptimized), every test;
#   2. an ASan+UBSan build, every test;
#   3. a TSan build, the progress-engine, collective and partial-collective tests.
# QUORUM_TEST_QUICK=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

export UCX_NET_DEVICES=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== build (debugoptimized)"
scripts/build.sh build
meson test -C build --num-processes 2 --print-errorlogs
tests/fuzz/run.sh 12  # the four libFuzzer targets, 12 s each from their seed corpora

if [ "${QUORUM_TEST_QUICK:-0}" = 1 ]; then exit 0; fi

echo "== build (address + undefined sanitizers)"
# -O1: a fifth less compile time than -O2 under the sanitizers, same checks.
scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
  -Dperf=false -Doptimization=1
# HWLOC_COMPONENTS=-pci: hwloc's PCI plugin leaks inside libpciaccess and is
# unloaded before LeakSanitizer reports, so no suppression can name it.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 HWLOC_COMPONENTS=-pci \
  LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --num-processes 2 --print-errorlogs --timeout-multiplier 3 \
  --no-suite gpu --no-suite slow --no-suite slurm

echo "== build (thread sanitizer: the threaded tests only)"
QUORUM_CONFIGURE_ONLY=1 scripts/build.sh build-tsan -Db_sanitize=thread -Db_lundef=false \
  -Dcuda=disabled -Dperf=false
# Build just the executables of the tsan suite.
targets=$(meson introspect build-tsan --tests | python3 -c '
import json, os, sys
root = os.path.abspath("build-tsan")
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "tsan" for s in t["suite"]):
        print(os.path.relpath(t["cmd"][0], root))')
QUORUM_BUILD_TARGETS="$targets" scripts/build.sh build-tsan
# UCX's memory hooks (libucm intercepts madvise at thread exit) crash under TSan.
UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no \
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp \
  meson test -C build-tsan --no-rebuild --num-processes 2 --print-errorlogs \
  --timeout-multiplier 4 --suite tsan
