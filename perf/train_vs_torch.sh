#!/bin/bash
# train_vs_torch.sh: quorum-train --backend cpu and PyTorch (perf/torch_fm_s.py)
# on the same fm-s model, data, batch and hyper-parameters, one after the
# other in the same run (the machine's speed drifts between runs), alternating
# for --rounds rounds. Prints per epoch train loss, test accuracy, images/s
# (wall) and images per CPU second for both, and the quorum/torch ratios.
#
# Usage: perf/train_vs_torch.sh [--build DIR] [--epochs N] [--max-steps N]
#                               [--rounds N] [--threads N] [--batch N] [--lr X]
set -eu
build=build epochs=1 max_steps=-1 rounds=1 threads=1 batch=64 lr=0.02
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --max-steps) max_steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-/usr/bin/python3}
"$python" -c 'import torch' 2>/dev/null || { echo "PyTorch not found for $python (Debian: python3-torch)" >&2; exit 77; }
[ -x "$build/tools/quorum-train" ] || { echo "$build/tools/quorum-train not built" >&2; exit 2; }
# PyTorch's linear layers go through libblas.so.3 (Debian: OpenBLAS), which
# on a CPU model it does not know runs its Prescott (SSE3) kernels, 4-6x
# slower on fm-s's linear layers: say which it chose (OPENBLAS_CORETYPE, e.g.
# SkylakeX, overrides it; quorum's cpu backend does not use OpenBLAS).
blas_core=$("$python" -c 'import ctypes
lib = ctypes.CDLL("libblas.so.3")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || echo "not OpenBLAS")
echo "torch's BLAS: OpenBLAS core $blas_core${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}"
out=$(mktemp -d /tmp/quorum_train_vs_torch_XXXXXX)
trap 'rm -rf "$out"' EXIT

for round in $(seq 1 "$rounds"); do
  echo "round $round/$rounds: quorum-train --backend cpu"
  # quorum's --max-steps counts globally; torch's per epoch: make them agree.
  qsteps=-1
  [ "$max_steps" -ge 0 ] && qsteps=$((max_steps * epochs))
  if [ "$max_steps" -ge 0 ] && [ "$epochs" -gt 1 ]; then
    echo "note: with --max-steps and several epochs, quorum runs whole epochs up to the total" >&2
  fi
  "$build/tools/quorum-train" --backend cpu --model fm-s --data fashion-mnist --epochs "$epochs" \
    --batch "$batch" --lr "$lr" --momentum 0.9 --threads "$threads" --max-steps "$qsteps" \
    --log "$out/quorum.$round.jsonl" --log-every 0 --progress-every 0 >/dev/null
  echo "round $round/$rounds: torch (perf/torch_fm_s.py)"
  "$python" "$here/torch_fm_s.py" --epochs "$epochs" --batch "$batch" --lr "$lr" --momentum 0.9 \
    --threads "$threads" --max-steps "$max_steps" --json >"$out/torch.$round.jsonl"
done

"$python" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, rounds + 1):
    q = [json.loads(l) for l in open(f"{out}/quorum.{r}.jsonl") if '"event":"epoch"' in l]
    t = [json.loads(l) for l in open(f"{out}/torch.{r}.jsonl")]
    for qe, te in zip(q, t):
        rows.append((r, qe, te))
print(f"{'round':>5} {'epoch':>5} | {'quorum loss':>11} {'acc%':>6} {'img/s':>7} {'img/cpu-s':>9} |"
      f" {'torch loss':>10} {'acc%':>6} {'img/s':>7} {'img/cpu-s':>9} | {'ratio':>5} {'cpu ratio':>9}")
wall, cpu = [], []
for r, q, t in rows:
    rw = q["images_per_s"] / t["images_per_s"]
    rc = q["images_per_cpu_s"] / t["images_per_cpu_s"]
    wall.append(rw); cpu.append(rc)
    print(f"{r:>5} {q['epoch']:>5} | {q['train_loss']:>11.4f} {100 * q['test_accuracy']:>6.2f}"
          f" {q['images_per_s']:>7.0f} {q['images_per_cpu_s']:>9.0f} | {t['train_loss']:>10.4f}"
          f" {100 * t['test_accuracy']:>6.2f} {t['images_per_s']:>7.0f} {t['images_per_cpu_s']:>9.0f}"
          f" | {rw:>5.2f} {rc:>9.2f}")
if rows:
    print(f"median quorum/torch speed ratio: {statistics.median(wall):.2f} (wall), "
          f"{statistics.median(cpu):.2f} (CPU time)")
    q_last = [q for r, q, t in rows if r == rounds][-1]
    t_last = [t for r, q, t in rows if r == rounds][-1]
    print(f"final test accuracy: quorum {100 * q_last['test_accuracy']:.2f}%, "
          f"torch {100 * t_last['test_accuracy']:.2f}% "
          f"(difference {100 * (q_last['test_accuracy'] - t_last['test_accuracy']):+.2f} points)")
PY
