#!/usr/bin/env python3
"""Time torch.matmul on bf16 M x K @ K x N with triton.testing.do_bench (median), the yardstick
for stitch's timing fidelity: scripts/gpu-test compares it with the median stitch reports for the
t1/gemm_bf16 expert (cuBLASLt) at the same shape, in the same run."""
import json
import sys
import time

import torch
import triton


def main() -> None:
    m, n, k = (int(x) for x in (sys.argv[1:4] if len(sys.argv) >= 4 else (8192, 8192, 8192)))
    torch.manual_seed(0)
    a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
    torch.matmul(a, b)
    torch.cuda.synchronize()
    # Back to back, the second and later calls run on a GPU that 100 ms of products has pushed to
    # its power cap (about 1530 MHz on the H200). stitch's interleaved batches leave the GPU at
    # full clocks, so the comparison takes calls that each start from an idle GPU (2 s rest),
    # and reports the back-to-back ones beside them.
    runs, clocks = [], []
    for _ in range(3):
        runs.append(triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median"))
        clocks.append(sm_clock_mhz())
    rested, rested_clocks = [], []
    for _ in range(3):
        time.sleep(2.0)
        rested.append(triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median"))
        rested_clocks.append(sm_clock_mhz())
    # The same product timed the way stitch times a sample: flush, events, whole-device sync.
    flush = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
    synced = []
    for _ in range(200):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        torch.cuda.synchronize()
        synced.append(s.elapsed_time(e))
    synced.sort()
    print(json.dumps({"shape": [m, n, k], "do_bench_rested_median_ms": sorted(rested)[1],
                      "rested_runs_ms": rested, "sm_mhz_after_each_rested_run": rested_clocks,
                      "do_bench_median_ms": sorted(runs)[1],
                      "do_bench_first_ms": runs[0], "runs_ms": runs,
                      "sm_mhz_after_each_run": clocks,
                      "synced_median_ms": synced[len(synced) // 2],
                      "torch": torch.__version__, "triton": triton.__version__}))


def sm_clock_mhz() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0),
                                             pynvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001 - the clock is a diagnostic, not a result
        return 0


if __name__ == "__main__":
    main()
