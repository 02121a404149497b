#!/usr/bin/env python3
"""Writes mlp_gelu.json, the scripted conversation tests/gpu/test_solve_cuda.sh plays to
`stitch solve t2/mlp_gelu` on a GPU: a plan, a first draft that does not compile, its repair
(the eager program with bias and GELU fused into one pass), and an optimisation onto cuBLASLt
epilogues. The code is derived from the task's shipped files so that it is known to be sound;
the point is the loop (plan -> draft -> repair -> optimise -> best) on real CUDA verification.
Run it again after changing those files: python3 make_mlp_gelu.py > mlp_gelu.json"""
import json, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "..", "..", "..", "tasks", "t2", "mlp_gelu")

def read(name):
    with open(os.path.join(TASK, name)) as f:
        return f.read()

ref = read("reference.cu").replace("mlp_gelu reference", "mlp_gelu candidate")
ref = re.sub(r"\A/\*.*?\*/\n", "/* MLP with GELU: cuBLAS GEMMs, bias and GELU fused into one pass over the hidden tensor. */\n",
             ref, count=1, flags=re.S)
fused = '''__global__ void bias_gelu_kernel(__nv_bfloat16 *x, const __nv_bfloat16 *bias, int64_t rows,
                                 int64_t cols) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = __bfloat162float(x[i]) + __bfloat162float(bias[i % cols]);
    x[i] = __float2bfloat16(0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))));
}

'''
ref = ref.replace("static unsigned int blocks_for", fused + "static unsigned int blocks_for", 1)
launch_old = '''    bias_add_kernel<<<hid_blocks, threads, 0, stream>>>(ctx->hid, ctx->b1, ctx->T, ctx->H);
    CUDA_CHECK(cudaGetLastError());
    gelu_kernel<<<hid_blocks, threads, 0, stream>>>(ctx->hid, ctx->T * ctx->H);
    CUDA_CHECK(cudaGetLastError());'''
assert launch_old in ref
repaired = ref.replace(launch_old, '''    bias_gelu_kernel<<<hid_blocks, threads, 0, stream>>>(ctx->hid, ctx->b1, ctx->T, ctx->H);
    CUDA_CHECK(cudaGetLastError());''')
# drop the two kernels the fused one replaces
repaired = re.sub(r"__global__ void gelu_kernel\(.*?\n}\n", "", repaired, count=1, flags=re.S)
draft = repaired.replace("bias_gelu_kernel<<<hid_blocks,", "bias_gelu_kernel<<<hid_block,", 1)
assert draft != repaired
best = read("expert.cu").replace("mlp_gelu expert", "mlp_gelu candidate")

plan = {
    "summary": "Two GEMMs on the tensor cores with fp32 accumulation; the elementwise work (bias, "
               "GELU, bias) must not cost extra passes over the [T, H] intermediate.",
    "steps": [
        {"what": "cuBLAS GEMM X*W1 into a bf16 workspace, bias+GELU fused into one kernel, GEMM with W2, bias kernel",
         "kernels": ["cublasGemmEx", "bias_gelu_kernel", "cublasGemmEx", "bias_add_kernel"],
         "fusion": "bias and GELU in one pass", "host_setup": "handle, workspace and the [T, H] buffer in st_init"},
        {"what": "move bias+GELU and the second bias into cuBLASLt epilogues (GELU_BIAS, BIAS)",
         "kernels": ["cublasLtMatmul x2"], "fusion": "all elementwise work in GEMM epilogues",
         "host_setup": "matmul descriptors, layouts and heuristic algorithms in st_init"}],
    "bottlenecks": ["bf16 tensor-core GEMM throughput", "traffic of the [T, H] intermediate"],
    "risks": ["row-major vs column-major operand order", "16-byte alignment of fresh input pointers"],
    "constraints": ["engineering mode: cuBLAS and cuBLASLt allowed", "all work on the given stream"],
}

def answer(text):
    return {"openai_text": text}

steps = [
    answer(json.dumps(plan)),
    answer("Step 1, the fused eager version:\n\n```cuda\n" + draft + "```\n"),
    answer("Fixed the launch (the grid size variable is hid_blocks):\n\n```cuda\n" + repaired + "```\n"),
    answer("Step 2: both elementwise passes move into cuBLASLt epilogues.\n\n```cuda\n" + best + "```\n"),
]
print(json.dumps({"steps": steps}, indent=1))
