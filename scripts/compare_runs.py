#!/usr/bin/env python3
"""compare_runs.py: side-by-side table of quorum-train runs (their 'summary' lines).

Usage: compare_runs.py DIR LABEL [LABEL ...]
Each DIR/LABEL holds one run's output. The first label is the baseline (the
synchronous run): the table gives each run's training time, final test
accuracy, speedup over the baseline's time, and when (training seconds, at an
evaluation: each epoch's end, and inside epochs with --evals-per-epoch) it
first reached the baseline's final accuracy less 0.5 points, with
the ratio of the baseline's time to that.
"""
import sys


def summary(path):
    lines = [l for l in open(path) if "summary" in l]
    if not lines:
        sys.exit(f"compare_runs: {path}: no summary line (did the run fail?)")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split("summary", 1)[1].split())
    curve = [tuple(float(x.rstrip("s%")) for x in point.split(":"))
             for point in fields["curve"].split(",") if point]
    return float(fields["train_seconds"]), float(fields["test_accuracy"]), curve, fields["replicas"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    folder, labels = sys.argv[1], sys.argv[2:]
    runs = {label: summary(f"{folder}/{label}") for label in labels}
    base_t, base_acc, _, _ = runs[labels[0]]
    goal = base_acc - 0.5
    print(f"\n{'run':>16} {'train s':>8} {'test acc %':>10} {'speedup':>8} "
          f"{'s to ' + format(goal, '.2f') + '%':>11} {'sooner':>7} {'replicas':>9}")
    for label, (t, acc, curve, replicas) in runs.items():
        reach = next((s for s, a in curve if a >= goal), None)
        reach_s = f"{reach:.2f}" if reach is not None else "never"
        sooner = f"{base_t / reach:.2f}x" if reach else "-"
        print(f"{label:>16} {t:8.2f} {acc:10.2f} {base_t / t:7.2f}x {reach_s:>11} {sooner:>7} "
              f"{replicas:>9}")


if __name__ == "__main__":
    main()
