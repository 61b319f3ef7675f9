#!/usr/bin/env bash
# run.sh SECONDS [RUNS]: builds the libFuzzer targets of tests/fuzz/ with
# clang (ASan + UBSan) into build-fuzz/ and runs each from its checked-in
# seed corpus (tests/fuzz/corpus/NAME) for SECONDS, or for RUNS executions
# when RUNS is given. New inputs go to build-fuzz/corpus/NAME, never into the
# checked-in corpus. A crash, leak or sanitizer report fails the script and
# leaves the input in build-fuzz/ (make it a regression seed in the corpus).
# Without clang++ or libFuzzer the script says so and exits 0.
# Targets: store_wire, checkpoint, datasets (IDX and CIFAR), knobs;
# QUORUM_FUZZ_TARGETS="knobs ..." runs only those.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [RUNS]}
runs=${2:-}
cxx=${QUORUM_FUZZ_CXX:-clang++}
out=build-fuzz
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: no $cxx (apt-get install clang libclang-rt-14-dev): skipped"
  exit 0
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' |
  "$cxx" -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz: $cxx cannot link libFuzzer (apt-get install libclang-rt-14-dev): skipped"
  exit 0
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(ccache); fi
mkdir -p "$out/obj"
flags=(-std=c++17 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  -fno-sanitize-recover=undefined -I. -Iinclude)
common=(runtime/status.cpp runtime/log.cpp runtime/knobs.cpp)
declare -A sources=(
  [store_wire]="runtime/bootstrap/tcp_store_server.cpp runtime/bootstrap/tcp_store_wire.cpp"
  [checkpoint]="trainer/checkpoint.cpp"
  [datasets]="trainer/dataset.cpp"
  [knobs]=""
)
# Objects with coverage instrumentation, compiled in parallel.
all=$(printf '%s\n' "${common[@]}" ${sources[*]} | sort -u)
for src in $all; do
  obj="$out/obj/$(echo "$src" | tr / _).o"
  "${launcher[@]}" "$cxx" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
done
wait
status=0
for name in ${QUORUM_FUZZ_TARGETS:-store_wire checkpoint datasets knobs}; do
  objs=()
  for src in "${common[@]}" ${sources[$name]}; do objs+=("$out/obj/$(echo "$src" | tr / _).o"); done
  "${launcher[@]}" "$cxx" "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$name.cpp" "${objs[@]}" \
    -lfmt -lz -lpthread -o "$out/fuzz_$name"
  mkdir -p "$out/corpus/$name"
  limit=(-max_total_time="$seconds")
  if [ -n "$runs" ]; then limit=(-runs="$runs"); fi
  log="$out/fuzz_$name.log"
  echo "fuzz: $name (${runs:-$seconds s})"
  if ! (cd "$out" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "./fuzz_$name" "${limit[@]}" -max_len=4096 -timeout=30 -rss_limit_mb=2048 -close_fd_mask=3 \
    -print_final_stats=1 "corpus/$name" "../tests/fuzz/corpus/$name") >"$log" 2>&1; then
    echo "fuzz: $name FAILED; the end of $log:"
    tail -n 40 "$log"
    status=1
    continue
  fi
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$log" | tail -n 2 | sed "s/^/fuzz: $name: /"
done
exit $status
