#!/usr/bin/env bash
# allreduce_vs_mpi.sh: quorum's allreduce next to Open MPI's and next to the
# memory-bandwidth limit, measured side by side in one run (the machine drifts
# between runs, so only these ratios mean something).
#
#   perf/allreduce_vs_mpi.sh BUILD_DIR [OUT_JSON]
#
# Builds nothing. Runs, ROUNDS times and alternating: quorum-bench (2 ranks under
# quorum-run) on ordinary buffers and on buffers from quorum_mem_alloc
# (--shared-buffers: the zero-copy path), quorum-bench on ordinary buffers with
# QUORUM_SHM_CROSS_MEMORY_BYTES=0 (the copy path the cross-memory one replaces
# from 64 KiB), perf/mpi_allreduce_bench (2 ranks
# under mpirun, shared memory), perf/memcpy_bw (one thread) at the same sizes and
# once more at MEMBW_BYTES (default 256M, beyond any last-level cache: the
# memory-bandwidth limit); float32 sum, sizes MIN_BYTES..MAX_BYTES (x2).
# PER_SIZE=1 alternates the three programs for every size instead of every
# sweep (slower: one launch per size, but drift cannot separate them).
# Prints per size the median over rounds of quorum busbw, MPI busbw (out of
# place), their ratio, memcpy GB/s and quorum/memcpy, the same two ratios for
# quorum on mem_alloc buffers ("shared"), quorum/memcpy in place on both kinds
# of buffer ("qi", "si": gradients are reduced in place), then the memory-bandwidth
# limit ("membw": memcpy at MEMBW_BYTES) and quorum/membw on both kinds of buffer,
# out of place and in place ("q/mbw", "qi/mbw", "s/mbw", "si/mbw"), and quorum
# on ordinary buffers against its copy path ("q/copy", "qi/copyi"). Below the
# cache's size the per-size memcpy runs from cache, not memory, so the two
# columns differ there; from the sizes where the buffers leave the cache they
# agree, except that glibc's memcpy uses streaming stores only from its
# non-temporal threshold on (3/4 of the cache it sees per thread: 114 MiB on a
# VM that reports a 300 MiB L3, see `ld.so --list-tunables`), so the per-size
# memcpy below that reads every destination line first (at 64 MiB 7.6-9.4 GB/s
# there, 18.4 with GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x400000).
# "membw" stays the anchor. It writes them as JSON
# to OUT_JSON (default results/allreduce_vs_mpi.json, results/ is not tracked).
# Plot: perf/plot_allreduce.py.
set -euo pipefail

if [[ $# -lt 1 || ! -d $1 ]]; then
  echo "usage: $0 BUILD_DIR [OUT_JSON]   (env: ROUNDS=3 MIN_BYTES=8 MAX_BYTES=64M PER_SIZE=0" \
    "MEMBW_BYTES=256M)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-results/allreduce_vs_mpi.json}
mkdir -p "$(dirname "$out")"
rounds=${ROUNDS:-3}
min_bytes=${MIN_BYTES:-8}
max_bytes=${MAX_BYTES:-64M}
per_size=${PER_SIZE:-0}
membw_bytes=${MEMBW_BYTES:-256M}
nranks=2

bench=$build/tools/quorum-bench
launcher=$build/tools/quorum-run
mpi_bench=$build/perf/mpi_allreduce_bench
memcpy_bw=$build/perf/memcpy_bw
for exe in "$bench" "$launcher" "$mpi_bench" "$memcpy_bw"; do
  if [[ ! -x $exe ]]; then
    echo "$0: $exe is missing (build it first; mpi_allreduce_bench needs MPI)" >&2
    exit 2
  fi
done
command -v mpirun >/dev/null || { echo "$0: mpirun not found" >&2; exit 2; }

export UCX_NET_DEVICES=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_cmd=(mpirun --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
  -n "$nranks")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Sizes as plain byte counts (the programs accept K/M/G too).
to_bytes() {
  python3 -c 'import sys; s=sys.argv[1]; m={"K":10,"M":20,"G":30}
print(int(s[:-1]) << m[s[-1].upper()] if s[-1].upper() in m else int(s))' "$1"
}
lo=$(to_bytes "$min_bytes")
hi=$(to_bytes "$max_bytes")
if [[ $per_size == 1 ]]; then
  sizes=()
  for ((s = lo; s <= hi; s *= 2)); do sizes+=("$s"); done
else
  sizes=(sweep)
fi

run_round() {  # $1 = round, $2 = size or "sweep"
  local r=$1 b=$lo e=$hi
  if [[ $2 != sweep ]]; then b=$2 e=$2; fi
  "$launcher" -n "$nranks" --timeout 900 -- "$bench" allreduce -b "$b" -e "$e" -d float32 -o sum \
    --json-out "$tmp/q.$r.$2.jsonl" >"$tmp/q.$r.$2.log" 2>&1 ||
    { echo "$0: quorum-bench failed:" >&2; cat "$tmp/q.$r.$2.log" >&2; exit 1; }
  QUORUM_SHM_CROSS_MEMORY_BYTES=0 "$launcher" -n "$nranks" --timeout 900 -- "$bench" allreduce \
    -b "$b" -e "$e" -d float32 -o sum --json-out "$tmp/k.$r.$2.jsonl" >"$tmp/k.$r.$2.log" 2>&1 ||
    { echo "$0: quorum-bench (copy path) failed:" >&2; cat "$tmp/k.$r.$2.log" >&2; exit 1; }
  "$launcher" -n "$nranks" --timeout 900 -- "$bench" allreduce -b "$b" -e "$e" -d float32 -o sum \
    --shared-buffers --json-out "$tmp/s.$r.$2.jsonl" >"$tmp/s.$r.$2.log" 2>&1 ||
    { echo "$0: quorum-bench --shared-buffers failed:" >&2; cat "$tmp/s.$r.$2.log" >&2; exit 1; }
  "${mpirun_cmd[@]}" "$mpi_bench" -b "$b" -e "$e" -J >"$tmp/m.$r.$2.jsonl" 2>"$tmp/m.$r.$2.log" ||
    { echo "$0: mpi_allreduce_bench failed:" >&2; cat "$tmp/m.$r.$2.log" >&2; exit 1; }
  "$memcpy_bw" -b "$b" -e "$e" -J >"$tmp/c.$r.$2.jsonl"
  "$memcpy_bw" -b "$membw_bytes" -e "$membw_bytes" -J >"$tmp/w.$r.$2.jsonl"
}

for ((r = 1; r <= rounds; ++r)); do
  for s in "${sizes[@]}"; do
    if [[ $s == sweep ]]; then echo "round $r/$rounds" >&2; else echo "round $r/$rounds, size $s" >&2; fi
    run_round "$r" "$s"
  done
done

python3 - "$tmp" "$out" "$rounds" "$nranks" <<'PY'
import glob, json, statistics, sys, time
tmp, out, rounds, nranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def collect(prefix, pick):
    per_size = {}
    for path in sorted(glob.glob(f"{tmp}/{prefix}.*.jsonl")):
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            per_size.setdefault(row["size"], []).append(pick(row))
    return per_size

def oop(key):
    return lambda row: row["out_of_place"][key]

q_bus = collect("q", oop("busbw_gbs"))
q_time = collect("q", oop("time_us"))
def ip(key):
    return lambda row: row["in_place"][key]

def both_wrong(row):
    return (row["out_of_place"]["wrong"] or 0) + (row["in_place"]["wrong"] or 0)

q_wrong = collect("q", both_wrong)
q_ip_bus = collect("q", ip("busbw_gbs"))
s_bus = collect("s", oop("busbw_gbs"))
s_ip_bus = collect("s", ip("busbw_gbs"))
s_wrong = collect("s", both_wrong)
k_bus = collect("k", oop("busbw_gbs"))
k_ip_bus = collect("k", ip("busbw_gbs"))
k_wrong = collect("k", both_wrong)
m_bus = collect("m", oop("busbw_gbs"))
m_time = collect("m", oop("time_us"))
m_wrong = collect("m", oop("wrong"))
c_bw = collect("c", lambda row: row["memcpy_gbs"])
w_rows = collect("w", lambda row: row["memcpy_gbs"])
w_size, w_bws = next(iter(w_rows.items()))

med = lambda xs: statistics.median(xs) if xs else float("nan")
wb = med(w_bws)
per_w = lambda x: x / wb if wb > 0 and x == x else None
rows = []
for size in sorted(set(q_bus) & set(m_bus)):
    qb, mb, cb = med(q_bus[size]), med(m_bus[size]), med(c_bw.get(size, []))
    sb = med(s_bus.get(size, []))
    qi, si = med(q_ip_bus.get(size, [])), med(s_ip_bus.get(size, []))
    kb, ki = med(k_bus.get(size, [])), med(k_ip_bus.get(size, []))
    rows.append({
        "size": size,
        "quorum_busbw_gbs": qb, "quorum_time_us": med(q_time[size]),
        "quorum_inplace_busbw_gbs": qi,
        "ratio_quorum_inplace_memcpy": qi / cb if cb > 0 else None,
        "mpi_busbw_gbs": mb, "mpi_time_us": med(m_time[size]),
        "ratio_quorum_mpi": qb / mb if mb > 0 else None,
        "memcpy_gbs": cb,
        "ratio_quorum_memcpy": qb / cb if cb > 0 else None,
        "shared_busbw_gbs": sb,
        "ratio_shared_mpi": sb / mb if mb > 0 else None,
        "ratio_shared_memcpy": sb / cb if cb > 0 else None,
        "shared_inplace_busbw_gbs": si,
        "ratio_shared_inplace_memcpy": si / cb if cb > 0 else None,
        "membw_gbs": wb,
        "ratio_quorum_membw": per_w(qb), "ratio_quorum_inplace_membw": per_w(qi),
        "ratio_shared_membw": per_w(sb), "ratio_shared_inplace_membw": per_w(si),
        "copy_busbw_gbs": kb, "copy_inplace_busbw_gbs": ki,
        "ratio_quorum_copy": qb / kb if kb > 0 else None,
        "ratio_quorum_inplace_copy": qi / ki if ki > 0 else None,
        "quorum_wrong": sum(w or 0 for w in q_wrong[size]) + sum(w or 0 for w in s_wrong.get(size, []))
                        + sum(w or 0 for w in k_wrong.get(size, [])),
        "mpi_wrong": sum(w or 0 for w in m_wrong[size]),
        "rounds": len(q_bus[size]),
    })

print(f"# allreduce float32 sum, {nranks} ranks, out-of-place busbw (GB/s = 1e9 B/s; qi, si: "
      f"in place), median of {rounds} rounds")
print(f"#{'size':>11} {'quorum':>9} {'mpi':>9} {'q/mpi':>7} {'memcpy':>9} {'q/memcpy':>9}"
      f" {'shared':>9} {'s/mpi':>7} {'s/memcpy':>9} {'qi/memcpy':>9} {'si/memcpy':>9}"
      f" {'q_us':>10} {'mpi_us':>10} {'#wrong':>6}"
      f" {'membw':>7} {'q/mbw':>6} {'qi/mbw':>6} {'s/mbw':>6} {'si/mbw':>6}"
      f" {'q/copy':>6} {'qi/copyi':>8}")
fmt = lambda x, p=2: "-" if x is None or x != x else f"{x:.{p}f}"
for r in rows:
    print(f" {r['size']:>11} {fmt(r['quorum_busbw_gbs']):>9} {fmt(r['mpi_busbw_gbs']):>9}"
          f" {fmt(r['ratio_quorum_mpi']):>7} {fmt(r['memcpy_gbs']):>9}"
          f" {fmt(r['ratio_quorum_memcpy'], 3):>9} {fmt(r['shared_busbw_gbs']):>9}"
          f" {fmt(r['ratio_shared_mpi']):>7} {fmt(r['ratio_shared_memcpy'], 3):>9}"
          f" {fmt(r['ratio_quorum_inplace_memcpy'], 3):>9}"
          f" {fmt(r['ratio_shared_inplace_memcpy'], 3):>9}"
          f" {fmt(r['quorum_time_us']):>10}"
          f" {fmt(r['mpi_time_us']):>10} {r['quorum_wrong'] + r['mpi_wrong']:>6}"
          f" {fmt(r['membw_gbs']):>7} {fmt(r['ratio_quorum_membw']):>6}"
          f" {fmt(r['ratio_quorum_inplace_membw']):>6} {fmt(r['ratio_shared_membw']):>6}"
          f" {fmt(r['ratio_shared_inplace_membw']):>6}"
          f" {fmt(r['ratio_quorum_copy']):>6} {fmt(r['ratio_quorum_inplace_copy']):>8}")
json.dump({"what": "allreduce float32 sum, busbw (out of place unless named inplace), "
                   "median over rounds",
           "nranks": nranks, "rounds": rounds, "membw_bytes": w_size, "membw_gbs": wb,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows},
          open(out, "w"), indent=1)
print(f"# written to {out}")
bad = sum(r["quorum_wrong"] + r["mpi_wrong"] for r in rows)
sys.exit(3 if bad else 0)
PY
