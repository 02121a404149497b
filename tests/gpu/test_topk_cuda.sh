#!/usr/bin/env bash
# t1/topk's expert on rows the task's size sets never draw (tests/gpu/topk_selftest.cu): constant
# rows and rows of three values in its persistent kernel's general path, such rows interleaved
# with random ones, signed zeros, misaligned rows, the widths and k past the persistent kernel's
# limits; each call against a host sort of the same order. Then its eval-size time, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
nvcc -std=c++17 -arch="sm_${arch:-90}" -I"$STITCH_SRC/include" -o "$WORK/tks" \
	"$STITCH_SRC/tests/gpu/topk_selftest.cu" >"$WORK/nvcc.log" 2>&1
check "the topk self-test builds for sm_${arch:-90}" [ $? -eq 0 ]
timeout 300 "$WORK/tks" bench >"$WORK/tks.log" 2>&1
rc=$?
cat "$WORK/nvcc.log" "$WORK/tks.log"
check "every topk case matches the host sort (exit $rc)" [ "$rc" -eq 0 ]
check "all 14 cases ran" [ "$(grep -c '^PASS ' "$WORK/tks.log")" -eq 14 ]
finish
