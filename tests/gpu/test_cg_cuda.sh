#!/usr/bin/env bash
# t3/cg's expert on matrices and buffers the task's size sets never draw (tests/gpu/cg_selftest.cu):
# misaligned col_idx, val and x, rows of hundreds of entries whose tiles do not fit the shared
# buffers, a single row, a line, fewer rows than a tile; each solve held to the task's residual
# bound. Then its eval-size time and what its barrier, sum and two sweeps cost alone, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
nvcc -std=c++17 -arch="sm_${arch:-90}" -I"$STITCH_SRC/include" -o "$WORK/cgs" \
	"$STITCH_SRC/tests/gpu/cg_selftest.cu" >"$WORK/nvcc.log" 2>&1
check "the cg self-test builds for sm_${arch:-90}" [ $? -eq 0 ]
timeout 300 "$WORK/cgs" bench >"$WORK/cgs.log" 2>&1
rc=$?
cat "$WORK/nvcc.log" "$WORK/cgs.log"
check "every cg case within the residual bound (exit $rc)" [ "$rc" -eq 0 ]
check "all 8 cases ran" [ "$(grep -c '^PASS ' "$WORK/cgs.log")" -eq 8 ]
finish
