#!/usr/bin/env python3
"""plot_training.py: draws training runs logged by `quorum-train --log FILE`.

    perf/plot_training.py [-o OUT.png] [--target ACC] [--smooth N] [--label NAME]... LOG...
    perf/plot_training.py --summary [--target ACC] LOG...

Left: training loss against training time (the step records as a line, the
mean of each N with --smooth N; each epoch's mean as a marker). Right: test
accuracy at each evaluation (epoch ends, and inside epochs with
--evals-per-epoch) against training time, with an optional dashed line at
--target (percent). Training time leaves the evaluations out, as the summary
line's train_seconds does.
A log holding several runs (--log appends) is split at each start record.
A start record of a resumed run (start_step above 0: --resume) continues the
run before it, in the same log or an earlier one, when both train the same
recipe (model, data, batch, seed, ranks, reduction): they are drawn as one
run whose training time goes on where the checkpoint left it (logs from
before the checkpoint carried it: where the earlier part's records end), with
a dotted line at each resume, and the earlier part's records past the
checkpoint's step (steps trained again) left out. Each run has one colour on
every panel. Each run is labelled from its start record (reduction, ranks,
options) unless --label names it (once per run, in order). --summary prints
one line per run instead of drawing (no matplotlib needed), with when it
first reached --target if given. Default OUT: the first log's name with .png."""
import argparse
import json
import sys


def fail(message):
    sys.exit(f"plot_training.py: {message}")


# What a resumed part must share with the run it continues.
SAME_RUN_KEYS = ("model", "data", "train_limit", "batch", "seed", "ranks", "reduce")


def new_run(start, where):
    return {"start": start, "where": where, "steps": [], "evals": [], "epochs": [], "resumes": []}


def continues(run, start):
    """Whether start record `start` resumes `run` (the same recipe, a later step)."""
    return (int(start.get("start_step", 0) or 0) > 0
            and all(run["start"].get(k) == start.get(k) for k in SAME_RUN_KEYS))


def resume(run, start):
    """Continues `run` with a resumed part: returns the offset of the part's
    training times (0 when its start record carries the time so far)."""
    step = int(start["start_step"])
    # Steps after the checkpoint were trained again by this part.
    run["steps"] = [p for p in run["steps"] if p[2] <= step]
    run["evals"] = [p for p in run["evals"] if p[2] <= step]
    before = max([p[0] for key in ("steps", "evals", "epochs") for p in run[key]], default=0.0)
    carried = float(start.get("start_train_seconds", 0) or 0)
    offset = 0.0 if carried > 0 else before
    run["resumes"].append(carried if carried > 0 else before)
    return offset


def read_runs(path, earlier=()):
    """The runs of one log: dicts with start, steps, evals and epochs (times
    in training seconds), and the training times where it was resumed. A
    resumed part continues a run of this log or of `earlier` (the runs of the
    logs before it), which it then extends instead of returning."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    runs = []
    previous = list(earlier)
    current = None  # the run the records belong to
    offset = 0.0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path}:{number}: not JSON ({e.msg}): {line[:60]}")
        event = record.get("event") if isinstance(record, dict) else None
        if event not in ("start", "step", "eval", "epoch", "batch_decision"):
            fail(f"{path}:{number}: not a quorum-train record "
                 "(no event start, step, eval, epoch or batch_decision)")
        if event == "batch_decision":
            continue  # --batch auto's tuner: its choices show in the epochs' batches
        if event == "start":
            last = (runs or previous or [None])[-1]
            if last is not None and continues(last, record):
                offset = resume(last, record)
                current = last
            else:
                offset = 0.0
                current = new_run(record, (path, len(runs) + 1))
                runs.append(current)
            continue
        if current is None:
            fail(f"{path}:{number}: a {event} record before any start record")
        try:
            seconds = offset + float(record["train_seconds"])
            if event == "step":
                current["steps"].append((seconds, float(record["loss"]), int(record["step"])))
            elif event == "eval":
                current["evals"].append((seconds, 100 * float(record["test_accuracy"]),
                                         int(record["step"])))
            else:
                current["epochs"].append((seconds, float(record["train_loss"]),
                                          100 * float(record["test_accuracy"]),
                                          record.get("epoch")))
        except (KeyError, TypeError, ValueError) as e:
            fail(f"{path}:{number}: {event} record without a usable {e}")
    if current is None:
        fail(f"{path}: no start record (is it a quorum-train --log file?)")
    return runs


def read_all(paths):
    """The runs of every log, a resumed part joined to the run it continues."""
    runs = []
    for path in paths:
        runs += read_runs(path, runs)
    for run in runs:
        if not run["epochs"]:
            path, i = run["where"]
            fail(f"{path}: run {i} has no epoch record (stopped before its first epoch ended?)")
        # Every evaluation, in time order: (training seconds, test accuracy %).
        run["accuracy"] = sorted([e[:2] for e in run["evals"]] +
                                 [(e[0], e[2]) for e in run["epochs"]])
    return runs


def epochs_trained(run):
    """Epochs the run reported (an epoch cut by --max-steps and finished after
    a resume counts once)."""
    numbers = [e[3] for e in run["epochs"]]
    return len(set(numbers)) if None not in numbers else len(numbers)


def smoothed(points, n):
    """Means of each n consecutive (x, y) points (the last group may be shorter)."""
    points = [p[:2] for p in points]
    groups = [points[i:i + n] for i in range(0, len(points), n)]
    return [(sum(p[0] for p in g) / len(g), sum(p[1] for p in g) / len(g)) for g in groups]


def describe(start):
    """A label from a start record, e.g. 'solo 4 ranks, drop, sqrt, delay 8 ms'."""
    reduce = start.get("reduce", "local")
    ranks = start.get("ranks", 1)
    label = f"{reduce}, {ranks} rank{'s' if ranks != 1 else ''}"
    if reduce in ("solo", "majority"):
        if start.get("drop_late"):
            label += ", drop"
        elif start.get("carry_weight", 1) != 1:
            label += f", carry {start['carry_weight']:g}"
        if start.get("partial_scale", "world") != "world":
            label += f", {start['partial_scale']}"
        if start.get("activation_delay_ms"):
            label += f", delay {start['activation_delay_ms']:g} ms"
    return label + f", {start.get('epochs', '?')} ep"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", metavar="LOG")
    parser.add_argument("-o", "--output")
    parser.add_argument("--target", type=float, help="draw this test accuracy (percent)")
    parser.add_argument("--smooth", type=int, default=1, metavar="N",
                        help="draw the mean of each N step losses")
    parser.add_argument("--label", action="append", default=[], help="name of the next run")
    parser.add_argument("--summary", action="store_true", help="print the runs, draw nothing")
    args = parser.parse_args()
    if args.smooth < 1:
        fail(f"--smooth {args.smooth}: give 1 or more step records per point")

    runs = read_all(args.logs)
    if len(args.label) > len(runs):
        fail(f"{len(args.label)} labels for {len(runs)} runs")
    for i, run in enumerate(runs):
        run["label"] = args.label[i] if i < len(args.label) else describe(run["start"])

    if args.summary:
        for run in runs:
            seconds, _, accuracy, _ = run["epochs"][-1]
            best = max(a for _, a in run["accuracy"])
            resumed = len(run["resumes"])
            line = (f"{run['label']}: {epochs_trained(run)} epochs, {seconds:.2f} s, "
                    f"test accuracy {accuracy:.2f}% (best {best:.2f}%)")
            if args.target is not None:
                reach = next((t for t, a in run["accuracy"] if a >= args.target), None)
                line += (f", {args.target:g}% at {reach:.2f} s" if reach is not None
                         else f", never {args.target:g}%")
            if resumed:
                line += f", resumed {resumed}x"
            print(line)
        return 0

    try:
        import matplotlib
    except ImportError:
        fail(f"this python ({sys.executable}) has no matplotlib; run it with the system's "
             "/usr/bin/python3 (Debian's python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    # One colour per run, the same on every panel.
    palette = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, run in enumerate(runs):
        color = palette[i % len(palette)]
        epochs = run["epochs"]
        if run["steps"]:
            loss_ax.plot(*zip(*smoothed(run["steps"], args.smooth)), linewidth=1, alpha=0.8,
                         color=color, label=run["label"])
        loss_ax.plot([e[0] for e in epochs], [e[1] for e in epochs], "o", color=color,
                     markersize=4, label=None if run["steps"] else run["label"])
        acc_ax.plot(*zip(*run["accuracy"]), "o-", color=color, markersize=4 if
                    len(run["accuracy"]) == len(epochs) else 2, label=run["label"])
        for at in run["resumes"]:
            for ax in (loss_ax, acc_ax):
                ax.axvline(at, color=color, linestyle=":", linewidth=1)
    if args.target is not None:
        acc_ax.axhline(args.target, color="gray", linestyle="--", linewidth=1,
                       label=f"target {args.target:g}%")
    loss_ax.set(xlabel="training time (s)", ylabel="training loss", yscale="log",
                title="training loss (steps" + (f", means of {args.smooth}" if args.smooth > 1
                                                else "") + "; markers: epoch means)")
    acc_ax.set(xlabel="training time (s)", ylabel="test accuracy (%)",
               title="test accuracy at each evaluation" +
               ("; dotted: resumed" if any(run["resumes"] for run in runs) else ""))
    for ax in (loss_ax, acc_ax):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = args.output or args.logs[0].rsplit(".", 1)[0] + ".png"
    fig.savefig(out, dpi=120)
    print(f"plot_training.py: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
