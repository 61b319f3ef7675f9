#!/bin/bash
# cli_test.sh: quorum-train's command line: bad flags (and a diverging rate)
# fail with a message, as do flags that would do nothing and a launcher's
# environment quorum cannot join; --help works, a short synthetic run writes
# JSON lines, --checkpoint / --resume through the CLI ends on the same
# parameters as an uninterrupted run, a resume with nothing left says so, and
# one on other data is refused. The logs: every text line and JSON record
# starts with its UTC time, the start record names the version, host, ranks,
# backend and model, text and JSON number epochs alike (from 1), and a resumed
# run's training time goes on from its first part's.
# Usage: cli_test.sh path/to/quorum-train
set -u
bin="$1"
source "$(dirname "$0")/../support/checks.sh"
# One process here, whatever launched the test.
unset SLURM_STEP_NUM_TASKS PMI_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMIX_RANK QUORUM_RANK

# expect_error "description" "text in output" args...
expect_error() {
  local what="$1" text="$2"
  shift 2
  timeout 120 "$bin" "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then fail "$what: still running after 120 s"; return; fi
  if [ $rc -eq 0 ]; then fail "$what: exit status 0"; return; fi
  grep -q -- "$text" "$tmp/out" || fail "$what: no '$text' in: $(cat "$tmp/out")"
}

expect_error "unknown flag" "--bogus" --bogus
expect_error "bad backend" "--backend" --backend gpu
expect_error "bad model" "--model" --model resnet-1000
expect_error "zero batch" "--batch" --batch 0
expect_error "negative lr" "--lr" --lr -1
expect_error "non-numeric epochs" "--epochs" --epochs many
expect_error "missing data dir" "data folder $tmp/none: No such file" --data-dir "$tmp/none"
expect_error "cifar without dir" "data directory" --data cifar10 --model cifar-cnn
expect_error "unknown reduction" "--reduce" --reduce fastest --data synthetic
expect_error "quorum of none" "give quorum:K" --reduce quorum:0 --data synthetic
expect_error "quorum without K" "give quorum:K" --reduce quorum: --data synthetic
expect_error "quorum above the ranks" "--reduce quorum:2 on 1 rank" --reduce quorum:2 \
  --data synthetic
expect_error "malformed imbalance" "--imbalance '1:100ms'" --imbalance 1:100ms --data synthetic
expect_error "imbalance without delay" "paper takes D" --imbalance paper --data synthetic
expect_error "unknown lr decay" "--lr-decay" --lr-decay linear --data synthetic
expect_error "unknown partial scale" "--partial-scale" --partial-scale mean --data synthetic
expect_error "negative sync epochs" "--sync-epochs" --sync-epochs -1 --data synthetic
expect_error "no evaluations per epoch" "--evals-per-epoch" --evals-per-epoch 0 --data synthetic
expect_error "EMA decay of 1" "--ema-decay" --ema-decay 1 --data synthetic
expect_error "NaN EMA decay" "--ema-decay: nan is not" --data synthetic --ema-decay nan
expect_error "cuda backend" "cuda" --backend cuda --data synthetic
expect_error "missing checkpoint" "$tmp/nope" --data synthetic --resume "$tmp/nope"
expect_error "diverging run" "training diverged" --data synthetic --batch 32 --epochs 2 --lr 1e6
# Non-finite values: range checks alone let NaN through (every comparison is false).
expect_error "NaN lr" "--lr: nan is not a finite number" --data synthetic --lr nan
expect_error "infinite lr" "--lr: inf is not a finite number" --data synthetic --lr inf
expect_error "NaN warmup" "--warmup-epochs: nan is not a finite" --data synthetic --warmup-epochs nan
expect_error "NaN momentum" "--momentum: NaN is not a finite" --data synthetic --momentum NaN
expect_error "NaN weight decay" "--weight-decay: nan is not" --data synthetic --weight-decay nan
expect_error "NaN sync epochs" "--sync-epochs: nan is not" --data synthetic --reduce solo \
  --sync-epochs nan
expect_error "NaN activation delay" "--activation-delay-ms: nan is not" --data synthetic \
  --reduce solo --activation-delay-ms nan
expect_error "zero carry weight" "--carry-weight 0: expected a weight in (0, 1]" \
  --data synthetic --reduce solo --carry-weight 0
expect_error "carry weight above 1" "--carry-weight" --data synthetic --reduce solo \
  --carry-weight 1.5
expect_error "carry weight with drop" "--carry-weight 0.5 with --drop-late" --data synthetic \
  --reduce solo --drop-late --carry-weight 0.5
# Nothing to train.
expect_error "--max-steps 0" "give -1 (all epochs) or a positive number of steps" \
  --data synthetic --max-steps 0
expect_error "--epochs 0" "--epochs" --data synthetic --epochs 0
# Imbalance that would do nothing on this one process, or nothing at all.
expect_error "slow rank on one process" "no other rank to be slower than" --data synthetic \
  --imbalance slow:0:10
expect_error "paper with K above the ranks" "on 1 rank: cannot draw 2 ranks" --data synthetic \
  --imbalance paper:10
expect_error "paper with K = 0" "K = 0 delays no rank" --data synthetic --imbalance paper:10:0
# Options of the partial reductions are refused where they would be ignored.
for flag in --drop-late "--carry-weight 0.5" --no-catch-up "--sync-epochs 1" "--partial-scale sqrt" \
  "--activation-delay-ms 2" "--max-staleness 4"; do
  # shellcheck disable=SC2086
  expect_error "$flag with sync" "${flag%% *} applies to --reduce solo, majority and quorum:K only; this run reduces with --reduce sync" \
    --data synthetic --reduce sync $flag
  # shellcheck disable=SC2086
  expect_error "$flag on one process" "${flag%% *} applies to --reduce solo, majority and quorum:K only; this run trains on one process" \
    --data synthetic $flag
done
# A launcher's environment of several tasks that quorum cannot join (no PMIx,
# no quorum-run): refused, rather than every task training alone as rank 0.
for vars in "SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=1" "PMI_SIZE=2 PMI_RANK=1" \
  "OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=1"; do
  var=${vars%% *}
  # shellcheck disable=SC2086
  env $vars timeout 60 "$bin" --data synthetic >"$tmp/lone" 2>&1 && fail "$var: exit status 0"
  grep -q "$var: this process is one of ${var#*=} tasks, but quorum found no launcher" "$tmp/lone" ||
    fail "$var: $(cat "$tmp/lone")"
done
# An salloc shell's allocation (no step) or a step of one task is one process.
SLURM_NTASKS=4 SLURM_NPROCS=4 SLURM_STEP_NUM_TASKS=1 "$bin" --data synthetic --batch 32 \
  --max-steps 2 >"$tmp/salloc" 2>&1 || fail "inside an allocation: $(cat "$tmp/salloc")"
# A checkpoint that cannot be written fails before training.
expect_error "checkpoint in a missing folder" "--checkpoint $tmp/none/ckpt: cannot create" \
  --data synthetic --checkpoint "$tmp/none/ckpt"
grep -q "epoch 1" "$tmp/out" && fail "checkpoint in a missing folder: trained first: $(cat "$tmp/out")"
expect_error "checkpoint is a folder" "is a folder" --data synthetic --checkpoint "$tmp"
expect_error "unwritable log" "--log $tmp/none/log: cannot open" --data synthetic --log "$tmp/none/log"

"$bin" --help >"$tmp/help" 2>&1 || fail "--help exit status"
grep -q -- "--checkpoint" "$tmp/help" || fail "--help does not list --checkpoint"

# Cosine decay after a warmup: the rate depends on the step only, so the resumed
# run below must still end bit for bit where the uninterrupted one does.
common=(--data synthetic --batch 32 --epochs 2 --lr 0.02 --seed 3 --log-every 5
  --warmup-epochs 0.5 --lr-decay cosine --evals-per-epoch 2 --progress-every 10)
"$bin" "${common[@]}" --log "$tmp/log.jsonl" >"$tmp/whole" 2>&1 || fail "synthetic run: $(cat "$tmp/whole")"
grep -q '"event":"epoch"' "$tmp/log.jsonl" || fail "no epoch record in the JSON log"
grep -q '"event":"step"' "$tmp/log.jsonl" || fail "no step record in the JSON log"
grep -q 'test loss' "$tmp/whole" || fail "no epoch report: $(cat "$tmp/whole")"
grep -q 'forward' "$tmp/whole" || fail "no time split in the epoch report"
python3 - "$tmp/log.jsonl" <<'PY' || fail "learning rates in the log do not fall towards 0"
import json, sys
lr = [r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "step"]
top = lr.index(max(lr))
sys.exit(0 if lr[-1] < 0.1 * lr[top] and all(a >= b for a, b in zip(lr[top:], lr[top + 1:])) else 1)
PY
version=$("$bin" --version | awk '{print $NF}')
[ -n "$version" ] || fail "no version from --version"
cat >"$tmp/check_log.py" <<'PY'
# check_log.py LOG OUTPUT VERSION: the records of the run in LOG (from its
# last start record) and its text OUTPUT (stdout and stderr) agree.
import datetime, json, re, socket, sys
log, output, version = sys.argv[1:4]
records = [json.loads(l) for l in open(log)]
starts = [i for i, r in enumerate(records) if r["event"] == "start"]
records = records[starts[-1]:]
start = records[0]
# Every record's wall-clock time, ISO 8601 in UTC with milliseconds, in order
# and near the test's own clock.
stamps = []
for r in records:
    t = r.get("time", "")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t), f"time {t!r} in {r}"
    stamps.append(datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ"))
assert stamps == sorted(stamps), f"times not in order: {stamps}"
now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
assert abs((now - stamps[-1]).total_seconds()) < 3600, f"last record at {stamps[-1]}, now {now}"
# The start record names the run.
want = {"quorum_version": version, "host": socket.gethostname(), "ranks": 1, "backend": "cpu",
        "model": "fm-s", "reduce": "local"}
for key, value in want.items():
    assert start.get(key) == value, f"start record: {key} {start.get(key)!r}, expected {value!r}"
spe = start["steps_per_epoch"]
# Every text line starts with its UTC time, to the second.
lines = [l for l in open(output).read().splitlines() if l.strip()]
for l in lines:
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", l), f"text line without a time: {l!r}"
# The same epoch numbers (from 1) in text and JSON: epoch reports, the
# evaluations inside epochs, and progress lines against the step records.
text = "\n".join(lines)
text_epochs = [int(m) for m in re.findall(r"Z epoch (\d+)(?: \(partial\))?: train loss", text)]
json_epochs = [r["epoch"] for r in records if r["event"] == "epoch"]
assert text_epochs and text_epochs == json_epochs, f"epochs: text {text_epochs}, JSON {json_epochs}"
text_evals = [(int(e), int(s)) for e, s in re.findall(r"Z epoch (\d+) step (\d+): test loss", text)]
json_evals = [(r["epoch"], r["step_in_epoch"]) for r in records if r["event"] == "eval"]
assert text_evals and text_evals == json_evals, f"evals: text {text_evals}, JSON {json_evals}"
steps = {r["step"]: r["epoch"] for r in records if r["event"] == "step"}
progress = re.findall(r"Z epoch (\d+)/\d+ step (\d+)/(\d+) loss", text)
assert progress, "no progress lines"
for e, s, n in progress:
    e, s = int(e), int(s)
    assert int(n) == spe, f"progress line of {n} steps per epoch, start record {spe}"
    step = (e - 1) * spe + s
    assert steps.get(step) == e, \
        f"progress epoch {e} step {s}: step record {step} says epoch {steps.get(step)}"
assert min(json_epochs) >= 1 and max(json_epochs) <= start["epochs"], f"epochs {json_epochs}"
# Training times rise through the run.
seconds = [r["train_seconds"] for r in records if "train_seconds" in r and r["event"] != "start"]
assert seconds == sorted(seconds), f"training times not rising: {seconds}"
PY
python3 "$tmp/check_log.py" "$tmp/log.jsonl" "$tmp/whole" "$version" 2>"$tmp/check" ||
  fail "uninterrupted run's logs: $(tail -3 "$tmp/check")"

"$bin" "${common[@]}" --max-steps 70 --checkpoint "$tmp/ckpt" --log "$tmp/resumed.jsonl" \
  >"$tmp/part" 2>&1 || fail "partial run: $(cat "$tmp/part")"
[ -f "$tmp/ckpt" ] || fail "no checkpoint written"
"$bin" "${common[@]}" --resume "$tmp/ckpt" --log "$tmp/resumed.jsonl" >"$tmp/rest" 2>&1 ||
  fail "resumed run: $(cat "$tmp/rest")"
grep -q 'resumed at step 70 after [0-9.]* s of training' "$tmp/rest" ||
  fail "resume not reported: $(cat "$tmp/rest")"
python3 "$tmp/check_log.py" "$tmp/resumed.jsonl" "$tmp/rest" "$version" 2>"$tmp/check" ||
  fail "resumed run's logs: $(tail -3 "$tmp/check")"
# The resumed part starts at the training time its first part had reached
# (the checkpoint's, that of the first part's last record), and goes on.
python3 - "$tmp/resumed.jsonl" "$tmp/part" "$tmp/rest" <<'PY' 2>"$tmp/check" ||
import json, re, sys
records = [json.loads(l) for l in open(sys.argv[1])]
starts = [i for i, r in enumerate(records) if r["event"] == "start"]
assert len(starts) == 2, f"{len(starts)} start records, expected 2"
first, second = records[:starts[1]], records[starts[1]:]
assert second[0]["start_step"] == 70 and second[0]["resume"].endswith("/ckpt"), second[0]
assert first[0]["start_step"] == 0 and first[0]["start_train_seconds"] == 0, first[0]
reached = first[-1]["train_seconds"]
assert first[-1]["event"] == "epoch" and not first[-1]["complete"], first[-1]
assert reached > 0 and abs(second[0]["start_train_seconds"] - reached) < 1e-9, \
    f"resumed at {second[0]['start_train_seconds']} s, the first part reached {reached} s"
later = [r["train_seconds"] for r in second[1:] if "train_seconds" in r]
assert later and min(later) > reached, f"resumed part's times {later[:3]}... not above {reached}"
# The epoch cut at step 70 (epoch 2) goes on under the same number.
resumed_epochs = [r["epoch"] for r in second if r["event"] == "epoch"]
assert first[-1]["epoch"] == 2 and resumed_epochs == [2], records
summary = [float(re.search(r"train_seconds=([0-9.]+)", open(p).read()).group(1))
           for p in sys.argv[2:4]]
assert summary[1] > summary[0] > 0, \
    f"summary train_seconds: first part {summary[0]}, resumed {summary[1]}"
PY
  fail "training time across the resume: $(tail -3 "$tmp/check")"
want=$(grep -o 'done:.*' "$tmp/whole")
got=$(grep -o 'done:.*' "$tmp/rest")
[ -n "$want" ] && [ "$want" = "$got" ] || fail "resumed run ends with '$got', uninterrupted with '$want'"
# Resuming the finished run, or at or past --max-steps, trains nothing and
# says so, with no summary of a training that did not happen.
cp "$tmp/ckpt" "$tmp/ckpt70"
"$bin" "${common[@]}" --resume "$tmp/ckpt" --checkpoint "$tmp/ckpt" >/dev/null 2>&1 ||
  fail "resumed run writing its checkpoint failed"
"$bin" "${common[@]}" --resume "$tmp/ckpt" >"$tmp/finished" 2>&1 ||
  fail "resume of the finished run: $(cat "$tmp/finished")"
"$bin" "${common[@]}" --max-steps 70 --resume "$tmp/ckpt70" >"$tmp/at" 2>&1 ||
  fail "resume at --max-steps: $(cat "$tmp/at")"
"$bin" "${common[@]}" --max-steps 60 --resume "$tmp/ckpt70" >"$tmp/past" 2>&1 ||
  fail "resume past --max-steps: $(cat "$tmp/past")"
grep -q "nothing to train: the run in $tmp/ckpt is at step 128, at or past the end of its --epochs 2" \
  "$tmp/finished" || fail "finished run: $(cat "$tmp/finished")"
grep -q "nothing to train: .* at step 70, and --max-steps 70 stops at step 70" "$tmp/at" ||
  fail "at --max-steps: $(cat "$tmp/at")"
grep -q "nothing to train: .* at step 70, and --max-steps 60 stops at step 60" "$tmp/past" ||
  fail "past --max-steps: $(cat "$tmp/past")"
for f in finished at past; do
  grep -q "summary reduce=" "$tmp/$f" && fail "$f: a summary of no training: $(cat "$tmp/$f")"
done
[ "$(grep -o 'done:.*' "$tmp/finished")" = "$want" ] ||
  fail "finished run: not the checkpoint's parameters"

# Test images of another size than the model's (unchecked IDX files): refused.
python3 "$(dirname "$0")/make_idx.py" "$tmp/idx32" 64 16 32
expect_error "32x32 test images" "test split of data set 'fashion-mnist' has 1x32x32" \
  --data-dir "$tmp/idx32" --no-verify-data --batch 16

# Resuming on other data is refused (here 1024 examples, 32 steps per epoch,
# saved at step 18 of epoch 2; on 256, 8 steps per epoch, that epoch would
# never end).
limit=(--data synthetic --batch 32 --epochs 20 --progress-every 0)
"$bin" "${limit[@]}" --train-limit 1024 --max-steps 50 --checkpoint-every 10 \
  --checkpoint "$tmp/limit" >"$tmp/limit.out" 2>&1 || fail "--train-limit 1024 run: $(cat "$tmp/limit.out")"
expect_error "resume with another --train-limit" "cannot resume a run on 'synthetic' with 256" \
  "${limit[@]}" --train-limit 256 --resume "$tmp/limit"

finish CLI
