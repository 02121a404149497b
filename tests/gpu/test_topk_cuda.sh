#!/usr/bin/env bash
# t1/topk's expert on rows the task's size sets never draw (tests/gpu/topk_selftest.cu): constant
# rows and rows of three values in its persistent kernel's general path, such rows interleaved
# with random ones, signed zeros, misaligned rows, the widths and k past the persistent kernel's
# limits; each call against a host sort of the same order, on the copy path st_init picks and on
# the bulk copy. Then its eval-size time for each, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

selftest tks topk_selftest.cu "$(gpu_arch)"
check "every topk case matches the host sort (exit $RC)" [ "$RC" -eq 0 ]
check "all 14 cases ran" [ "$(grep -c '^PASS ' "$WORK/tks.log")" -eq 14 ]
# the bulk copy is the H200's path (st_init takes it from 4 TB/s of DRAM bandwidth); forced here,
# so that an H100 runs it too
selftest tks-bulk topk_selftest.cu "$(gpu_arch)" -DBULK_MIN_GBS=0
check "every topk case matches the host sort with the bulk copy (exit $RC)" [ "$RC" -eq 0 ]
check "all 14 cases ran with the bulk copy" [ "$(grep -c '^PASS ' "$WORK/tks-bulk.log")" -eq 14 ]
finish
