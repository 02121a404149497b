/* Reference for t2/mlp_gelu: Y = GELU(X·W1 + b1)·W2 + b2 in bf16, run the way an eager framework
 * runs it: cuBLAS GEMM into a bf16 temporary, then a separate kernel for each elementwise step
 * (bias, GELU, GEMM, bias). Every step is a full pass over its tensor in device memory, which is
 * exactly the traffic a fused solution avoids. Obviously correct first, fast never. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mlp_gelu reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mlp_gelu reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

/* cuBLAS wants its own workspace; handing it one from st_init keeps st_run free of allocations. */
#define WORKSPACE_BYTES (32u << 20)

typedef struct {
    int64_t T, D, H;
    const __nv_bfloat16 *W1, *b1, *W2, *b2; /* owned by the harness, live until st_free */
    __nv_bfloat16 *hid;                      /* [T, H] intermediate */
    void *workspace;
    cublasHandle_t handle;
} mlp_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mlp_gelu reference: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok && ndim == 1)
        fprintf(stderr, "mlp_gelu reference: %s: expected bf16 of shape [%lld]\n", what, (long long)d0);
    else if (!ok)
        fprintf(stderr, "mlp_gelu reference: %s: expected bf16 of shape [%lld, %lld]\n", what,
                (long long)d0, (long long)d1);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels: one thread per element, the framework way

__global__ void bias_add_kernel(__nv_bfloat16 *x, const __nv_bfloat16 *bias, int64_t rows,
                                int64_t cols) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}

__global__ void gelu_kernel(__nv_bfloat16 *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = __bfloat162float(x[i]);
    float g = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    x[i] = __float2bfloat16(g);
}

static unsigned int blocks_for(int64_t n, int threads) { return (unsigned int)((n + threads - 1) / threads); }

// ----------------------------------------------------------------------------
// row-major C[M, N] = A[M, K] · B[K, N] is column-major C^T = B^T · A^T: hand cuBLAS the
// operands swapped, no transposes needed.

static int gemm_bf16(cublasHandle_t h, const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                     __nv_bfloat16 *C, int64_t M, int64_t N, int64_t K) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                              &one, B, CUDA_R_16BF, (int)N, A, CUDA_R_16BF, (int)K,
                              &zero, C, CUDA_R_16BF, (int)N,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    mlp_ctx *ctx = (mlp_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->hid);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(mlp_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "D", &ctx->D) || cfg_get(cfg, "H", &ctx->H))
        return 1;
    /* cuBLAS takes int dimensions */
    if (ctx->T <= 0 || ctx->D <= 0 || ctx->H <= 0 || ctx->T * ctx->H > INT32_MAX ||
        ctx->D * ctx->H > INT32_MAX || ctx->T * ctx->D > INT32_MAX) {
        fprintf(stderr, "mlp_gelu reference: sizes out of range\n");
        return 1;
    }
    if (n_params != 4) {
        fprintf(stderr, "mlp_gelu reference: expected 4 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "W1", 2, ctx->D, ctx->H) || check_tensor(&params[1], "b1", 1, ctx->H, 0) ||
        check_tensor(&params[2], "W2", 2, ctx->H, ctx->D) || check_tensor(&params[3], "b2", 1, ctx->D, 0))
        return 1;
    ctx->W1 = (const __nv_bfloat16 *)params[0].data;
    ctx->b1 = (const __nv_bfloat16 *)params[1].data;
    ctx->W2 = (const __nv_bfloat16 *)params[2].data;
    ctx->b2 = (const __nv_bfloat16 *)params[3].data;

    CUDA_CHECK(cudaMalloc(&ctx->hid, (size_t)(ctx->T * ctx->H) * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    mlp_ctx *ctx = (mlp_ctx *)calloc(1, sizeof(mlp_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    mlp_ctx *ctx = (mlp_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "mlp_gelu reference: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "X", 2, ctx->T, ctx->D) || check_tensor(&out[0], "Y", 2, ctx->T, ctx->D))
        return 1;
    const __nv_bfloat16 *X = (const __nv_bfloat16 *)in[0].data;
    __nv_bfloat16 *Y = (__nv_bfloat16 *)out[0].data;
    const int threads = 256;
    const unsigned int hid_blocks = blocks_for(ctx->T * ctx->H, threads);
    const unsigned int y_blocks = blocks_for(ctx->T * ctx->D, threads);

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));

    if (gemm_bf16(ctx->handle, X, ctx->W1, ctx->hid, ctx->T, ctx->H, ctx->D)) return 1;
    bias_add_kernel<<<hid_blocks, threads, 0, stream>>>(ctx->hid, ctx->b1, ctx->T, ctx->H);
    CUDA_CHECK(cudaGetLastError());
    gelu_kernel<<<hid_blocks, threads, 0, stream>>>(ctx->hid, ctx->T * ctx->H);
    CUDA_CHECK(cudaGetLastError());
    if (gemm_bf16(ctx->handle, ctx->hid, ctx->W2, Y, ctx->T, ctx->D, ctx->H)) return 1;
    bias_add_kernel<<<y_blocks, threads, 0, stream>>>(Y, ctx->b2, ctx->T, ctx->D);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
