#!/bin/bash
# batch_auto_test.sh: quorum-train --batch auto on synthetic data (seconds per
# run), on one process and on 2 ranks under quorum-run: the log holds the
# tuner's decisions (the profile, the start, one per epoch end), each with a
# time stamp and every rank's plan checked equal; each epoch trains at the
# batch decided before it (its steps are the shard over that batch) and rate;
# a run stopped mid-epoch and resumed keeps the tuner's state (no second
# profile, the same batch, the epoch's remaining steps, and, where both runs
# decided alike, the uninterrupted run's parameters); and the bad
# combinations are clear errors; a fixed batch with --target-accuracy stops at
# the first epoch end that reaches it. perf/plot_training.py reads its logs.
# Usage: batch_auto_test.sh path/to/quorum-run path/to/quorum-train path/to/plot_training.py
set -u
run="$1" bin="$2" plot="$3"
source "$(dirname "$0")/../support/checks.sh"
unset SLURM_STEP_NUM_TASKS PMI_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMIX_RANK QUORUM_RANK
# A slow rate keeps the synthetic data's accuracy under the target for a few epochs.
auto=(--data synthetic --train-limit 2048 --test-limit 256 --batch auto --target-accuracy 99.5
  --lr 0.002 --epochs 3 --progress-every 0)

# check_log LOG RANKS: the decisions and the epochs they govern.
check_log() {
  python3 - "$1" "$2" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
ranks = int(sys.argv[2])
assert all("time" in r for r in records), "a record without a time"
assert records[0]["event"] == "start" and records[0]["batch_policy"] == "auto", records[0]
decisions = [r for r in records if r["event"] == "batch_decision"]
kinds = [d["decision"] for d in decisions]
assert kinds[:2] == ["profiled", "start"], kinds
assert decisions[0]["profile_seconds"] > 0, decisions[0]
shard = 2048 // ranks
batch, lr = decisions[1]["batch"], decisions[1]["lr"]
epochs = 0
for r in records[records.index(decisions[1]) + 1:]:
    if r["event"] == "epoch":
        epochs += 1
        assert r["batch"] == batch, f"epoch {r['epoch']} at batch {r['batch']}, decided {batch}"
        assert r["steps"] == shard // batch, f"epoch {r['epoch']}: {r['steps']} steps of {batch}"
        assert abs(r["lr"] - lr) <= 1e-12 * lr, f"epoch {r['epoch']}: lr {r['lr']}, decided {lr}"
    elif r["event"] == "batch_decision":
        assert r["decision"] in ("keep", "switch", "target_reached"), r
        assert r["epoch"] == epochs, f"decision after epoch {r['epoch']}, {epochs} trained"
        assert r["ranks"] == ranks and r["ranks_agree"] is True, r
        assert r["global_batch"] == r["batch"] * ranks, r
        assert r["lr_recipe"] == "sqrt" and r["reason"], r
        assert r["decision"] != "switch" or r["predicted_gain"] >= 0.05, r
        assert (r["decision"] == "switch") == (r["batch"] != r["previous_batch"]), r
        batch, lr = r["batch"], r["lr"]
assert epochs >= 1 and kinds[-1] in ("keep", "switch", "target_reached"), kinds
print(" ".join(f"{d['decision']}:{d['batch']}" for d in decisions))
PY
}

# One process, then 2 ranks: decisions logged and followed.
timeout 120 "$bin" "${auto[@]}" --log "$tmp/one.jsonl" >"$tmp/out" 2>&1 ||
  fail "one process: $(cat "$tmp/out")"
grep -q "batch auto: profiled in" "$tmp/out" || fail "one process: no profile line"
grep -q "batch auto: start: batch 64" "$tmp/out" || fail "one process: no start line"
grep -Eq "batch auto: (keep|switch|target_reached) after epoch 1" "$tmp/out" ||
  fail "one process: no decision after epoch 1"
check_log "$tmp/one.jsonl" 1 >"$tmp/py.out" 2>&1 || fail "one process's log: $(cat "$tmp/py.out")"

timeout 120 "$run" -n 2 "$bin" "${auto[@]}" --log "$tmp/two.jsonl" >"$tmp/out" 2>&1 ||
  fail "2 ranks: $(cat "$tmp/out")"
check_log "$tmp/two.jsonl" 2 >"$tmp/py.out" 2>&1 || fail "2 ranks' log: $(cat "$tmp/py.out")"
whole_decisions=$(cat "$tmp/py.out")
grep -q "replicas=agree" "$tmp/out" || fail "2 ranks: replicas differ"
whole_crc=$(grep -o "done: [0-9]* steps, params crc32 [0-9a-f]*" "$tmp/out")
/usr/bin/python3 "$plot" --summary "$tmp/two.jsonl" >"$tmp/summary" 2>&1 ||
  fail "plot_training.py --summary: $(cat "$tmp/summary")"

# Stopped after 3 steps of epoch 2, then resumed: the tuner's state goes on.
timeout 120 "$run" -n 2 "$bin" "${auto[@]}" --log "$tmp/part.jsonl" --checkpoint "$tmp/ckpt" \
  --max-steps 19 >"$tmp/out" 2>&1 || fail "2 ranks to step 19: $(cat "$tmp/out")"
timeout 120 "$run" -n 2 "$bin" "${auto[@]}" --log "$tmp/rest.jsonl" --checkpoint "$tmp/ckpt" \
  --resume "$tmp/ckpt" >"$tmp/out" 2>&1 || fail "2 ranks resumed: $(cat "$tmp/out")"
python3 - "$tmp/part.jsonl" "$tmp/rest.jsonl" >"$tmp/py.out" 2>&1 <<'PY' || fail "resume: $(cat "$tmp/py.out")"
import json, sys
part = [json.loads(l) for l in open(sys.argv[1])]
rest = [json.loads(l) for l in open(sys.argv[2])]
last = [r for r in part if r["event"] == "batch_decision"][-1]
assert last["decision"] in ("keep", "switch") and last["epoch"] == 1, last
decided = [r for r in rest if r["event"] == "batch_decision"]
assert decided[0]["decision"] == "resumed", decided[0]
assert all(d["decision"] != "profiled" for d in decided), "profiled again"
assert decided[0]["batch"] == last["batch"] and decided[0]["lr"] == last["lr"], decided[0]
assert rest[0]["event"] == "start" and rest[0]["start_step"] == 19, rest[0]
epoch2 = [r for r in rest if r["event"] == "epoch"][0]
assert epoch2["epoch"] == 2 and epoch2["batch"] == last["batch"], epoch2
assert epoch2["steps"] == 1024 // last["batch"] - 3, epoch2
PY
part_decisions=$(python3 -c "
import json, sys
print(' '.join(f\"{r['decision']}:{r['batch']}\" for r in map(json.loads, open(sys.argv[1]))
               if r['event'] == 'batch_decision'))" "$tmp/part.jsonl")
# The uninterrupted run's parameters, where both took the same first decision
# (the profile's timings may tip it either way).
if [ "${whole_decisions#"$part_decisions"}" != "$whole_decisions" ]; then
  rest_decisions=$(python3 -c "
import json, sys
print(' '.join(f\"{r['decision']}:{r['batch']}\" for r in map(json.loads, open(sys.argv[1]))
               if r['event'] == 'batch_decision' and r['decision'] != 'resumed'))" "$tmp/rest.jsonl")
  if [ "$part_decisions $rest_decisions" = "$whole_decisions" ]; then
    grep -q "$whole_crc" "$tmp/out" ||
      fail "resumed run ends with '$(grep -o 'done: .*' "$tmp/out")', uninterrupted with '$whole_crc'"
    echo "resumed run compared with the uninterrupted one ($whole_decisions)"
  fi
fi

# A checkpoint resumes only a run of its kind.
timeout 60 "$bin" --data synthetic --train-limit 2048 --test-limit 256 --epochs 1 --max-steps 4 \
  --checkpoint "$tmp/fixed" >/dev/null 2>&1 || fail "fixed-batch run to step 4"

# expect_error "description" "text in output" args...
expect_error() {
  local what="$1" text="$2"
  shift 2
  timeout 60 "$bin" "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then fail "$what: still running after 60 s"; return; fi
  if [ $rc -eq 0 ]; then fail "$what: exit status 0"; return; fi
  grep -q -- "$text" "$tmp/out" || fail "$what: no '$text' in: $(cat "$tmp/out")"
}
expect_error "auto resumes fixed" "cannot resume a run with --batch auto" "${auto[@]}" \
  --resume "$tmp/fixed"
expect_error "fixed resumes auto" "resumes only with --batch auto" --data synthetic \
  --train-limit 2048 --test-limit 256 --epochs 3 --resume "$tmp/ckpt"
expect_error "no target" "--batch auto needs --target-accuracy" --data synthetic --batch auto
# A fixed batch with a target stops at the first epoch end that reaches it
# (at this slow rate synthetic data passes 40% in its second epoch, not its
# first), and trains every epoch when none does.
for target in 40 90; do
  timeout 60 "$bin" --data synthetic --train-limit 2048 --test-limit 256 --epochs 3 --lr 0.0005 \
    --target-accuracy "$target" --progress-every 0 --log "$tmp/target$target.log" \
    >"$tmp/out" 2>&1 || fail "fixed batch to $target%: $(cat "$tmp/out")"
done
python3 - "$tmp/target40.log" "$tmp/target90.log" <<'PY' 2>"$tmp/py.err" ||
import json, sys
def epochs(path):
    return [r for r in map(json.loads, open(path)) if r["event"] == "epoch"]
reached, never = epochs(sys.argv[1]), epochs(sys.argv[2])
assert len(reached) == 2, reached
assert reached[0]["test_accuracy"] < 0.4 <= reached[1]["test_accuracy"], reached
assert len(never) == 3 and max(r["test_accuracy"] for r in never) < 0.9, never
PY
  fail "fixed batch with a target: $(cat "$tmp/py.err")"
expect_error "bad batch" "give a batch size from 1 to 65536, or auto" --data synthetic \
  --batch automatic
expect_error "partial" "--batch auto reduces with sync only" "${auto[@]}" --reduce solo
expect_error "imbalance" "--batch auto cannot honour --imbalance" "${auto[@]}" --imbalance exp:1
expect_error "buckets" "--batch auto cannot honour --bucket-kb" "${auto[@]}" --bucket-kb 64
expect_error "warmup" "--batch auto cannot honour --warmup-epochs" "${auto[@]}" \
  --warmup-epochs 1
expect_error "schedule" "--batch auto cannot honour --lr-decay" "${auto[@]}" --lr-decay cosine
expect_error "too little data" "leave no batch of at least 16" --data synthetic --train-limit 100 \
  --batch auto --target-accuracy 90
finish batch_auto
