/* Reference for t3/gpt2_forward: the GPT-2 small forward pass, tokens [B, T] -> logits [B, T, V],
 * run the way an eager framework (PyTorch eager) runs it. Every linear layer is one cuBLAS GEMM
 * (bf16 in, fp32 accumulation, bf16 out) followed by a separate kernel for each elementwise step:
 * bias, GELU, residual add. LayerNorm is one kernel per call (fp32 statistics). Attention is the
 * textbook one: the heads are permuted out of the qkv rows, a batched GEMM writes every head's full
 * [T, T] score matrix in fp32, a softmax kernel masks, normalises and stores the probabilities in
 * bf16, a second batched GEMM multiplies them by v, and the heads are permuted back. Every
 * activation between two operations goes through device memory in bf16 (the residual stream too).
 * Workspaces are sized from the config in st_init, so st_run allocates nothing. Obviously correct
 * first, fast never: the fp32 scores alone are 400 MB at the eval size and cross device memory
 * four times per layer (written, then read three times by the softmax). */
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
    fprintf(stderr, "gpt2_forward reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "gpt2_forward reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)
/* a kernel launch reports a bad configuration only through the next error query */
#define LAUNCH_CHECK(what) do { cudaError_t e_ = cudaGetLastError(); if (e_ != cudaSuccess) { \
    fprintf(stderr, "gpt2_forward reference: %s:%d: launching %s: %s\n", __FILE__, __LINE__, \
            what, cudaGetErrorString(e_)); return 1; } } while (0)

#define HEAD_DIM 64
#define MAX_POS 1024    /* rows of wpe: the longest context the model knows */
#define BLOCK 256
#define LN_EPS 1e-5f
/* cuBLAS wants its own workspace; handing it one from st_init keeps st_run free of allocations. */
#define WORKSPACE_BYTES (32u << 20)

typedef __nv_bfloat16 bf16;

/* The params in ABI order (task.json). Shapes are filled in from the sizes in init_ctx. */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_LN2W, P_LN2B,
       P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, N_PARAMS };
static const char *const param_names[N_PARAMS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb" };

typedef struct {
    int64_t B, T, L, C, NH, V;
    const bf16 *p[N_PARAMS]; /* owned by the harness, live until st_free */
    bf16 *x;                 /* [B*T, C] residual stream */
    bf16 *ln;                /* [B*T, C] LayerNorm output */
    bf16 *qkv;               /* [B*T, 3C] */
    bf16 *heads;             /* [3, B, NH, T, 64]: q, k, v one head after another */
    float *scores;           /* [B*NH, T, T] */
    bf16 *probs;             /* [B*NH, T, T] */
    bf16 *atto;              /* [B, NH, T, 64] attention output per head */
    bf16 *att;               /* [B*T, C] heads side by side */
    bf16 *proj;              /* [B*T, C] output of a projection, before the residual add */
    bf16 *fc;                /* [B*T, 4C] */
    void *workspace;
    cublasHandle_t handle;
} gpt2_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "gpt2_forward reference: size '%s' missing from the config\n", name);
    return 1;
}

/* name NULL: any name (inputs and outputs are checked by position) */
static int check_tensor(const st_tensor *t, const char *what, const char *name, st_dtype dtype,
                        const char *dtype_name, int ndim, const int64_t *shape) {
    int ok = (name == NULL || (t->name != NULL && strcmp(t->name, name) == 0)) &&
             t->dtype == dtype && t->ndim == ndim && t->data != NULL;
    for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
    if (!ok) {
        char dims[96] = "";
        for (int d = 0; d < ndim; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "",
                     (long long)shape[d]);
        fprintf(stderr, "gpt2_forward reference: %s: expected %s%s%s%s of shape [%s]\n", what,
                name ? "'" : "", name ? name : "", name ? "', " : "", dtype_name, dims);
    }
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels: one thread per element or one block per row, the framework way

/* x = wte[token] + wpe[t]. A token outside the vocabulary would read past wte; its row becomes
 * NaN instead, so the output shows the bad input rather than some other token's logits. */
__global__ void embed_kernel(const int32_t *tokens, const bf16 *wte, const bf16 *wpe, bf16 *x,
                             int64_t T, int64_t C, int64_t V, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t bt = i / C, c = i % C, t = bt % T;
    const int32_t tok = tokens[bt];
    float v = NAN;
    if (tok >= 0 && tok < V)
        v = __bfloat162float(wte[(int64_t)tok * C + c]) + __bfloat162float(wpe[t * C + c]);
    x[i] = __float2bfloat16(v);
}

/* shared-memory tree sum over the BLOCK threads; every thread gets the total, in a fixed order */
__device__ float block_sum(float v) {
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    float total = buf[0];
    __syncthreads(); /* buf is reused by the next call */
    return total;
}

__device__ float block_max(float v) {
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + stride]);
        __syncthreads();
    }
    float m = buf[0];
    __syncthreads();
    return m;
}

/* One block per row: the mean, then the biased variance as the mean squared deviation from it
 * (two passes, no cancellation), then y = (x - mean) * rstd * w + b in bf16. */
__global__ void layernorm_kernel(const bf16 *x, const bf16 *w, const bf16 *b, bf16 *y, int64_t C) {
    const bf16 *xr = x + (int64_t)blockIdx.x * C;
    bf16 *yr = y + (int64_t)blockIdx.x * C;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += BLOCK) s += __bfloat162float(xr[c]);
    const float mean = block_sum(s) / (float)C;
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += BLOCK) {
        const float d = __bfloat162float(xr[c]) - mean;
        sq += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_sum(sq) / (float)C + LN_EPS);
    for (int64_t c = threadIdx.x; c < C; c += BLOCK) {
        const float v = (__bfloat162float(xr[c]) - mean) * rstd;
        yr[c] = __float2bfloat16(v * __bfloat162float(w[c]) + __bfloat162float(b[c]));
    }
}

__global__ void bias_add_kernel(bf16 *x, const bf16 *bias, int64_t cols, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(bias[i % cols]));
}

__global__ void gelu_kernel(bf16 *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = __bfloat162float(x[i]);
    x[i] = __float2bfloat16(0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))));
}

__global__ void residual_add_kernel(bf16 *x, const bf16 *y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(y[i]));
}

/* qkv row (b, t) holds [q | k | v], each NH heads of 64; the batched GEMMs want every head's
 * [T, 64] block contiguous: heads[s][b][h][t][d] = qkv[b*T + t][s*C + h*64 + d]. */
__global__ void split_heads_kernel(const bf16 *qkv, bf16 *heads, int64_t B, int64_t T,
                                   int64_t NH, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t C = NH * HEAD_DIM, d = i % HEAD_DIM, t = (i / HEAD_DIM) % T;
    const int64_t h = (i / (HEAD_DIM * T)) % NH, b = (i / (HEAD_DIM * T * NH)) % B;
    const int64_t s = i / (HEAD_DIM * T * NH * B);
    heads[i] = qkv[(b * T + t) * 3 * C + s * C + h * HEAD_DIM + d];
}

/* the inverse for the attention output: att[b*T + t][h*64 + d] = atto[b][h][t][d] */
__global__ void merge_heads_kernel(const bf16 *atto, bf16 *att, int64_t T, int64_t NH, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t C = NH * HEAD_DIM, c = i % C, bt = i / C, b = bt / T, t = bt % T;
    const int64_t h = c / HEAD_DIM, d = c % HEAD_DIM;
    att[i] = atto[((b * NH + h) * T + t) * HEAD_DIM + d];
}

/* One block per row of the flattened [B*NH*T, T] score matrix, query i = row % T: keys 0..i take
 * part, the rest of the row gets probability exactly 0 (the P·V GEMM reads the full row). */
__global__ void causal_softmax_kernel(const float *scores, bf16 *probs, int64_t T) {
    const int64_t r = blockIdx.x, i = r % T;
    const float *s = scores + r * T;
    bf16 *p = probs + r * T;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += BLOCK) m = fmaxf(m, s[j]);
    m = block_max(m);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j <= i; j += BLOCK) sum += expf(s[j] - m);
    sum = block_sum(sum);
    for (int64_t j = threadIdx.x; j < T; j += BLOCK)
        p[j] = __float2bfloat16(j <= i ? expf(s[j] - m) / sum : 0.0f);
}

static unsigned int blocks_for(int64_t n) { return (unsigned int)((n + BLOCK - 1) / BLOCK); }

// ----------------------------------------------------------------------------
// y[M, N] = x[M, K] · W[N, K]ᵀ, all row-major, y's rows ldy apart. Column-major, the buffer of y
// is yᵀ [N, M] = W · xᵀ; the row-major W buffer is the column-major Wᵀ [K, N] (so transposed
// back) and the x buffer is already xᵀ [K, M]. ldy is V for the logits, which cuBLAS takes at
// any alignment.

static int linear(cublasHandle_t h, const bf16 *x, const bf16 *W, bf16 *y, int64_t M, int64_t N,
                  int64_t K, int64_t ldy) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                              &one, W, CUDA_R_16BF, (int)K, x, CUDA_R_16BF, (int)K,
                              &zero, y, CUDA_R_16BF, (int)ldy,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    gpt2_ctx *ctx = (gpt2_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->x);
    cudaFree(ctx->ln);
    cudaFree(ctx->qkv);
    cudaFree(ctx->heads);
    cudaFree(ctx->scores);
    cudaFree(ctx->probs);
    cudaFree(ctx->atto);
    cudaFree(ctx->att);
    cudaFree(ctx->proj);
    cudaFree(ctx->fc);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(gpt2_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "L", &ctx->L) ||
        cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "NH", &ctx->NH) || cfg_get(cfg, "V", &ctx->V))
        return 1;
    const int64_t B = ctx->B, T = ctx->T, L = ctx->L, C = ctx->C, NH = ctx->NH, V = ctx->V;
    if (B < 1 || T < 1 || T > MAX_POS || L < 1 || NH < 1 || V < 1 || C != NH * HEAD_DIM) {
        fprintf(stderr, "gpt2_forward reference: sizes B=%lld T=%lld L=%lld C=%lld NH=%lld V=%lld: "
                "need B, L, NH, V >= 1, 1 <= T <= %d and C = NH * %d (64-wide heads)\n",
                (long long)B, (long long)T, (long long)L, (long long)C, (long long)NH, (long long)V,
                MAX_POS, HEAD_DIM);
        return 1;
    }
    /* cuBLAS takes int dimensions and batch counts; softmax and LayerNorm put one block per row
     * along grid x; the widest elementwise kernel (fc, 4C per row) must fit grid x too */
    if (B * T > INT32_MAX || B * NH * T > INT32_MAX || 4 * C > INT32_MAX || V > INT32_MAX ||
        (B * T * 4 * C + BLOCK - 1) / BLOCK > INT32_MAX) {
        fprintf(stderr, "gpt2_forward reference: sizes too large for int GEMM dimensions\n");
        return 1;
    }
    if (n_params != N_PARAMS) {
        fprintf(stderr, "gpt2_forward reference: expected %d params, got %d\n", N_PARAMS, n_params);
        return 1;
    }
    const int64_t shapes[N_PARAMS][4] = {   /* ndim, then the dimensions */
        {2, V, C}, {2, MAX_POS, C}, {2, L, C}, {2, L, C}, {3, L, 3 * C, C}, {2, L, 3 * C},
        {3, L, C, C}, {2, L, C}, {2, L, C}, {2, L, C}, {3, L, 4 * C, C}, {2, L, 4 * C},
        {3, L, C, 4 * C}, {2, L, C}, {1, C}, {1, C} };
    for (int i = 0; i < N_PARAMS; i++) {
        char what[32];
        snprintf(what, sizeof what, "param %d", i);
        if (check_tensor(&params[i], what, param_names[i], ST_BF16, "bf16", (int)shapes[i][0],
                         &shapes[i][1]))
            return 1;
        ctx->p[i] = (const bf16 *)params[i].data;
    }

    const size_t BT = (size_t)(B * T), Cs = (size_t)C, e = sizeof(bf16);
    const size_t square = (size_t)(B * NH) * (size_t)T * (size_t)T;
    CUDA_CHECK(cudaMalloc(&ctx->x, BT * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->ln, BT * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->qkv, BT * 3 * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->heads, BT * 3 * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->scores, square * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->probs, square * e));
    CUDA_CHECK(cudaMalloc(&ctx->atto, BT * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->att, BT * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->proj, BT * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->fc, BT * 4 * Cs * e));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    gpt2_ctx *ctx = (gpt2_ctx *)calloc(1, sizeof(gpt2_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

/* x = x + (a · Wᵀ + b), a [B*T, K], W [C, K]: the projection back into the residual stream */
static int project_add(gpt2_ctx *ctx, const bf16 *a, const bf16 *W, const bf16 *b, int64_t K,
                       cudaStream_t stream) {
    const int64_t BT = ctx->B * ctx->T, C = ctx->C, n = BT * C;
    if (linear(ctx->handle, a, W, ctx->proj, BT, C, K, C)) return 1;
    bias_add_kernel<<<blocks_for(n), BLOCK, 0, stream>>>(ctx->proj, b, C, n);
    LAUNCH_CHECK("bias_add_kernel (projection)");
    residual_add_kernel<<<blocks_for(n), BLOCK, 0, stream>>>(ctx->x, ctx->proj, n);
    LAUNCH_CHECK("residual_add_kernel");
    return 0;
}

/* causal self-attention of one layer: ctx->qkv [B*T, 3C] in, ctx->att [B*T, C] out */
static int attention(gpt2_ctx *ctx, cudaStream_t stream) {
    const int64_t B = ctx->B, T = ctx->T, NH = ctx->NH, BT = B * T, C = ctx->C;
    const int Ti = (int)T, batch = (int)(B * NH);
    const long long head = (long long)T * HEAD_DIM, square = (long long)T * T;
    const bf16 *q = ctx->heads, *k = ctx->heads + BT * C, *v = ctx->heads + 2 * BT * C;
    /* 1/sqrt(64) is a power of two: folding it into alpha scales the fp32 sums exactly */
    const float scale = 1.0f / 8.0f, one = 1.0f, zero = 0.0f;

    split_heads_kernel<<<blocks_for(3 * BT * C), BLOCK, 0, stream>>>(ctx->qkv, ctx->heads, B, T, NH,
                                                                    3 * BT * C);
    LAUNCH_CHECK("split_heads_kernel");
    /* Row-major S[T, T] = q[T, 64] · k[T, 64]ᵀ. Column-major, the buffer of S is Sᵀ = k · qᵀ; the
     * row-major q and k buffers are the column-major [64, T] matrices qᵀ and kᵀ, so A = (kᵀ)ᵀ
     * (transposed) and B = qᵀ (as is). */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, Ti, Ti, HEAD_DIM,
                                            &scale, k, CUDA_R_16BF, HEAD_DIM, head,
                                            q, CUDA_R_16BF, HEAD_DIM, head,
                                            &zero, ctx->scores, CUDA_R_32F, Ti, square, batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    causal_softmax_kernel<<<(unsigned int)(B * NH * T), BLOCK, 0, stream>>>(ctx->scores, ctx->probs, T);
    LAUNCH_CHECK("causal_softmax_kernel");
    /* Row-major o[T, 64] = P[T, T] · v[T, 64]. Column-major, the buffer of o is oᵀ = vᵀ · Pᵀ, and
     * the row-major v and P buffers already are vᵀ [64, T] and Pᵀ [T, T]: no transposes. */
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->handle, CUBLAS_OP_N, CUBLAS_OP_N, HEAD_DIM, Ti, Ti,
                                            &one, v, CUDA_R_16BF, HEAD_DIM, head,
                                            ctx->probs, CUDA_R_16BF, Ti, square,
                                            &zero, ctx->atto, CUDA_R_16BF, HEAD_DIM, head, batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    merge_heads_kernel<<<blocks_for(BT * C), BLOCK, 0, stream>>>(ctx->atto, ctx->att, T, NH, BT * C);
    LAUNCH_CHECK("merge_heads_kernel");
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    gpt2_ctx *ctx = (gpt2_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "gpt2_forward reference: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    const int64_t B = ctx->B, T = ctx->T, C = ctx->C, V = ctx->V, BT = B * T;
    const int64_t tok_shape[2] = {B, T}, logit_shape[3] = {B, T, V};
    if (check_tensor(&in[0], "input 0", NULL, ST_I32, "i32", 2, tok_shape) ||
        check_tensor(&out[0], "output 0", NULL, ST_BF16, "bf16", 3, logit_shape))
        return 1;
    const int32_t *tokens = (const int32_t *)in[0].data;
    bf16 *logits = (bf16 *)out[0].data;
    const bf16 *const *w = ctx->p;

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));

    embed_kernel<<<blocks_for(BT * C), BLOCK, 0, stream>>>(tokens, w[P_WTE], w[P_WPE], ctx->x, T, C,
                                                           V, BT * C);
    LAUNCH_CHECK("embed_kernel");
    for (int64_t l = 0; l < ctx->L; l++) {
        /* layer l's slice of each stacked param */
        const bf16 *ln1w = w[P_LN1W] + l * C, *ln1b = w[P_LN1B] + l * C;
        const bf16 *qkvw = w[P_QKVW] + l * 3 * C * C, *qkvb = w[P_QKVB] + l * 3 * C;
        const bf16 *attprojw = w[P_ATTPROJW] + l * C * C, *attprojb = w[P_ATTPROJB] + l * C;
        const bf16 *ln2w = w[P_LN2W] + l * C, *ln2b = w[P_LN2B] + l * C;
        const bf16 *fcw = w[P_FCW] + l * 4 * C * C, *fcb = w[P_FCB] + l * 4 * C;
        const bf16 *fcprojw = w[P_FCPROJW] + l * 4 * C * C, *fcprojb = w[P_FCPROJB] + l * C;

        layernorm_kernel<<<(unsigned int)BT, BLOCK, 0, stream>>>(ctx->x, ln1w, ln1b, ctx->ln, C);
        LAUNCH_CHECK("layernorm_kernel (ln1)");
        if (linear(ctx->handle, ctx->ln, qkvw, ctx->qkv, BT, 3 * C, C, 3 * C)) return 1;
        bias_add_kernel<<<blocks_for(BT * 3 * C), BLOCK, 0, stream>>>(ctx->qkv, qkvb, 3 * C, BT * 3 * C);
        LAUNCH_CHECK("bias_add_kernel (qkv)");
        if (attention(ctx, stream)) return 1;
        if (project_add(ctx, ctx->att, attprojw, attprojb, C, stream)) return 1;

        layernorm_kernel<<<(unsigned int)BT, BLOCK, 0, stream>>>(ctx->x, ln2w, ln2b, ctx->ln, C);
        LAUNCH_CHECK("layernorm_kernel (ln2)");
        if (linear(ctx->handle, ctx->ln, fcw, ctx->fc, BT, 4 * C, C, 4 * C)) return 1;
        bias_add_kernel<<<blocks_for(BT * 4 * C), BLOCK, 0, stream>>>(ctx->fc, fcb, 4 * C, BT * 4 * C);
        LAUNCH_CHECK("bias_add_kernel (fc)");
        gelu_kernel<<<blocks_for(BT * 4 * C), BLOCK, 0, stream>>>(ctx->fc, BT * 4 * C);
        LAUNCH_CHECK("gelu_kernel");
        if (project_add(ctx, ctx->fc, fcprojw, fcprojb, 4 * C, stream)) return 1;
    }
    layernorm_kernel<<<(unsigned int)BT, BLOCK, 0, stream>>>(ctx->x, w[P_LNFW], w[P_LNFB], ctx->ln, C);
    LAUNCH_CHECK("layernorm_kernel (lnf)");
    /* the tied output projection: logits = LN(x) · wteᵀ, straight into the unpadded output */
    return linear(ctx->handle, ctx->ln, w[P_WTE], logits, BT, V, C, V);
}
