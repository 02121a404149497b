#!/usr/bin/env bash
# t1/topk's expert on rows the task's size sets never draw (tests/gpu/topk_selftest.cu): constant
# rows and rows of three values in its persistent kernel's general path, such rows interleaved
# with random ones, signed zeros, misaligned rows, the widths and k past the persistent kernel's
# limits; each call against a host sort of the same order, on the copy path st_init picks (the
# bulk copy on sm_90) and on cp.async. Then its eval-size time for each, printed.
BACKEND=cuda
. "$(dirname "$0")/../lib.sh"

selftest tks topk_selftest.cu "$(gpu_arch)"
check "every topk case matches the host sort (exit $RC)" [ "$RC" -eq 0 ]
check "all 14 cases ran" [ "$(grep -c '^PASS ' "$WORK/tks.log")" -eq 14 ]
# cp.async is the path of GPUs before sm_90; forced here, so that an sm_90 GPU runs it too
selftest tks-cpasync topk_selftest.cu "$(gpu_arch)" -DTOPK_TMA=0
check "every topk case matches the host sort with cp.async (exit $RC)" [ "$RC" -eq 0 ]
check "all 14 cases ran with cp.async" [ "$(grep -c '^PASS ' "$WORK/tks-cpasync.log")" -eq 14 ]
finish
