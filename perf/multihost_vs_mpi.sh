#!/usr/bin/env bash
# multihost_vs_mpi.sh: quorum's allreduce next to Open MPI's (pml ob1, btl tcp
# between hosts) across 2 simulated hosts (tests/multihost/cluster.sh) whose
# links are shaped by tc tbf, with iperf3 for what a link carries; measured
# side by side in one run (alternating), as ratios.
#
#   perf/multihost_vs_mpi.sh BUILD_DIR [OUT_JSON]
#   env: RATE=2gbit BYTES=16M ITERS=10 ROUNDS=3 LAYOUTS="1 2" (ranks per host)
#        ALGOS="auto" (quorum's allreduce algorithms, each a row "quorum" for
#        auto, else "quorum:NAME" with QUORUM_ALLREDUCE_ALGO=NAME; e.g.
#        ALGOS="ring hierarchical" measures both in the same rounds)
#
# Needs root (namespaces), mpirun and iperf3. For each layout (2 x 1 and
# 2 x 2 ranks), ROUNDS times: quorum-bench allreduce and perf/mpi_allreduce_bench
# (float32 sum, BYTES, out of place and in place, ITERS timed + 2 warm-up +
# 1 checked call each), both under mpirun; the byte counters of the links
# give what each sent across them. Prints per layout and program the median
# and worst out-of-place busbw, busbw / link limit (iperf3's rate, one
# direction, measured before every round), quorum / MPI, and the bytes host 1 sent per call as a multiple
# of the message (2 hosts: 1.0 is the least an allreduce can send; a flat ring
# over 2 x 2 ranks sends 1.5). Writes the rows as JSON to OUT_JSON (default
# results/multihost_vs_mpi.json). The cluster is torn down on exit.
set -euo pipefail
if [[ $# -lt 1 || ! -d $1 ]]; then
  echo "usage: $0 BUILD_DIR [OUT_JSON]  (env: RATE=2gbit BYTES=16M ITERS=10 ROUNDS=3" \
    "LAYOUTS=\"1 2\")" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-results/multihost_vs_mpi.json}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
rate=${RATE:-2gbit}
bytes_text=${BYTES:-16M}
iters=${ITERS:-10}
rounds=${ROUNDS:-3}
layouts=${LAYOUTS:-1 2}
algos=${ALGOS:-auto}
bench=$build/tools/quorum-bench
mpi_bench=$build/perf/mpi_allreduce_bench
for exe in "$bench" "$mpi_bench"; do
  [[ -x $exe ]] || { echo "$0: $exe is missing (build it first)" >&2; exit 2; }
done
command -v iperf3 >/dev/null || { echo "$0: iperf3 is missing (scripts/install-deps.sh)" >&2; exit 2; }
bytes=$(numfmt --from=iec "$bytes_text")
calls=$((2 * (iters + 2 + 1)))

repo=$(cd "$(dirname "$0")/.." && pwd)
export QUORUM_CLUSTER_PREFIX=${QUORUM_CLUSTER_PREFIX:-qh}
source "$repo/tests/multihost/common.sh"
multihost_up 2 "$rate"
export QUORUM_TIMEOUT_MS=${QUORUM_TIMEOUT_MS:-60000}

# What one link carries now (iperf3, 3 s, host 1 to host 2), in GB/s.
measure_link() {
  "$cluster" exec "${P}2" iperf3 -s -1 >/dev/null 2>&1 &
  local iperf_pid=$! bps
  sleep 0.5
  bps=$("$cluster" exec "${P}1" iperf3 -c "${P}2" -t 3 -J |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
  wait "$iperf_pid" || true
  awk -v b="$bps" 'BEGIN { printf "%.4f", b / 8e9 }'
}

rows=$work/rows.jsonl
: >"$rows"
run() {  # run IMPL PER_HOST ROUND (IMPL: mpi, quorum or quorum:ALGO)
  local impl=$1 per_host=$2 round=$3 tx0 line
  read -r _ tx0 < <(link_bytes_each 1)
  if [[ $impl == quorum* ]]; then
    local algo=auto
    [[ $impl == quorum:* ]] && algo=${impl#quorum:}
    line=$(mpirun_on "${P}1:$per_host,${P}2:$per_host" $((2 * per_host)) \
      -x QUORUM_ALLREDUCE_ALGO="$algo" \
      "$bench" -b "$bytes" -e "$bytes" -n "$iters" -w 2 -c 1 --json | grep '^{')
  else
    line=$(mpirun_on "${P}1:$per_host,${P}2:$per_host" $((2 * per_host)) \
      --mca pml ob1 --mca btl tcp,vader,self "$mpi_bench" -b "$bytes" -e "$bytes" \
      -n "$iters" -w 2 -J | grep '^{')
  fi
  local tx1
  read -r _ tx1 < <(link_bytes_each 1)
  python3 - "$line" "$impl" "$per_host" "$round" "$((tx1 - tx0))" "$calls" "$bytes" \
    "$link_gbs" >>"$rows" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
impl, per_host, rnd, sent, calls, size, link = sys.argv[2:]
oop = r["out_of_place"]
assert oop["wrong"] in (0, None), f"{impl}: {oop['wrong']} wrong values"
print(json.dumps({"impl": impl, "hosts": 2, "ranks_per_host": int(per_host), "round": int(rnd),
                  "size": int(size), "busbw_gbs": oop["busbw_gbs"],
                  "in_place_busbw_gbs": r["in_place"]["busbw_gbs"], "link_gbs": float(link),
                  "host1_sent_bytes": int(sent),
                  "sent_per_call_over_size": int(sent) / int(calls) / int(size)}))
PY
  tail -n 1 "$rows"
}

# iperf3 once per round too: on a loaded machine the link limit drifts
# with the CPU time the endpoints get.
for per_host in $layouts; do
  for round in $(seq 1 "$rounds"); do
    link_gbs=$(measure_link)
    echo "== 2x$per_host round $round: iperf3 ${P}1 -> ${P}2 $link_gbs GB/s (tbf $rate)"
    for algo in $algos; do
      if [ "$algo" = auto ]; then run quorum "$per_host" "$round"; else
        run "quorum:$algo" "$per_host" "$round"; fi
    done
    run mpi "$per_host" "$round"
  done
done
python3 - "$rows" "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
impls = list(dict.fromkeys(r["impl"] for r in rows))
print(f"\n{'layout':>7} {'impl':>20} {'busbw med':>9} {'worst':>7} {'/link':>6} "
      f"{'/mpi':>6} {'sent/call/size':>14} {'link':>6}")
for per_host in sorted({r["ranks_per_host"] for r in rows}):
    med = {}
    for impl in impls:
        sel = [r for r in rows if r["ranks_per_host"] == per_host and r["impl"] == impl]
        bw = [r["busbw_gbs"] for r in sel]
        med[impl] = statistics.median(bw)
    for impl in impls:
        sel = [r for r in rows if r["ranks_per_host"] == per_host and r["impl"] == impl]
        bw = [r["busbw_gbs"] for r in sel]
        ratio = f"{med[impl] / med['mpi']:.2f}" if impl != "mpi" else ""
        sent = statistics.median(r["sent_per_call_over_size"] for r in sel)
        link = statistics.median(r["link_gbs"] for r in sel)
        print(f"{'2x' + str(per_host):>7} {impl:>20} {med[impl]:9.3f} {min(bw):7.3f} "
              f"{med[impl] / link:6.2f} {ratio:>6} {sent:14.2f} {link:6.3f}")
    if "quorum:ring" in med and "quorum:hierarchical" in med:
        print(f"{'2x' + str(per_host):>7} hierarchical / ring busbw: "
              f"{med['quorum:hierarchical'] / med['quorum:ring']:.2f}")
print(f"(busbw in GB/s, out of place; link: iperf3's median over the rounds, GB/s per"
      f" direction; rows in {sys.argv[2]})")
PY
