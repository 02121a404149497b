#!/usr/bin/env python3
"""Time torch.matmul on bf16 M x K @ K x N with triton.testing.do_bench (median), the yardstick
for stitch's timing fidelity: scripts/gpu-test compares it with the median stitch reports for the
t1/gemm_bf16 expert (cuBLASLt) at the same shape, in the same run."""
import json
import sys

import torch
import triton


def main() -> None:
    m, n, k = (int(x) for x in (sys.argv[1:4] if len(sys.argv) >= 4 else (8192, 8192, 8192)))
    torch.manual_seed(0)
    a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
    torch.matmul(a, b)
    torch.cuda.synchronize()
    runs = [triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median")
            for _ in range(3)]
    runs.sort()
    print(json.dumps({"shape": [m, n, k], "do_bench_median_ms": runs[1], "runs_ms": runs,
                      "torch": torch.__version__, "triton": triton.__version__}))


if __name__ == "__main__":
    main()
