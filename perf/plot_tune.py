#!/usr/bin/env python3
"""plot_tune.py: draws quorum-tune's predictions (its --json output).

    perf/plot_tune.py TUNE.json OUT.png

Cost against time to the target accuracy for every (batch, ranks) predicted,
one marker colour per rank count, the Pareto front as a line, its knee and
the chosen configuration marked; extrapolated rows are hollow. quorum-tune
--plot runs this script."""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(7, 5))
    for k in sorted({r["ranks"] for r in rows}):
        mine = [r for r in rows if r["ranks"] == k]
        for hollow in (False, True):
            sel = [r for r in mine if r["extrapolated"] == hollow]
            if not sel:
                continue
            ax.scatter([r["seconds"] for r in sel], [r["cost"] for r in sel],
                       facecolors="none" if hollow else f"C{k % 10}", edgecolors=f"C{k % 10}",
                       label=f"K={k}" + (" (extrapolated)" if hollow else ""))
            for r in sel:
                ax.annotate(str(r["global_batch"]), (r["seconds"], r["cost"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["seconds"])
    ax.plot([r["seconds"] for r in front], [r["cost"] for r in front], "k--", lw=1,
            label="Pareto front")
    for r in rows:
        if r["knee"]:
            ax.scatter([r["seconds"]], [r["cost"]], s=200, marker="o", facecolors="none",
                       edgecolors="red", label="knee")
    c = doc["choice"]
    ax.scatter([c["seconds"]], [c["cost"]], s=120, marker="*", color="gold", edgecolors="k",
               label="chosen", zorder=5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"predicted time to {doc['target_accuracy']:.2f}% (s)")
    ax.set_ylabel(f"predicted cost ({doc['cost_unit']})")
    ax.set_title(f"quorum-tune: {doc['model']} on {doc['data']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], format="png", dpi=110)


if __name__ == "__main__":
    main()
