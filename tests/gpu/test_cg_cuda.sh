#!/usr/bin/env bash
# t3/cg's expert on matrices and buffers the task's size sets never draw (tests/gpu/cg_selftest.cu):
# misaligned col_idx, val and x, rows of hundreds of entries whose tiles do not fit the shared
# buffers, a single row, a line, fewer rows than a tile; each solve held to the task's residual
# bound. Then its eval-size time and what its barrier, sum and two sweeps cost alone, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

selftest cgs cg_selftest.cu "$(gpu_arch)"
check "every cg case within the residual bound (exit $RC)" [ "$RC" -eq 0 ]
check "all 8 cases ran" [ "$(grep -c '^PASS ' "$WORK/cgs.log")" -eq 8 ]
finish
