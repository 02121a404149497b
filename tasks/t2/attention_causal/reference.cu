/* Reference for t2/attention_causal: causal softmax(q·kᵀ/√64)·v the eager way. A strided-batched
 * cuBLAS GEMM writes every head's full [T, T] score matrix in fp32 (scale folded into alpha), a
 * softmax kernel masks the keys after each query, normalises each row and writes the
 * probabilities in bf16 (zeros above the diagonal), and a second batched GEMM multiplies them by
 * v. The score and probability matrices (sized from the config in st_init) cross device memory
 * several times and the GEMMs do the masked half of the work too: obviously correct, not fast. */
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
    fprintf(stderr, "attention_causal reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "attention_causal reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, \
            __LINE__, #call, (int)s_); return 1; } } while (0)

#define HEAD_DIM 64
#define BLOCK 256
#define WORKSPACE_BYTES (32u << 20)

typedef __nv_bfloat16 bf16;

typedef struct {
    int64_t B, H, T;
    float *scores;  /* [B*H, T, T] */
    bf16 *probs;    /* [B*H, T, T] */
    void *workspace;
    cublasHandle_t handle;
} attn_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "attention_causal reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_tensor(const st_tensor *t, const char *what, const attn_ctx *c) {
    int ok = t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
             t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL;
    if (!ok)
        fprintf(stderr, "attention_causal reference: %s: expected bf16 [%lld, %lld, %lld, %d]\n", what,
                (long long)c->B, (long long)c->H, (long long)c->T, HEAD_DIM);
    return !ok;
}

// ----------------------------------------------------------------------------
// the causal softmax: one block per row of one head's score matrix

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            float other = buf[threadIdx.x + stride];
            buf[threadIdx.x] = is_max ? fmaxf(buf[threadIdx.x], other) : buf[threadIdx.x] + other;
        }
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads(); /* buf is reused by the next call */
    return r;
}

/* Row r of the flattened [B*H*T, T] matrix is query i = r % T; keys 0..i take part, the rest of
 * the row gets probability 0 (the P·V GEMM reads the full row). */
__global__ void causal_softmax_kernel(const float *scores, bf16 *probs, int64_t T) {
    const int64_t r = blockIdx.x, i = r % T;
    const float *s = scores + r * T;
    bf16 *p = probs + r * T;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += BLOCK) m = fmaxf(m, s[j]);
    m = block_reduce(m, true);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j <= i; j += BLOCK) sum += expf(s[j] - m);
    sum = block_reduce(sum, false);
    for (int64_t j = threadIdx.x; j < T; j += BLOCK)
        p[j] = __float2bfloat16(j <= i ? expf(s[j] - m) / sum : 0.0f);
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    attn_ctx *ctx = (attn_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->scores);
    cudaFree(ctx->probs);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(attn_ctx *ctx, const st_config *cfg, int32_t n_params) {
    if (cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "T", &ctx->T)) return 1;
    /* cuBLAS takes int dimensions and batch counts; one softmax block per row along grid x */
    if (ctx->B <= 0 || ctx->H <= 0 || ctx->T <= 0 || ctx->T > INT32_MAX ||
        ctx->B * ctx->H > INT32_MAX || ctx->B * ctx->H * ctx->T > INT32_MAX) {
        fprintf(stderr, "attention_causal reference: sizes out of range\n");
        return 1;
    }
    if (n_params != 0) {
        fprintf(stderr, "attention_causal reference: expected no params, got %d\n", n_params);
        return 1;
    }
    const size_t n = (size_t)(ctx->B * ctx->H) * (size_t)ctx->T * (size_t)ctx->T;
    CUDA_CHECK(cudaMalloc(&ctx->scores, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->probs, n * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    attn_ctx *ctx = (attn_ctx *)calloc(1, sizeof(attn_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    attn_ctx *ctx = (attn_ctx *)p;
    if (n_in != 3 || n_out != 1) {
        fprintf(stderr, "attention_causal reference: expected 3 inputs and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "q", ctx) || check_tensor(&in[1], "k", ctx) ||
        check_tensor(&in[2], "v", ctx) || check_tensor(&out[0], "o", ctx))
        return 1;
    const bf16 *q = (const bf16 *)in[0].data, *k = (const bf16 *)in[1].data, *v = (const bf16 *)in[2].data;
    bf16 *o = (bf16 *)out[0].data;
    const int T = (int)ctx->T, batch = (int)(ctx->B * ctx->H);
    const long long head = (long long)T * HEAD_DIM, square = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)HEAD_DIM), one = 1.0f, zero = 0.0f;

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));

    /* Row-major S[T, T] = q[T, 64] · k[T, 64]ᵀ. Column-major, the buffer of S is Sᵀ = k · qᵀ; the
     * row-major q and k buffers are the column-major [64, T] matrices qᵀ and kᵀ, so A = (kᵀ)ᵀ
     * (transposed) and B = qᵀ (as is). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, T, T, HEAD_DIM,
                                            &scale, k, CUDA_R_16BF, HEAD_DIM, head,
                                            q, CUDA_R_16BF, HEAD_DIM, head,
                                            &zero, ctx->scores, CUDA_R_32F, T, square, batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    causal_softmax_kernel<<<(unsigned int)(ctx->B * ctx->H * ctx->T), BLOCK, 0, stream>>>(
        ctx->scores, ctx->probs, ctx->T);
    CUDA_CHECK(cudaGetLastError());
    /* Row-major o[T, 64] = P[T, T] · v[T, 64]. Column-major, the buffer of o is oᵀ = vᵀ · Pᵀ, and
     * the row-major v and P buffers already are vᵀ [64, T] and Pᵀ [T, T]: no transposes. */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, HEAD_DIM, T, T,
                                            &one, v, CUDA_R_16BF, HEAD_DIM, head,
                                            ctx->probs, CUDA_R_16BF, T, square,
                                            &zero, o, CUDA_R_16BF, HEAD_DIM, head, batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}
