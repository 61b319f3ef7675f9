#!/bin/bash
# plot_test.sh QUORUM_RUN QUORUM_TRAIN PLOT_TRAINING: quorum-train's JSON-lines
# log and perf/plot_training.py, which draws runs from such logs.
#  1. The log's start record names the run (ranks, reduction, options); step
#     and epoch records carry the training time, whose last value is the
#     summary line's train_seconds.
#  2. --summary lists every run of every log (a log --log appended to twice
#     holds two), labelled from its start record or by --label; with --target,
#     when each first reached it, counting the evaluations inside epochs
#     (--evals-per-epoch).
#  3. It draws a PNG (with Debian's python3-matplotlib), also with --smooth,
#     each run in one colour on every panel.
#  4. A run stopped and resumed (its log continued, or continued in another
#     log) is one run, whose training time goes on from its first part's,
#     also in logs whose start records do not carry that time (older builds).
#  5. Unreadable, malformed or incomplete logs and too many labels fail with
#     a message naming the file (and line).
set -u
run=$1
train=$2
plot=$3
source "$(dirname "$0")/../support/checks.sh"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
common=(--data synthetic --model fm-s --epochs 2 --batch 16 --seed 3 --progress-every 0
  --log-every 10)

"$train" "${common[@]}" --log "$tmp/a.jsonl" >"$tmp/local" 2>&1 || fail "1 rank: $(tail -3 "$tmp/local")"
"$run" -n 2 --timeout 300 -- "$train" "${common[@]}" --reduce solo --drop-late \
  --partial-scale sqrt --log "$tmp/a.jsonl" >"$tmp/solo" 2>&1 || fail "solo: $(tail -5 "$tmp/solo")"
"$run" -n 2 --timeout 300 -- "$train" "${common[@]}" --reduce sync --log "$tmp/b.jsonl" \
  --evals-per-epoch 2 >"$tmp/sync" 2>&1 || fail "sync: $(tail -5 "$tmp/sync")"
# A run stopped inside epoch 2 and resumed, in one log (r) and in two (r1, r2).
"$train" "${common[@]}" --max-steps 150 --checkpoint "$tmp/ckpt" --log "$tmp/r.jsonl" \
  >"$tmp/r1" 2>&1 || fail "first part: $(tail -3 "$tmp/r1")"
cp "$tmp/r.jsonl" "$tmp/r1.jsonl"
"$train" "${common[@]}" --resume "$tmp/ckpt" --log "$tmp/r2.jsonl" >"$tmp/r2" 2>&1 ||
  fail "resumed part: $(tail -3 "$tmp/r2")"
cat "$tmp/r2.jsonl" >>"$tmp/r.jsonl"

# 1. Records.
"$py" - "$tmp/a.jsonl" "$tmp/solo" <<'PY' || fail "log records"
import json, re, sys
records = [json.loads(l) for l in open(sys.argv[1])]
starts = [r for r in records if r["event"] == "start"]
assert len(starts) == 2, f"{len(starts)} start records, expected 2"
solo = starts[1]
want = {"ranks": 2, "reduce": "solo", "drop_late": True, "partial_scale": "sqrt"}
assert all(solo.get(k) == v for k, v in want.items()), f"solo start record: {solo}"
assert starts[0]["ranks"] == 1 and starts[0]["reduce"] == "local", f"local: {starts[0]}"
second = records[records.index(solo):]
times = [r["train_seconds"] for r in second if r["event"] in ("step", "epoch")]
assert times and all(b >= a for a, b in zip(times, times[1:])), f"times not rising: {times}"
summary = re.search(r"train_seconds=([0-9.]+)", open(sys.argv[2]).read()).group(1)
last = [r for r in second if r["event"] == "epoch"][-1]["train_seconds"]
assert f"{last:.2f}" == summary, f"last epoch at {last:.2f} s, summary {summary} s"
PY

# 2. Summary.
"$py" "$plot" --summary "$tmp/a.jsonl" "$tmp/b.jsonl" >"$tmp/summary" 2>&1 ||
  fail "--summary: $(cat "$tmp/summary")"
[ "$(grep -c '2 epochs' "$tmp/summary")" -eq 3 ] || fail "--summary: $(cat "$tmp/summary")"
grep -q "^local, 1 rank, 2 ep:" "$tmp/summary" || fail "no local run: $(cat "$tmp/summary")"
grep -q "^solo, 2 ranks, drop, sqrt, 2 ep:" "$tmp/summary" || fail "no solo run: $(cat "$tmp/summary")"
grep -q "^sync, 2 ranks, 2 ep:" "$tmp/summary" || fail "no sync run: $(cat "$tmp/summary")"
"$py" "$plot" --summary --label one --label two "$tmp/a.jsonl" >"$tmp/labels" 2>&1
grep -q "^two: 2 epochs" "$tmp/labels" || fail "--label: $(cat "$tmp/labels")"
# Any accuracy is reached at the first evaluation: in the sync run, the one
# half-way through epoch 1 (its first eval record); 101% never.
"$py" "$plot" --summary --target 0 "$tmp/b.jsonl" >"$tmp/target" 2>&1
first=$("$py" -c "import json, sys
print('%.2f' % next(r['train_seconds'] for r in map(json.loads, open(sys.argv[1]))
                    if r['event'] == 'eval'))" "$tmp/b.jsonl")
grep -q "^sync, 2 ranks, 2 ep: .*, 0% at $first s\$" "$tmp/target" ||
  fail "--target 0: not at the first evaluation ($first s): $(cat "$tmp/target")"
"$py" "$plot" --summary --target 101 "$tmp/b.jsonl" >"$tmp/target" 2>&1
grep -q "never 101%" "$tmp/target" || fail "--target 101: $(cat "$tmp/target")"

# 3. Drawing: one colour per run, the same on both panels (its loss line,
# epoch markers and accuracy), and another for every run.
if "$py" -c "import matplotlib" 2>/dev/null; then
  "$py" "$plot" -o "$tmp/runs.png" --target 90 --smooth 3 "$tmp/a.jsonl" "$tmp/b.jsonl" \
    >"$tmp/draw" 2>&1 ||
    fail "drawing: $(cat "$tmp/draw")"
  [ "$(head -c 4 "$tmp/runs.png" 2>/dev/null | tail -c 3)" = "PNG" ] || fail "no PNG written"
  # The sync run without its step records (as with --log-every 0): only markers.
  grep -v '"event":"step"' "$tmp/b.jsonl" >"$tmp/nosteps.jsonl"
  "$py" - "$plot" "$tmp/colours.png" "$tmp/a.jsonl" "$tmp/nosteps.jsonl" "$tmp/r.jsonl" \
    >"$tmp/colours" 2>&1 <<'PY' || fail "colours: $(tail -3 "$tmp/colours")"
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.colors import to_hex
plot, out, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.argv = [plot, "-o", out, "--label", "local", "--label", "solo", "--label", "sync",
            "--label", "resumed"] + logs
try:
    runpy.run_path(plot, run_name="__main__")
except SystemExit as e:
    assert not e.code, f"exit {e.code}"
axes = plt.gcf().axes
colours = {}  # label -> colours of its lines on every panel
for ax in axes:
    for line in ax.get_lines():
        colours.setdefault(line.get_label(), set()).add(to_hex(line.get_color()))
    # the legend names every run
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert all(n in names for n in ("local", "solo", "sync", "resumed")), names
runs = {k: v for k, v in colours.items() if not k.startswith("_")}
assert set(runs) == {"local", "solo", "sync", "resumed"}, runs
assert all(len(c) == 1 for c in runs.values()), f"a run in several colours: {runs}"
assert len({next(iter(c)) for c in runs.values()}) == 4, f"runs sharing a colour: {runs}"
# Every unlabelled line (epoch markers, the resume's dotted line) has its run's colour.
run_colours = set().union(*runs.values())
assert all(c <= run_colours for k, c in colours.items() if k.startswith("_")), colours
PY
else
  echo "note: $py has no matplotlib; drawing not checked"
fi

# 4. Resumed runs.
"$py" "$plot" --summary "$tmp/r.jsonl" >"$tmp/resumed" 2>&1 || fail "resumed: $(cat "$tmp/resumed")"
"$py" "$plot" --summary "$tmp/r1.jsonl" "$tmp/r2.jsonl" >"$tmp/resumed2" 2>&1 ||
  fail "resumed in two logs: $(cat "$tmp/resumed2")"
[ "$(wc -l <"$tmp/resumed")" -eq 1 ] &&
  grep -q "^local, 1 rank, 2 ep: 2 epochs, .*resumed 1x" "$tmp/resumed" ||
  fail "resumed run not one run: $(cat "$tmp/resumed")"
cmp -s "$tmp/resumed" "$tmp/resumed2" ||
  fail "one log: $(cat "$tmp/resumed"); two: $(cat "$tmp/resumed2")"
# Its training time ends where the resumed part's summary line says (which
# counts from the checkpoint's time), above the first part's.
total=$(grep -o 'train_seconds=[0-9.]*' "$tmp/r2" | cut -d= -f2)
part=$(grep -o 'train_seconds=[0-9.]*' "$tmp/r1" | cut -d= -f2)
grep -q ", $total s, " "$tmp/resumed" || fail "resumed run ends at $total s: $(cat "$tmp/resumed")"
awk -v a="$part" -v b="$total" 'BEGIN { exit !(b > a && a > 0) }' ||
  fail "resumed part ends at $total s, the first part at $part s"
# A log of an older build: no start_train_seconds, the resumed part's times
# from 0. It is drawn continuing where the first part's records end.
"$py" - "$tmp/r.jsonl" "$tmp/old.jsonl" <<'PY' || fail "making an old log"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
offset = 0.0
with open(sys.argv[2], "w") as out:
    for r in records:
        if r["event"] == "start":
            offset = r.pop("start_train_seconds")
            # The first part's records end at the checkpoint's time.
        elif "train_seconds" in r:
            r["train_seconds"] -= offset
        out.write(json.dumps(r) + "\n")
PY
"$py" "$plot" --summary "$tmp/old.jsonl" >"$tmp/old" 2>&1 || fail "old log: $(cat "$tmp/old")"
cmp -s "$tmp/resumed" "$tmp/old" || fail "old log: $(cat "$tmp/old"), new: $(cat "$tmp/resumed")"

# 5. Bad input.
expect_error() {  # description, text in the message, args...
  local what=$1 text=$2
  shift 2
  if "$py" "$plot" --summary "$@" >"$tmp/err" 2>&1; then fail "$what: exit status 0"; return; fi
  grep -qF -- "$text" "$tmp/err" || fail "$what: no '$text' in: $(cat "$tmp/err")"
}
expect_error "missing log" "cannot read $tmp/none.jsonl" "$tmp/none.jsonl"
{ head -3 "$tmp/b.jsonl"; echo '{"event": "epoch", "train_seconds": '; } >"$tmp/cut.jsonl"
expect_error "truncated record" "$tmp/cut.jsonl:4: not JSON" "$tmp/cut.jsonl"
echo '{"answer": 42}' >"$tmp/other.jsonl"
expect_error "foreign JSON" "$tmp/other.jsonl:1: not a quorum-train record" "$tmp/other.jsonl"
grep -v '"start"' "$tmp/b.jsonl" >"$tmp/headless.jsonl"
expect_error "no start record" "$tmp/headless.jsonl:1: a step record before any start" \
  "$tmp/headless.jsonl"
grep -v '"epoch"' "$tmp/b.jsonl" | grep -v '"step"' >"$tmp/startonly.jsonl"
expect_error "no epoch" "run 1 has no epoch record" "$tmp/startonly.jsonl"
: >"$tmp/empty.jsonl"
expect_error "empty log" "$tmp/empty.jsonl: no start record" "$tmp/empty.jsonl"
expect_error "too many labels" "3 labels for 1 runs" --label a --label b --label c "$tmp/b.jsonl"
expect_error "--smooth 0" "--smooth 0: give 1 or more" --smooth 0 "$tmp/b.jsonl"

finish plot
