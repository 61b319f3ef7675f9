#!/bin/bash
# tune_cli_test.sh: quorum-tune end to end on synthetic data (a few seconds):
# one process and 2 ranks give a table, a choice and a JSON document whose
# rows agree with the choice; --plot draws a PNG (where matplotlib exists);
# and each bad input is a clear error that leaves no output file behind:
# an unreachable target (best accuracy and time spent), a batch range beyond
# the memory, K above the launched ranks, a deadline nobody meets, a bad
# --json path, an unknown imbalance model or reduction. A 2-rank majority run
# under the paper's imbalance predicts partial rows.
# Usage: tune_cli_test.sh path/to/quorum-run path/to/quorum-tune
set -u
run="$1" bin="$2"
source "$(dirname "$0")/../support/checks.sh"
unset SLURM_STEP_NUM_TASKS PMI_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMIX_RANK QUORUM_RANK
small=(--data synthetic --batch-min 8 --batch-max 64 --pilot-batch 16 --profile-steps 3
  --profile-warmup 1 --evals-per-epoch 10 --noise-every 1)

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

# A JSON document whose chosen row is one of its rows, on the front, with
# predictions that add up (time = steps x step time, cost = time x K).
check_json() {
  python3 - "$1" "$2" <<'PY' || fail "$1: $(cat "$tmp/py.err")"
import json, sys
doc = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
rows, c = doc["rows"], doc["choice"]
assert doc["launched_ranks"] == ranks, doc["launched_ranks"]
assert {r["ranks"] for r in rows} == set(range(1, ranks + 1)), "rank counts"
assert any(r["global_batch"] == c["global_batch"] and r["ranks"] == c["ranks"] and r["pareto"]
           for r in rows), "choice not a row on the front"
for r in rows:
    assert abs(r["seconds"] - r["steps"] * r["step_seconds"]) <= 1e-6 * r["seconds"], r
    assert abs(r["cost"] - r["seconds"] * r["ranks"]) <= 1e-6 * r["cost"], r
    assert r["global_batch"] == r["local_batch"] * r["ranks"], r
assert doc["b_noise"] > 0 and doc["s_min"] > 0 and doc["pilot"]["steps"] > 0
pilot = doc["pilot"]
assert pilot["steps_source"] in ("measured", "extrapolated"), pilot
assert 0 < pilot["target_steps"] <= pilot["steps"] or pilot["steps_source"] == "extrapolated", pilot
if pilot["steps_source"] == "extrapolated":
    assert pilot["fit"]["crossing"] > pilot["steps"], pilot
assert set(doc["phase_seconds"]) >= {"setup", "profile_one_rank", "profile_all_ranks",
                                     "allreduce", "pilot_training", "pilot_evaluating"}
assert all(v >= 0 for v in doc["phase_seconds"].values()), doc["phase_seconds"]
assert "--batch" in c["train_flags"] and c["reason"]
PY
}

timeout 120 "$bin" "${small[@]}" --target-accuracy 80 --json "$tmp/one.json" >"$tmp/out" 2>&1 ||
  fail "one process: $(cat "$tmp/out")"
grep -q "^choice: global batch" "$tmp/out" || fail "one process: no choice line"
grep -q "pilot reached 80.00% at step" "$tmp/out" || fail "one process: no pilot report"
check_json "$tmp/one.json" 1 2>"$tmp/py.err"
# The old pilot, trained until an evaluation reaches the target, on request.
timeout 120 "$bin" "${small[@]}" --target-accuracy 80 --pilot-extrapolate off \
  --json "$tmp/off.json" >"$tmp/out" 2>&1 || fail "--pilot-extrapolate off: $(cat "$tmp/out")"
grep -q "pilot reached 80.00% at step [0-9]* (.*measured)" "$tmp/out" ||
  fail "--pilot-extrapolate off: no measured pilot: $(cat "$tmp/out")"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["pilot"]["steps_source"] == "measured"' \
  "$tmp/off.json" || fail "--pilot-extrapolate off: the JSON does not say measured"
# The pilot's staged evaluations (the 512 test examples: 204, then the rest)
# score part of the set when that decides, yet stop at the same step as a
# pilot that scores the whole set.
timeout 120 "$bin" "${small[@]}" --target-accuracy 80 --pilot-screen 0.4 >"$tmp/out" 2>&1 ||
  fail "--pilot-screen 0.4: $(cat "$tmp/out")"
screened=$(sed -n 's/.*\(pilot reached 80.00% at step [0-9]*\).* \([0-9]*\) of [0-9]* evaluations decided.*/\1 \2/p' "$tmp/out")
timeout 120 "$bin" "${small[@]}" --target-accuracy 80 --pilot-screen 1 >"$tmp/out" 2>&1 ||
  fail "--pilot-screen 1: $(cat "$tmp/out")"
whole=$(sed -n 's/.*\(pilot reached 80.00% at step [0-9]*\).* \([0-9]*\) of [0-9]* evaluations decided.*/\1 \2/p' "$tmp/out")
[ "${screened% *}" = "${whole% *}" ] && [ "${whole##* }" = 0 ] && [ "${screened##* }" -gt 0 ] ||
  fail "screened pilot '$screened' against whole evaluations '$whole'"

timeout 120 "$run" -n 2 "$bin" "${small[@]}" --target-accuracy 80 --json "$tmp/two.json" \
  >"$tmp/out" 2>&1 || fail "2 ranks: $(cat "$tmp/out")"
grep -q "allreduce on 2 ranks: alpha" "$tmp/out" || fail "2 ranks: no allreduce fit"
check_json "$tmp/two.json" 2 2>"$tmp/py.err"

# Majority under the paper's imbalance: its K = 2 rows wait less per step
# than sync's under the same model, hold fewer fresh gradients, and their
# flags say how to train that way.
timeout 120 "$run" -n 2 "$bin" "${small[@]}" --target-accuracy 80 --reduce majority \
  --imbalance paper:20:1-2 --json "$tmp/majority.json" >"$tmp/out" 2>&1 ||
  fail "majority: $(cat "$tmp/out")"
check_json "$tmp/majority.json" 2 2>"$tmp/py.err"
python3 - "$tmp/majority.json" <<'PY' 2>"$tmp/py.err" || fail "majority rows: $(cat "$tmp/py.err")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["reduce"] == "majority" and doc["imbalance"] == "paper:20:1-2", doc["reduce"]
two = [r for r in doc["rows"] if r["ranks"] == 2]
for r in two:
    assert 1 <= r["fresh"] < 2, r
    # Compute and allreduce alone would be faster: the model adds the waits.
    assert r["step_seconds"] > r["compute_seconds"] + r["comm_seconds"], r
    assert "--reduce majority" in r["train_flags"] and "--imbalance paper:20:1-2" in r["train_flags"], r
for r in doc["rows"]:
    if r["ranks"] == 1:
        assert r["fresh"] == 1 and "--reduce" not in r["train_flags"], r
PY

if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  timeout 120 "$bin" "${small[@]}" --target-accuracy 80 --plot "$tmp/tune.png" >"$tmp/out" 2>&1 ||
    fail "--plot: $(cat "$tmp/out")"
  [ "$(head -c 4 "$tmp/tune.png" | tail -c 3)" = PNG ] || fail "--plot: no PNG"
else
  echo "note: no matplotlib; --plot not checked"
fi

expect_error "unreachable target" "best test accuracy was" "${small[@]}" --target-accuracy 100 \
  --pilot-max-epochs 0.3 --json "$tmp/no.json"
grep -q "s in all" "$tmp/out" || fail "unreachable target: no time spent in: $(cat "$tmp/out")"
expect_error "--pilot-extrapolate maybe" "pilot-extrapolate" "${small[@]}" --target-accuracy 80 \
  --pilot-extrapolate maybe
expect_error "memory" "does not fit in memory" "${small[@]}" --target-accuracy 80 \
  --memory-mb 0.01 --json "$tmp/no.json"
expect_error "K above launched" "only 1 rank is launched" "${small[@]}" --target-accuracy 80 \
  --ranks 1,2 --json "$tmp/no.json"
expect_error "deadline" "no configuration meets --deadline" "${small[@]}" --target-accuracy 80 \
  --deadline 0.0001 --json "$tmp/no.json"
expect_error "json folder" "does not exist" "${small[@]}" --target-accuracy 80 \
  --json "$tmp/none/x.json"
expect_error "json is a folder" "is a folder" "${small[@]}" --target-accuracy 80 --json "$tmp"
expect_error "no target" "--target-accuracy" "${small[@]}"
expect_error "bad imbalance" "unknown model" "${small[@]}" --target-accuracy 80 \
  --imbalance lumpy:3 --json "$tmp/no.json"
expect_error "bad reduction" "--reduce" "${small[@]}" --target-accuracy 80 --reduce half \
  --json "$tmp/no.json"
[ -e "$tmp/no.json" ] && fail "a failed run left $tmp/no.json"
ls "$tmp" | grep -q tmp && fail "a temp file was left: $(ls "$tmp")"
finish tune_cli
