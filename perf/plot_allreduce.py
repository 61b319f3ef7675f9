#!/usr/bin/env python3
"""plot_allreduce.py: draws the JSON written by allreduce_vs_mpi.sh.

    perf/plot_allreduce.py results/allreduce_vs_mpi.json [out.png]

Top: busbw of quorum and Open MPI and the one-thread memcpy bandwidth per size
(log-log). Bottom: the ratios quorum/MPI and quorum/memcpy."""
import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(f"plot_allreduce.py: this python ({sys.executable}) has no matplotlib; "
             "run it with the system's /usr/bin/python3 (Debian's python3-matplotlib)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(n):
    for unit in ("B", "K", "M", "G"):
        if n < 1024:
            return f"{n}{unit}"
        n //= 1024
    return f"{n}T"


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.load(open(sys.argv[1]))
    out = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1].rsplit(".", 1)[0] + ".png"
    rows = data["rows"]
    sizes = [r["size"] for r in rows]
    num = lambda key: [r[key] if r.get(key) is not None else float("nan") for r in rows]

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    top.plot(sizes, num("quorum_busbw_gbs"), "o-", label="quorum (out-of-place)")
    top.plot(sizes, num("quorum_inplace_busbw_gbs"), ".:", label="quorum (in-place)")
    top.plot(sizes, num("shared_busbw_gbs"), "D-", label="quorum, quorum_mem_alloc buffers")
    top.plot(sizes, num("mpi_busbw_gbs"), "s-", label="Open MPI MPI_Allreduce")
    top.plot(sizes, num("memcpy_gbs"), "^--", label="memcpy, one thread")
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("GB/s (busbw; memcpy: bytes/s)")
    top.set_title(f"allreduce float32 sum, {data['nranks']} ranks, "
                  f"median of {data['rounds']} rounds ({data.get('date', '')})")
    top.grid(True, which="both", alpha=0.3)
    top.legend()

    bottom.plot(sizes, num("ratio_quorum_mpi"), "o-", label="quorum / MPI")
    bottom.plot(sizes, num("ratio_quorum_memcpy"), "^--", label="quorum / memcpy")
    bottom.plot(sizes, num("ratio_shared_memcpy"), "D--", label="quorum (mem_alloc) / memcpy")
    bottom.axhline(1.0, color="gray", lw=0.8)
    bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    bottom.set_ylabel("ratio")
    bottom.set_xlabel("message size")
    bottom.set_xticks(sizes[::2])
    bottom.set_xticklabels([human(s) for s in sizes[::2]], rotation=45)
    bottom.grid(True, which="both", alpha=0.3)
    bottom.legend()

    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
