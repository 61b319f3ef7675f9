#!/bin/bash
# partial_bench.sh: `quorum-bench partial` (sync vs solo, majority and
# quorum:K for every K under eager-SGD's imbalance; `-- --model all` for every
# imbalance model) for several rank counts, several runs each, and one
# table of the spread: speedup over sync, share of the ideal speedup the
# imbalance model allows with free communication, fresh contributions per
# round and activation latency, with the target (90% of the ideal, and more
# than the paper's 1.27x) marked.
#
# Usage: perf/partial_bench.sh [--build DIR] [--ranks "4 8"] [--runs N]
#          [-- extra quorum-bench partial arguments]
# Defaults: C = D = 20 ms, 16 MiB float32, 200 steps, paper model, 3 runs.
set -eu
build=build ranks="4 8" runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
for exe in "$build/tools/quorum-run" "$build/tools/quorum-bench"; do
  [ -x "$exe" ] || { echo "$0: $exe is missing (build it first)" >&2; exit 2; }
done
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for p in $ranks; do
  for r in $(seq 1 "$runs"); do
    echo "== $p ranks, run $r/$runs" >&2
    "$build/tools/quorum-run" -n "$p" -- "$build/tools/quorum-bench" partial --compute-ms 20 \
      --delay-ms 20 --bytes 16M --steps 200 "$@" --json >"$out/p$p.r$r.log" 2>&1 ||
      { echo "$0: quorum-bench partial failed:" >&2; tail -20 "$out/p$p.r$r.log" >&2; exit 1; }
  done
done
python3 - "$out" <<'PY'
import glob, json, sys
rows = {}
for path in sorted(glob.glob(sys.argv[1] + "/*.log")):
    for line in open(path):
        line = line.split("] ", 1)[-1].strip()
        if line.startswith("{"):
            j = json.loads(line)
            rows.setdefault((j["nranks"], j["model"], j.get("k", 0), j["variant"]), []).append(j)
def spread(values, fmt):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else fmt.format(lo) + "-" + fmt.format(hi)
print(f"{'P':>3} {'model':>11} {'variant':>9} {'runs':>4} {'vs sync':>13} {'of ideal':>11} {'ideal':>6}"
      f" {'fresh':>9} {'act med us':>12}  target")
for (p, model, _, v), js in sorted(rows.items()):
    if v == "sync":
        continue
    ratio = [j["ratio_to_sync"] for j in js]
    share = [100 * j["ratio_to_sync"] / j["ideal_speedup"] for j in js]
    ok = min(share) >= 90 and min(ratio) > 1.27
    print(f"{p:>3} {model:>11} {v:>9} {len(js):>4} {spread(ratio, '{:.3f}'):>13} "
          f"{spread(share, '{:.0f}') + '%':>11} {js[0]['ideal_speedup']:>6.3f} "
          f"{spread([j['mean_fresh'] for j in js], '{:.2f}'):>9} "
          f"{spread([j['activation_latency_us'] for j in js], '{:.0f}'):>12}  "
          f"{'met' if ok else 'not met'}")
PY
