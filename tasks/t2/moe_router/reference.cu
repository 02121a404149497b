/* Reference for t2/moe_router: a top-2 mixture-of-experts layer computed densely, the plainly
 * correct way a first eager implementation does it: cuBLAS computes the router logits in fp32,
 * one kernel turns them into a dense [T, E] gate matrix (softmax, top 2, renormalise, zero
 * elsewhere), and then every expert runs on every token (a cuBLAS GEMM into a bf16 temporary)
 * and is added into an fp32 accumulator weighted by its gate column, zero for the tokens that did
 * not choose it. E/2 times the useful GEMM work, but no routing logic to get wrong. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "moe_router reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "moe_router reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES (32u << 20)
#define MAX_EXPERTS 64

typedef __nv_bfloat16 bf16;

typedef struct {
    int64_t T, C, F, E;
    const bf16 *Wr, *W;   /* owned by the harness, live until st_free */
    float *logits;        /* [T, E] */
    float *gates;         /* [T, E], zero where an expert is not chosen */
    bf16 *tmp;            /* [T, F] one expert's output */
    float *acc;           /* [T, F] */
    void *workspace;
    cublasHandle_t handle;
} moe_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "moe_router reference: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) && t->data != NULL;
    if (!ok) fprintf(stderr, "moe_router reference: %s: wrong dtype, shape or pointer\n", what);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels

/* one thread per token: softmax over the E logits, the two largest (ties: lower index), their
 * probabilities renormalised into the dense gate row */
__global__ void gates_kernel(const float *logits, float *gates, int64_t T, int E) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *l = logits + t * E;
    float *g = gates + t * E;
    float m = l[0];
    for (int e = 1; e < E; e++) m = fmaxf(m, l[e]);
    float p[MAX_EXPERTS];
    float sum = 0.0f;
    for (int e = 0; e < E; e++) {
        p[e] = expf(l[e] - m);
        sum += p[e];
    }
    for (int e = 0; e < E; e++) p[e] /= sum;
    /* strict comparisons keep the lower index on equal values */
    int a = 0;
    for (int e = 1; e < E; e++)
        if (l[e] > l[a]) a = e;
    int b = a == 0 ? 1 : 0;
    for (int e = 0; e < E; e++)
        if (e != a && l[e] > l[b]) b = e;
    for (int e = 0; e < E; e++) g[e] = 0.0f;
    g[a] = p[a] / (p[a] + p[b]);
    g[b] = p[b] / (p[a] + p[b]);
}

/* acc[t, f] += gates[t, e] * y[t, f] */
__global__ void add_weighted_kernel(float *acc, const bf16 *y, const float *gates, int64_t T,
                                    int64_t F, int E, int e) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * F) return;
    acc[i] += gates[(i / F) * E + e] * __bfloat162float(y[i]);
}

__global__ void to_bf16_kernel(const float *acc, bf16 *out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = __float2bfloat16(acc[i]);
}

static unsigned int blocks_for(int64_t n, int threads) { return (unsigned int)((n + threads - 1) / threads); }

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    moe_ctx *ctx = (moe_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->logits);
    cudaFree(ctx->gates);
    cudaFree(ctx->tmp);
    cudaFree(ctx->acc);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(moe_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "F", &ctx->F) ||
        cfg_get(cfg, "E", &ctx->E))
        return 1;
    /* cuBLAS takes int dimensions */
    if (ctx->T <= 0 || ctx->C <= 0 || ctx->F <= 0 || ctx->E < 2 || ctx->E > MAX_EXPERTS ||
        ctx->T > INT32_MAX || ctx->C > INT32_MAX || ctx->F > INT32_MAX) {
        fprintf(stderr, "moe_router reference: sizes out of range (2 <= E <= %d)\n", MAX_EXPERTS);
        return 1;
    }
    if (n_params != 2) {
        fprintf(stderr, "moe_router reference: expected 2 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "Wr", 2, ctx->C, ctx->E, 0) ||
        check_tensor(&params[1], "W", 3, ctx->E, ctx->C, ctx->F))
        return 1;
    ctx->Wr = (const bf16 *)params[0].data;
    ctx->W = (const bf16 *)params[1].data;
    CUDA_CHECK(cudaMalloc(&ctx->logits, (size_t)(ctx->T * ctx->E) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->gates, (size_t)(ctx->T * ctx->E) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->tmp, (size_t)(ctx->T * ctx->F) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&ctx->acc, (size_t)(ctx->T * ctx->F) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    moe_ctx *ctx = (moe_ctx *)calloc(1, sizeof(moe_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    moe_ctx *ctx = (moe_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "moe_router reference: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t T = ctx->T, C = ctx->C, F = ctx->F, E = ctx->E;
    if (check_tensor(&in[0], "x", 2, T, C, 0) || check_tensor(&out[0], "out", 2, T, F, 0)) return 1;
    const bf16 *x = (const bf16 *)in[0].data;
    bf16 *y = (bf16 *)out[0].data;
    const int threads = 256;
    const float one = 1.0f, zero = 0.0f;

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));

    /* Row-major Out[M, N] = A[M, K] · B[K, N] is column-major Out^T = B^T · A^T: the operands go
     * in swapped, untransposed. Logits: [T, E] = x[T, C] · Wr[C, E], fp32 out. */
    CUBLAS_CHECK(cublasGemmEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)E, (int)T, (int)C,
                              &one, ctx->Wr, CUDA_R_16BF, (int)E, x, CUDA_R_16BF, (int)C,
                              &zero, ctx->logits, CUDA_R_32F, (int)E,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    gates_kernel<<<blocks_for(T, threads), threads, 0, stream>>>(ctx->logits, ctx->gates, T, (int)E);
    CUDA_CHECK(cudaGetLastError());

    CUDA_CHECK(cudaMemsetAsync(ctx->acc, 0, (size_t)(T * F) * sizeof(float), stream));
    for (int64_t e = 0; e < E; e++) {
        /* tmp[T, F] = x[T, C] · W[e][C, F], for every token */
        CUBLAS_CHECK(cublasGemmEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)F, (int)T, (int)C,
                                  &one, ctx->W + e * C * F, CUDA_R_16BF, (int)F, x, CUDA_R_16BF, (int)C,
                                  &zero, ctx->tmp, CUDA_R_16BF, (int)F,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        add_weighted_kernel<<<blocks_for(T * F, threads), threads, 0, stream>>>(ctx->acc, ctx->tmp,
                                                                                ctx->gates, T, F, (int)E, (int)e);
        CUDA_CHECK(cudaGetLastError());
    }
    to_bf16_kernel<<<blocks_for(T * F, threads), threads, 0, stream>>>(ctx->acc, y, T * F);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
