/* Reference for t2/rope_qkv: the QKV projection of an attention block followed by rotary
 * position embedding (rotate-half convention), run the way an eager framework runs it: a cuBLAS
 * GEMM into a bf16 [T, 3C] temporary, a bias kernel, a kernel that splits the columns into q, k
 * and v heads ([H, T, D] each), and a rotary kernel over q and over k in place. The cos/sin
 * table depends only on the sizes; like a framework's rotary cache it is built once, in
 * st_init, in double precision. Obviously correct first, fast never. */
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
    fprintf(stderr, "rope_qkv reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "rope_qkv reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES (32u << 20)
#define ROPE_THETA 10000.0

typedef __nv_bfloat16 bf16;

typedef struct {
    int64_t T, H, D, C;
    const bf16 *W, *b;   /* owned by the harness, live until st_free */
    bf16 *qkv;           /* [T, 3C] */
    float *cos_t, *sin_t; /* [T, D/2] */
    void *workspace;
    cublasHandle_t handle;
} rope_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "rope_qkv reference: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) && t->data != NULL;
    if (!ok) fprintf(stderr, "rope_qkv reference: %s: wrong dtype, shape or pointer\n", what);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels: one thread per element (or per rotated pair), the framework way

__global__ void bias_add_kernel(bf16 *x, const bf16 *bias, int64_t rows, int64_t cols) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}

/* out_s[h, t, d] = qkv[t, s*C + h*D + d] for s = 0, 1, 2 (q, k, v) */
__global__ void split_heads_kernel(const bf16 *qkv, bf16 *q, bf16 *k, bf16 *v, int64_t T,
                                   int64_t H, int64_t D) {
    const int64_t C = H * D;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 3 * T * C) return;
    const int64_t t = i / (3 * C), j = i % (3 * C);
    const int64_t s = j / C, h = (j % C) / D, d = j % D;
    bf16 *dst = s == 0 ? q : s == 1 ? k : v;
    dst[(h * T + t) * D + d] = qkv[i];
}

/* in place on x [H, T, D]: one thread per pair (i, i + D/2) of one head vector */
__global__ void rope_kernel(bf16 *x, const float *cos_t, const float *sin_t, int64_t T, int64_t H,
                            int64_t D) {
    const int64_t half = D / 2;
    int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= H * T * half) return;
    const int64_t row = p / half, i = p % half; /* row = h*T + t */
    const int64_t t = row % T;
    bf16 *u = x + row * D;
    const float c = cos_t[t * half + i], s = sin_t[t * half + i];
    const float a = __bfloat162float(u[i]), b = __bfloat162float(u[i + half]);
    u[i] = __float2bfloat16(a * c - b * s);
    u[i + half] = __float2bfloat16(b * c + a * s);
}

static unsigned int blocks_for(int64_t n, int threads) { return (unsigned int)((n + threads - 1) / threads); }

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    rope_ctx *ctx = (rope_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->qkv);
    cudaFree(ctx->cos_t);
    cudaFree(ctx->sin_t);
    cudaFree(ctx->workspace);
    free(ctx);
}

/* cos/sin of t * 10000^(-2i/D) for t < T, i < D/2, computed in double and stored in fp32 */
static int build_table(rope_ctx *ctx) {
    const int64_t half = ctx->D / 2, n = ctx->T * half;
    float *hc = (float *)malloc(sizeof(float) * (size_t)n), *hs = (float *)malloc(sizeof(float) * (size_t)n);
    if (!hc || !hs) {
        free(hc);
        free(hs);
        fprintf(stderr, "rope_qkv reference: out of host memory for the rotary table\n");
        return 1;
    }
    for (int64_t i = 0; i < half; i++) {
        const double theta = pow(ROPE_THETA, -2.0 * (double)i / (double)ctx->D);
        for (int64_t t = 0; t < ctx->T; t++) {
            hc[t * half + i] = (float)cos((double)t * theta);
            hs[t * half + i] = (float)sin((double)t * theta);
        }
    }
    cudaError_t e = cudaMemcpy(ctx->cos_t, hc, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(ctx->sin_t, hs, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
    free(hc);
    free(hs);
    CUDA_CHECK(e);
    return 0;
}

static int init_ctx(rope_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "D", &ctx->D)) return 1;
    ctx->C = ctx->H * ctx->D;
    /* cuBLAS takes int dimensions */
    if (ctx->T <= 0 || ctx->H <= 0 || ctx->D <= 0 || ctx->D % 2 || 3 * ctx->C > INT32_MAX ||
        ctx->T * 3 * ctx->C > INT32_MAX || ctx->C * 3 * ctx->C > INT32_MAX) {
        fprintf(stderr, "rope_qkv reference: sizes out of range (D must be even)\n");
        return 1;
    }
    if (n_params != 2) {
        fprintf(stderr, "rope_qkv reference: expected 2 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "Wqkv", 2, ctx->C, 3 * ctx->C, 0) ||
        check_tensor(&params[1], "bqkv", 1, 3 * ctx->C, 0, 0))
        return 1;
    ctx->W = (const bf16 *)params[0].data;
    ctx->b = (const bf16 *)params[1].data;
    const size_t table = (size_t)(ctx->T * (ctx->D / 2)) * sizeof(float);
    CUDA_CHECK(cudaMalloc(&ctx->qkv, (size_t)(ctx->T * 3 * ctx->C) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&ctx->cos_t, table));
    CUDA_CHECK(cudaMalloc(&ctx->sin_t, table));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return build_table(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    rope_ctx *ctx = (rope_ctx *)calloc(1, sizeof(rope_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    rope_ctx *ctx = (rope_ctx *)p;
    if (n_in != 1 || n_out != 3) {
        fprintf(stderr, "rope_qkv reference: expected 1 input and 3 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C;
    if (check_tensor(&in[0], "x", 2, T, C, 0) || check_tensor(&out[0], "q", 3, H, T, D) ||
        check_tensor(&out[1], "k", 3, H, T, D) || check_tensor(&out[2], "v", 3, H, T, D))
        return 1;
    const bf16 *x = (const bf16 *)in[0].data;
    bf16 *q = (bf16 *)out[0].data, *k = (bf16 *)out[1].data, *v = (bf16 *)out[2].data;
    const int threads = 256;

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));
    /* row-major qkv[T, 3C] = x[T, C] · W[C, 3C] is column-major qkv^T = W^T · x^T: the operands
     * go in swapped, untransposed */
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)(3 * C), (int)T, (int)C,
                              &one, ctx->W, CUDA_R_16BF, (int)(3 * C), x, CUDA_R_16BF, (int)C,
                              &zero, ctx->qkv, CUDA_R_16BF, (int)(3 * C),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    bias_add_kernel<<<blocks_for(T * 3 * C, threads), threads, 0, stream>>>(ctx->qkv, ctx->b, T, 3 * C);
    CUDA_CHECK(cudaGetLastError());
    split_heads_kernel<<<blocks_for(T * 3 * C, threads), threads, 0, stream>>>(ctx->qkv, q, k, v, T, H, D);
    CUDA_CHECK(cudaGetLastError());
    const unsigned int pair_blocks = blocks_for(H * T * (D / 2), threads);
    rope_kernel<<<pair_blocks, threads, 0, stream>>>(q, ctx->cos_t, ctx->sin_t, T, H, D);
    CUDA_CHECK(cudaGetLastError());
    rope_kernel<<<pair_blocks, threads, 0, stream>>>(k, ctx->cos_t, ctx->sin_t, T, H, D);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
