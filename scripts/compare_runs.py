#!/usr/bin/env python3
"""compare_runs.py: time to accuracy of quorum-train runs against a synchronous one.

Usage: compare_runs.py [--seeds S1,S2,...] [--goal X] DIR LABEL [LABEL ...]
Each DIR/LABEL (with --seeds: DIR/seed-S/LABEL for every seed S) holds one
run's output, whose 'summary' line gives its curve: at every test evaluation
the training time, the test accuracy and the epochs trained. The first label
is the baseline (the synchronous run of the same seed). Its target is its
final test accuracy less 0.5 points. Per run:
  s to T      training seconds when the run first reached the target
  sync s to T when the baseline itself first reached it (never its whole run)
  strict      their ratio: the strict speedup (time to accuracy)
  ep to T     epochs trained when the run first reached the target
  stat eff    statistical efficiency: the baseline's epochs to the target / the run's
  thru/ep     per-epoch throughput gain: baseline's seconds per epoch / the run's
  eq-ep time  the equal-epochs view: the baseline's whole run / the run's time at
              the baseline's number of epochs (its end when it runs as many)
  eq-ep dacc  ... and the run's accuracy there less the baseline's final one
  final ok    the run ended at or above the target
With several seeds, a summary per run gives the median and the worst of each
figure and how many seeds met the goal (strict speedup >= --goal, default
1.27, eager-SGD's headline, and final ok).
"""
import argparse
import statistics
import sys


def summary(path):
    try:
        lines = [l for l in open(path) if "summary" in l]
    except OSError as e:
        sys.exit(f"compare_runs: {path}: {e.strerror}")
    if not lines:
        sys.exit(f"compare_runs: {path}: no summary line (did the run fail?)")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split("summary", 1)[1].split())
    curve = []
    for point in fields["curve"].split(","):
        if not point:
            continue
        parts = point.split(":")
        if len(parts) < 3:
            sys.exit(f"compare_runs: {path}: curve point '{point}' has no epochs (old build?)")
        curve.append((float(parts[0].rstrip("s")), float(parts[1].rstrip("%")),
                      float(parts[2].rstrip("e"))))
    if not curve:
        sys.exit(f"compare_runs: {path}: empty curve")
    return {"seconds": float(fields["train_seconds"]), "accuracy": float(fields["test_accuracy"]),
            "curve": curve, "replicas": fields["replicas"]}


def first_reach(curve, goal):
    """(seconds, epochs) of the first evaluation at or above goal, or None."""
    return next(((s, e) for s, a, e in curve if a >= goal), None)


def figures(base, run):
    goal = base["accuracy"] - 0.5
    base_s, base_ep = first_reach(base["curve"], goal)
    base_epochs = base["curve"][-1][2]
    run_epochs = run["curve"][-1][2]
    reach = first_reach(run["curve"], goal)
    at_eq = next(((s, a) for s, a, e in run["curve"] if e >= base_epochs - 1e-6), None)
    return {
        "goal": goal,
        "base_s": base_s,
        "reach_s": reach[0] if reach else None,
        "reach_ep": reach[1] if reach else None,
        "strict": base_s / reach[0] if reach else 0.0,
        "stat_eff": base_ep / reach[1] if reach else 0.0,
        "thru": (base["seconds"] / base_epochs) / (run["seconds"] / run_epochs),
        "eq_time": base["seconds"] / at_eq[0] if at_eq else None,
        "eq_dacc": at_eq[1] - base["accuracy"] if at_eq else None,
        "final_ok": run["accuracy"] >= goal,
        "epochs": run_epochs,
    }


def fmt(x, spec, none="never", unit=""):
    return none if x is None else format(x, spec) + unit


def print_table(runs, labels, title):
    base = runs[labels[0]]
    goal = base["accuracy"] - 0.5
    print(f"\n{title}target {goal:.2f}% (sync's final {base['accuracy']:.2f}% less 0.5 points)")
    print(f"{'run':>34} {'train s':>8} {'epochs':>6} {'final %':>7} {'s to T':>7} "
          f"{'sync s to T':>11} {'strict':>7} {'ep to T':>7} {'stat eff':>8} {'thru/ep':>7} "
          f"{'eq-ep time':>10} {'eq-ep dacc':>10} {'final ok':>8} {'replicas':>8}")
    for label in labels:
        run = runs[label]
        f = figures(base, run)
        print(f"{label:>34} {run['seconds']:8.2f} {f['epochs']:6.3g} {run['accuracy']:7.2f} "
              f"{fmt(f['reach_s'], '.2f'):>7} {f['base_s']:11.2f} "
              f"{fmt(f['strict'] or None, '.2f', '-', 'x'):>7} {fmt(f['reach_ep'], '.2f'):>7} "
              f"{fmt(f['stat_eff'] or None, '.2f', '-'):>8} {f['thru']:6.2f}x "
              f"{fmt(f['eq_time'], '.2f', '-', 'x'):>10} {fmt(f['eq_dacc'], '+.2f', '-'):>10} "
              f"{'yes' if f['final_ok'] else 'NO':>8} {run['replicas']:>8}")


def print_summary(per_seed, labels, seeds, goal_ratio):
    print(f"\nover {len(seeds)} seeds ({' '.join(seeds)}): median (worst); 'met': strict "
          f">= {goal_ratio}x and final ok")
    print(f"{'run':>34} {'strict':>14} {'met':>6} {'stat eff':>14} {'thru/ep':>7} "
          f"{'eq-ep time':>10} {'eq-ep dacc':>14} {'final ok':>8}")
    for label in labels[1:]:
        fs = [figures(runs[labels[0]], runs[label]) for runs in per_seed]
        strict = [f["strict"] for f in fs]
        eff = [f["stat_eff"] for f in fs]
        thru = [f["thru"] for f in fs]
        eq_t = [f["eq_time"] for f in fs if f["eq_time"] is not None]
        eq_a = [f["eq_dacc"] for f in fs if f["eq_dacc"] is not None]
        met = sum(1 for f in fs if f["strict"] >= goal_ratio and f["final_ok"])
        ok = sum(1 for f in fs if f["final_ok"])
        med = statistics.median
        print(f"{label:>34} {med(strict):5.2f}x ({min(strict):4.2f}x) {met:>3}/{len(fs):<2} "
              f"{med(eff):5.2f} ({min(eff):5.2f}) {med(thru):6.2f}x "
              f"{fmt(med(eq_t) if eq_t else None, '.2f', '-', 'x'):>10} "
              f"{fmt(med(eq_a) if eq_a else None, '+.2f', '-'):>6} "
              f"({fmt(min(eq_a) if eq_a else None, '+.2f', '-'):>5}) {ok:>4}/{len(fs):<3}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", help="comma-separated seeds: runs in DIR/seed-S/LABEL")
    ap.add_argument("--goal", type=float, default=1.27, help="strict speedup that counts as met")
    ap.add_argument("dir")
    ap.add_argument("labels", nargs="+")
    a = ap.parse_args()
    if a.seeds:
        seeds = a.seeds.split(",")
        per_seed = []
        for seed in seeds:
            runs = {l: summary(f"{a.dir}/seed-{seed}/{l}") for l in a.labels}
            print_table(runs, a.labels, f"seed {seed}: ")
            per_seed.append(runs)
        if len(a.labels) > 1:
            print_summary(per_seed, a.labels, seeds, a.goal)
    else:
        runs = {l: summary(f"{a.dir}/{l}") for l in a.labels}
        print_table(runs, a.labels, "")


if __name__ == "__main__":
    main()
