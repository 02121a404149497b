/* CUDA solution for tests/kernelbench/transformer_block.py, the pre-LayerNorm GPT block
 * x = x + proj(attn(ln1(x))); x = x + fc2(gelu(fc1(ln2(x)))), in plain fp32 CUDA: a warp-per-row
 * LayerNorm, one shared-memory tiled GEMM with the bias, GELU or residual add fused into its
 * epilogue, and a causal attention kernel that keeps one head's keys and values in shared
 * memory. It follows transformer_block.c step for step, with fp32 sums in place of double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "transformer_block solution: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

/* Fixed by the program's get_inputs() and get_init_inputs(): the head count is not visible in the
 * weights, and the workspace is sized before the first input arrives. */
#define BATCH 4
#define SEQ 64
#define EMBD 128
#define N_HEAD 4
#define HEAD_DIM (EMBD / N_HEAD)
#define HIDDEN (4 * EMBD)
#define ROWS (BATCH * SEQ)
#define LN_EPS 1e-5f

#define N_PARAMS 12

/* The attention kernel gives output column d of a head to lane d. */
static_assert(HEAD_DIM == 32, "attention_kernel needs a head dimension of one warp");

typedef struct {
    /* owned by the harness, live until st_free; Linear weights are [out, in] */
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    float *xn;  /* [ROWS, EMBD]  a LayerNorm output */
    float *qkv; /* [ROWS, 3*EMBD] */
    float *att; /* [ROWS, EMBD]  the heads side by side, before the out projection */
    float *x1;  /* [ROWS, EMBD]  the residual stream after attention */
    float *hid; /* [ROWS, HIDDEN] gelu(fc1(...)) */
} block_ctx;

__device__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// ----------------------------------------------------------------------------
// LayerNorm: one warp per row, mean first and then the (biased) variance about it, which is
// steadier than E[x^2] - mean^2.

#define LN_WARPS 8

__global__ void layernorm_kernel(const float *__restrict__ x, const float *__restrict__ w,
                                 const float *__restrict__ b, float *__restrict__ y, int rows,
                                 int cols) {
    const int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return; /* the whole warp leaves together, so the shuffles stay full */
    const float *xr = x + (size_t)row * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32) sum += xr[c];
    const float mean = warp_sum(sum) / cols;
    float sq = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        float d = xr[c] - mean;
        sq = fmaf(d, d, sq);
    }
    const float rstd = 1.0f / sqrtf(warp_sum(sq) / cols + LN_EPS);
    for (int c = lane; c < cols; c += 32)
        y[(size_t)row * cols + c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

// ----------------------------------------------------------------------------
// Linear: y[M, N] = x[M, K]·W[N, K]^T + bias, both operands K-contiguous as nn.Linear stores
// them. A block computes a TILE x TILE patch of y, a thread four outputs 16 rows / 16 columns
// apart, so that a warp's shared-memory reads fall in distinct banks (rows padded to TILE+1).

#define TILE 32
#define GEMM_THREADS 256

enum epilogue { EPI_BIAS, EPI_BIAS_GELU, EPI_BIAS_RESIDUAL };

template <int EPI>
__global__ void __launch_bounds__(GEMM_THREADS)
linear_kernel(const float *__restrict__ x, const float *__restrict__ W,
              const float *__restrict__ bias, const float *__restrict__ res,
              float *__restrict__ y, int M, int N, int K) {
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

    for (int k0 = 0; k0 < K; k0 += TILE) {
        for (int e = threadIdx.x; e < TILE * TILE; e += GEMM_THREADS) {
            const int r = e / TILE, c = e % TILE, k = k0 + c;
            xs[r][c] = (m0 + r < M && k < K) ? x[(size_t)(m0 + r) * K + k] : 0.0f;
            ws[r][c] = (n0 + r < N && k < K) ? W[(size_t)(n0 + r) * K + k] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE; kk++) {
            const float a0 = xs[ty][kk], a1 = xs[ty + 16][kk];
            const float b0 = ws[tx][kk], b1 = ws[tx + 16][kk];
            acc[0][0] = fmaf(a0, b0, acc[0][0]);
            acc[0][1] = fmaf(a0, b1, acc[0][1]);
            acc[1][0] = fmaf(a1, b0, acc[1][0]);
            acc[1][1] = fmaf(a1, b1, acc[1][1]);
        }
        __syncthreads();
    }

    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m >= M || n >= N) continue;
            float v = acc[i][j] + bias[n];
            const size_t idx = (size_t)m * N + n;
            if (EPI == EPI_BIAS_GELU) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
            else if (EPI == EPI_BIAS_RESIDUAL) v = res[idx] + v;
            y[idx] = v;
        }
}

// ----------------------------------------------------------------------------
// Causal attention. A block takes one (batch, head) and ATT_QBLOCK consecutive queries, loads
// the keys and values those queries can see into shared memory, and gives each query to one
// warp: lanes split the keys for the scores and softmax, then lane d sums output column d.

#define ATT_WARPS 4
#define ATT_QBLOCK 16

#define ATT_SMEM_BYTES \
    (sizeof(float) * (SEQ * (HEAD_DIM + 1) + SEQ * HEAD_DIM + ATT_WARPS * (HEAD_DIM + SEQ)))
static_assert(ATT_SMEM_BYTES <= 48 * 1024, "attention needs more than the default shared memory");

__global__ void __launch_bounds__(ATT_WARPS * 32)
attention_kernel(const float *__restrict__ qkv, float *__restrict__ att, int T, int C,
                 int n_head, float scale) {
    extern __shared__ float smem[];
    float *Ks = smem;                      /* [T][HEAD_DIM + 1], padded: lane j reads key j */
    float *Vs = Ks + T * (HEAD_DIM + 1);   /* [T][HEAD_DIM] */
    float *Qs = Vs + T * HEAD_DIM;         /* [ATT_WARPS][HEAD_DIM] */
    float *Ps = Qs + ATT_WARPS * HEAD_DIM; /* [ATT_WARPS][T] scores, then weights */
    const int b = blockIdx.x / n_head, h = blockIdx.x % n_head;
    const int q0 = blockIdx.y * ATT_QBLOCK, q_end = min(q0 + ATT_QBLOCK, T);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t stride = 3 * (size_t)C; /* a qkv row: q, k, v thirds, head h at h*HEAD_DIM */
    const float *base = qkv + (size_t)b * T * stride + h * HEAD_DIM;

    for (int e = threadIdx.x; e < q_end * HEAD_DIM; e += blockDim.x) {
        const int j = e / HEAD_DIM, d = e % HEAD_DIM;
        Ks[j * (HEAD_DIM + 1) + d] = base[j * stride + C + d];
        Vs[j * HEAD_DIM + d] = base[j * stride + 2 * C + d];
    }
    __syncthreads();

    float *q = Qs + warp * HEAD_DIM, *p = Ps + warp * T;
    for (int i = q0 + warp; i < q_end; i += ATT_WARPS) { /* warp-uniform, so shuffles are safe */
        q[lane] = base[i * stride + lane];
        __syncwarp();
        /* keys after i are masked to -inf, so they get weight exactly 0: skip them */
        float mx = -INFINITY;
        for (int j = lane; j <= i; j += 32) {
            float dot = 0.0f;
#pragma unroll
            for (int d = 0; d < HEAD_DIM; d++) dot = fmaf(q[d], Ks[j * (HEAD_DIM + 1) + d], dot);
            p[j] = dot * scale;
            mx = fmaxf(mx, p[j]);
        }
        mx = warp_max(mx); /* key 0 is always seen, so this is finite */
        float sum = 0.0f;
        for (int j = lane; j <= i; j += 32) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        sum = warp_sum(sum);
        for (int j = lane; j <= i; j += 32) p[j] = p[j] / sum;
        __syncwarp();
        float acc = 0.0f;
        for (int j = 0; j <= i; j++) acc = fmaf(p[j], Vs[j * HEAD_DIM + lane], acc);
        att[((size_t)b * T + i) * C + h * HEAD_DIM + lane] = acc;
        __syncwarp(); /* q and p are rewritten for the next query */
    }
}

// ----------------------------------------------------------------------------

static unsigned int ceil_div(int a, int b) { return (unsigned int)((a + b - 1) / b); }

static int layernorm(const float *x, const float *w, const float *b, float *y, cudaStream_t s) {
    layernorm_kernel<<<ceil_div(ROWS, LN_WARPS), LN_WARPS * 32, 0, s>>>(x, w, b, y, ROWS, EMBD);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

template <int EPI>
static int linear(const float *x, const float *W, const float *b, const float *res, float *y,
                  int n_in, int n_out, cudaStream_t s) {
    dim3 grid(ceil_div(n_out, TILE), ceil_div(ROWS, TILE));
    linear_kernel<EPI><<<grid, GEMM_THREADS, 0, s>>>(x, W, b, res, y, ROWS, n_out, n_in);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* Looks a param up by its state_dict key and checks it is fp32 of the given shape (ndim 1 uses
 * d0 only). */
static const float *find_param(const st_tensor *params, int32_t n, const char *name, int ndim,
                               int64_t d0, int64_t d1) {
    for (int32_t i = 0; i < n; i++) {
        const st_tensor *t = &params[i];
        if (strcmp(t->name, name) != 0) continue;
        if (t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
            (ndim == 1 || t->shape[1] == d1) && t->data != NULL)
            return (const float *)t->data;
        if (ndim == 1)
            fprintf(stderr, "transformer_block solution: %s: expected f32 of shape [%lld]\n", name,
                    (long long)d0);
        else
            fprintf(stderr, "transformer_block solution: %s: expected f32 of shape [%lld, %lld]\n",
                    name, (long long)d0, (long long)d1);
        return NULL;
    }
    fprintf(stderr, "transformer_block solution: param '%s' missing\n", name);
    return NULL;
}

static int check_io(const st_tensor *t, const char *what) {
    int ok = t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == BATCH && t->shape[1] == SEQ &&
             t->shape[2] == EMBD && t->data != NULL;
    if (!ok)
        fprintf(stderr, "transformer_block solution: %s: expected f32 of shape [%d, %d, %d]\n", what,
                BATCH, SEQ, EMBD);
    return !ok;
}

extern "C" void st_free(void *p) {
    block_ctx *ctx = (block_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->xn);
    cudaFree(ctx->qkv);
    cudaFree(ctx->att);
    cudaFree(ctx->x1);
    cudaFree(ctx->hid);
    free(ctx);
}

static int init_ctx(block_ctx *ctx, const st_tensor *P, int32_t n) {
    if (n != N_PARAMS) {
        fprintf(stderr, "transformer_block solution: expected %d params, got %d\n", N_PARAMS, n);
        return 1;
    }
    if (!(ctx->ln1_w = find_param(P, n, "ln1.weight", 1, EMBD, 0)) ||
        !(ctx->ln1_b = find_param(P, n, "ln1.bias", 1, EMBD, 0)) ||
        !(ctx->qkv_w = find_param(P, n, "attn.qkv.weight", 2, 3 * EMBD, EMBD)) ||
        !(ctx->qkv_b = find_param(P, n, "attn.qkv.bias", 1, 3 * EMBD, 0)) ||
        !(ctx->proj_w = find_param(P, n, "attn.proj.weight", 2, EMBD, EMBD)) ||
        !(ctx->proj_b = find_param(P, n, "attn.proj.bias", 1, EMBD, 0)) ||
        !(ctx->ln2_w = find_param(P, n, "ln2.weight", 1, EMBD, 0)) ||
        !(ctx->ln2_b = find_param(P, n, "ln2.bias", 1, EMBD, 0)) ||
        !(ctx->fc1_w = find_param(P, n, "fc1.weight", 2, HIDDEN, EMBD)) ||
        !(ctx->fc1_b = find_param(P, n, "fc1.bias", 1, HIDDEN, 0)) ||
        !(ctx->fc2_w = find_param(P, n, "fc2.weight", 2, EMBD, HIDDEN)) ||
        !(ctx->fc2_b = find_param(P, n, "fc2.bias", 1, EMBD, 0)))
        return 1;
    CUDA_CHECK(cudaMalloc(&ctx->xn, sizeof(float) * ROWS * EMBD));
    CUDA_CHECK(cudaMalloc(&ctx->qkv, sizeof(float) * ROWS * 3 * EMBD));
    CUDA_CHECK(cudaMalloc(&ctx->att, sizeof(float) * ROWS * EMBD));
    CUDA_CHECK(cudaMalloc(&ctx->x1, sizeof(float) * ROWS * EMBD));
    CUDA_CHECK(cudaMalloc(&ctx->hid, sizeof(float) * ROWS * HIDDEN));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    block_ctx *ctx = (block_ctx *)calloc(1, sizeof(block_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    block_ctx *ctx = (block_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "transformer_block solution: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    if (check_io(&in[0], "x0") || check_io(&out[0], "y0")) return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;
    /* the scale PyTorch multiplies by: the Python double rounded to fp32 */
    const float scale = (float)(1.0 / sqrt((double)HEAD_DIM));

    if (layernorm(x, ctx->ln1_w, ctx->ln1_b, ctx->xn, stream)) return 1;
    if (linear<EPI_BIAS>(ctx->xn, ctx->qkv_w, ctx->qkv_b, NULL, ctx->qkv, EMBD, 3 * EMBD, stream))
        return 1;
    dim3 att_grid(BATCH * N_HEAD, ceil_div(SEQ, ATT_QBLOCK));
    attention_kernel<<<att_grid, ATT_WARPS * 32, ATT_SMEM_BYTES, stream>>>(
        ctx->qkv, ctx->att, SEQ, EMBD, N_HEAD, scale);
    CUDA_CHECK(cudaGetLastError());
    if (linear<EPI_BIAS_RESIDUAL>(ctx->att, ctx->proj_w, ctx->proj_b, x, ctx->x1, EMBD, EMBD, stream))
        return 1;
    if (layernorm(ctx->x1, ctx->ln2_w, ctx->ln2_b, ctx->xn, stream)) return 1;
    if (linear<EPI_BIAS_GELU>(ctx->xn, ctx->fc1_w, ctx->fc1_b, NULL, ctx->hid, EMBD, HIDDEN, stream))
        return 1;
    if (linear<EPI_BIAS_RESIDUAL>(ctx->hid, ctx->fc2_w, ctx->fc2_b, ctx->x1, y, HIDDEN, EMBD, stream))
        return 1;
    return 0;
}
