#!/bin/bash
# cli_cuda_test.sh: quorum-train --backend cuda either trains (a device is
# present) or stops at once with exit status 1 and "no CUDA device: ...".
set -u
train="$1"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$train" --backend cuda --model fm-s --data synthetic --epochs 1 --batch 32 --max-steps 3 \
  --log-every 0 --progress-every 0 >/dev/null 2>"$err"
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "a CUDA device is present: quorum-train --backend cuda trained"
  exit 0
fi
cat "$err"
[ "$rc" -eq 1 ] || { echo "FAIL: expected exit status 1 without a device, got $rc"; exit 1; }
grep -q "quorum-train: .*no CUDA device: " "$err" || { echo "FAIL: no 'no CUDA device' message"; exit 1; }
echo "ok: clear error without a device"
