/* KernelBench level3/43_MinGPTCausalAttention: minGPT's causal self-attention, x [128, 512, 768],
 * 8 heads of 96, fp32 (both dropouts have p = 0, an identity even in train mode):
 *   qkv = x·W_attnᵀ + b_attn;  att = softmax(mask(q·kᵀ · 1/√96));  y = (att·v)·W_projᵀ + b_proj.
 * Eager PyTorch copies q, k and v out of the interleaved qkv tensor to make them contiguous,
 * writes the 1 GB score tensor, then reads and writes it again for the scale, the masked_fill and
 * the softmax, and copies the head outputs back into [B, T, C] order. Here:
 *   1. one cuBLASLt matmul with a BIAS epilogue makes qkv [B·T, 2304];
 *   2. one batched SGEMM over all 1024 (batch, head) pairs reads q and k in place from qkv
 *      (leading dimension 2304; the pointer arrays are fixed in st_init, every buffer is ours);
 *   3. one kernel, a warp per row of 512 scores, scales, masks (keys after the query are
 *      dropped: st_init checks that the mask buffer `bias` is the causal tril(ones) the program
 *      builds, and refuses to run otherwise), takes the softmax in PyTorch's way (max,
 *      exp(s − max), sum, divide) and writes the zeros above the diagonal, in place;
 *   4. a second batched SGEMM multiplies by v in place and writes each head's output straight
 *      into its 96 columns of a [B, T, 768] buffer (leading dimension 768), no transpose pass;
 *   5. a cuBLASLt matmul with a BIAS epilogue projects it into y.
 * Every GEMM is true fp32 (cuBLAS default math mode, compute type 32F: the reference has TF32
 * off), so only the summation order differs from PyTorch's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include "stitch/solution.h"

#define TAG "kernelbench level3/43"
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, TAG ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

/* An f32 tensor of exactly these dims (unused trailing dims are left at 0), with data. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1 = 0,
                     int64_t d2 = 0, int64_t d3 = 0) {
    const int64_t want[4] = {d0, d1, d2, d3};
    int ok = t != NULL && t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) fprintf(stderr, TAG ": %s: not an f32 tensor of the shape this program fixes\n", what);
    return !ok;
}
#define BLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, TAG ": %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_); \
    return 1; } } while (0)

#define LT_WORKSPACE (32u << 20)

/* One nn.Linear as a cuBLASLt matmul, Y[M, N] = act(X[M, K]·W[N, K]ᵀ + b), row-major. Row-major Y
 * is column-major Yᵀ [N, M], so it is posed as Yᵀ = op_T(W)·Xᵀ: W is a column-major K x N matrix
 * used transposed, X a column-major K x M one, and the bias runs along Yᵀ's rows (the output
 * features), as the BIAS and RELU_BIAS epilogues expect. Compute type 32F is true fp32: the
 * reference ran with TF32 off. */
typedef struct {
    const float *W;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t w, x, y;
    cublasLtMatmulAlgo_t algo;
} lt_layer;

static void layer_free(lt_layer *L) {
    /* teardown cannot report; each descriptor is released if it was made */
    if (L->y) cublasLtMatrixLayoutDestroy(L->y);
    if (L->x) cublasLtMatrixLayoutDestroy(L->x);
    if (L->w) cublasLtMatrixLayoutDestroy(L->w);
    if (L->op) cublasLtMatmulDescDestroy(L->op);
}

static int layer_setup(cublasLtHandle_t lt, lt_layer *L, int M, int N, int K, const float *W,
                       const float *bias, bool relu) {
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    L->W = W;
    BLAS_CHECK(cublasLtMatmulDescCreate(&L->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(L->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(L->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(L->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                              sizeof epi));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(L->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof bias));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&L->w, CUDA_R_32F, K, N, K));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&L->x, CUDA_R_32F, K, M, K));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&L->y, CUDA_R_32F, N, M, N));
    cublasLtMatmulPreference_t pref;
    BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws_bytes = LT_WORKSPACE;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, L->op, L->w, L->x, L->y, L->y, pref, 1, &res,
                                            &found);
    cublasLtMatmulPreferenceDestroy(pref); /* its failure would change nothing below */
    BLAS_CHECK(st);
    if (found < 1) {
        fprintf(stderr, TAG ": cuBLASLt has no algorithm for a %d x %d x %d GEMM\n", M, N, K);
        return 1;
    }
    L->algo = res.algo;
    return 0;
}

/* The algorithms were chosen for the 256-byte alignment cudaMalloc and the harness give. */
static int layer_run(cublasLtHandle_t lt, const lt_layer *L, const float *X, float *Y, void *ws,
                     cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    if (((uintptr_t)X | (uintptr_t)Y) & 255) {
        fprintf(stderr, TAG ": a GEMM operand is not 256-byte aligned\n");
        return 1;
    }
    BLAS_CHECK(cublasLtMatmul(lt, L->op, &one, L->W, L->w, X, L->x, &zero, Y, L->y, Y, L->y,
                              &L->algo, ws, LT_WORKSPACE, stream));
    return 0;
}

static const st_tensor *find_param(const st_tensor *p, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (p[i].name && strcmp(p[i].name, name) == 0) return &p[i];
    fprintf(stderr, TAG ": param '%s' missing\n", name);
    return NULL;
}

enum { B = 128, T = 512, C = 768, NH = 8, HS = C / NH, C3 = 3 * C, NBH = B * NH,
       ROWS_PER_BLOCK = 8 };

typedef struct {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *ws;
    float *qkv;  /* [B·T, 3C] */
    float *att;  /* [B·NH, T, T] */
    float *yh;   /* [B·T, C] head outputs side by side */
    const float **ptrs; /* device: q, k, v, att (as const) pointers, then the yh pointers */
    lt_layer attn, proj;
} gpt_ctx;

/* One warp per score row (b, h, t): 512 scores, 16 per lane. */
__global__ void __launch_bounds__(ROWS_PER_BLOCK * 32) causal_softmax(float *__restrict__ att) {
    const long row = (long)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31, t = (int)(row % T);
    const float scale = 0.10206207261596575f; /* 1.0 / math.sqrt(96), as torch's float scalar */
    float4 *p = (float4 *)(att + row * T);
    float4 v[4];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int j = 4 * (lane + 32 * i); /* columns j .. j + 3 */
        float4 a = p[lane + 32 * i];
        a.x = j + 0 <= t ? a.x * scale : -INFINITY;
        a.y = j + 1 <= t ? a.y * scale : -INFINITY;
        a.z = j + 2 <= t ? a.z * scale : -INFINITY;
        a.w = j + 3 <= t ? a.w * scale : -INFINITY;
        v[i] = a;
        m = fmaxf(m, fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)));
    }
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.0f; /* column 0 is never masked, so m is finite and exp(-inf - m) is 0 */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[i].x = expf(v[i].x - m); v[i].y = expf(v[i].y - m);
        v[i].z = expf(v[i].z - m); v[i].w = expf(v[i].w - m);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
#pragma unroll
    for (int i = 0; i < 4; i++)
        p[lane + 32 * i] = make_float4(v[i].x / s, v[i].y / s, v[i].z / s, v[i].w / s);
}

/* Counts the entries of the mask's [T, T] corner whose zero-ness differs from causal (j <= t). */
__global__ void check_causal_mask(const float *__restrict__ mask, int ld, int *__restrict__ bad) {
    const int t = blockIdx.x;
    int n = 0;
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        n += (mask[(long)t * ld + j] != 0.0f) != (j <= t);
    if (n) atomicAdd(bad, n);
}

static int check_mask(const st_tensor *m) {
    int *bad = NULL, host = 0;
    if (check_f32(m, "bias", 4, 1, 1, m ? m->shape[2] : 0, m ? m->shape[2] : 0)) return 1;
    if (m->shape[2] < T) {
        fprintf(stderr, TAG ": mask buffer 'bias' is smaller than the sequence\n");
        return 1;
    }
    CUDA_CHECK(cudaMalloc(&bad, sizeof(int)));
    cudaError_t e = cudaMemset(bad, 0, sizeof(int));
    if (e == cudaSuccess) {
        check_causal_mask<<<T, 256>>>((const float *)m->data, (int)m->shape[3], bad);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(&host, bad, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(bad); /* a failure to free changes nothing here */
    CUDA_CHECK(e);
    if (host) {
        fprintf(stderr, TAG ": mask buffer 'bias' is not causal in %d places; this solution "
                "hard-codes the causal mask\n", host);
        return 1;
    }
    return 0;
}

extern "C" void st_free(void *p) {
    gpt_ctx *c = (gpt_ctx *)p;
    if (!c) return;
    /* st_free cannot report; each resource is released if it was made */
    layer_free(&c->attn);
    layer_free(&c->proj);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->ws);
    cudaFree(c->qkv);
    cudaFree(c->att);
    cudaFree(c->yh);
    cudaFree(c->ptrs);
    free(c);
}

/* Pointer arrays of the two batched GEMMs, index b·NH + h: q, k, v inside qkv, the score
 * matrices, and each head's column block of yh; all buffers are the context's, so fixed. */
static int build_pointers(gpt_ctx *c) {
    const size_t n = 5 * (size_t)NBH;
    const float **host = (const float **)malloc(n * sizeof(float *));
    if (!host) return 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int i = b * NH + h;
            const float *base = c->qkv + (size_t)b * T * C3 + h * HS;
            host[i] = base;                          /* q */
            host[NBH + i] = base + C;                /* k */
            host[2 * NBH + i] = base + 2 * C;        /* v */
            host[3 * NBH + i] = c->att + (size_t)i * T * T;
            host[4 * NBH + i] = c->yh + (size_t)b * T * C + h * HS;
        }
    const cudaError_t e = cudaMalloc(&c->ptrs, n * sizeof(float *));
    const cudaError_t e2 = e == cudaSuccess ?
        cudaMemcpy(c->ptrs, host, n * sizeof(float *), cudaMemcpyHostToDevice) : e;
    free(host);
    CUDA_CHECK(e2);
    return 0;
}

static int init_ctx(gpt_ctx *c, const st_tensor *params, int32_t n) {
    const st_tensor *wa = find_param(params, n, "c_attn.weight");
    const st_tensor *ba = find_param(params, n, "c_attn.bias");
    const st_tensor *wp = find_param(params, n, "c_proj.weight");
    const st_tensor *bp = find_param(params, n, "c_proj.bias");
    if (check_f32(wa, "c_attn.weight", 2, C3, C) || check_f32(ba, "c_attn.bias", 1, C3) ||
        check_f32(wp, "c_proj.weight", 2, C, C) || check_f32(bp, "c_proj.bias", 1, C) ||
        check_mask(find_param(params, n, "bias")))
        return 1;
    BLAS_CHECK(cublasCreate(&c->blas)); /* default math mode: true fp32, no TF32 */
    BLAS_CHECK(cublasLtCreate(&c->lt));
    CUDA_CHECK(cudaMalloc(&c->ws, LT_WORKSPACE));
    CUDA_CHECK(cudaMalloc(&c->qkv, sizeof(float) * B * T * C3));
    CUDA_CHECK(cudaMalloc(&c->att, sizeof(float) * NBH * T * T));
    CUDA_CHECK(cudaMalloc(&c->yh, sizeof(float) * B * T * C));
    if (build_pointers(c)) return 1;
    if (layer_setup(c->lt, &c->attn, B * T, C3, C, (const float *)wa->data,
                    (const float *)ba->data, false))
        return 1;
    return layer_setup(c->lt, &c->proj, B * T, C, C, (const float *)wp->data,
                       (const float *)bp->data, false);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg; (void)stream;
    *out_ctx = NULL;
    gpt_ctx *c = (gpt_ctx *)calloc(1, sizeof(gpt_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

/* Column-major views of the row-major per-head matrices (leading dimensions in elements):
 * scores Sᵀ = op_T(K)·Qᵀ, i.e. S[t][j] = q_t·k_j stored row-major with ld T; and
 * Yᵀ = Vᵀ·Pᵀ, i.e. Y = P·V stored row-major into yh with ld C. */
static int attention(gpt_ctx *c, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    const float *const *q = c->ptrs, *const *k = c->ptrs + NBH, *const *v = c->ptrs + 2 * NBH;
    const float *const *att_in = c->ptrs + 3 * NBH;
    float *const *att_out = (float *const *)(c->ptrs + 3 * NBH);
    float *const *yh = (float *const *)(c->ptrs + 4 * NBH);
    BLAS_CHECK(cublasSetStream(c->blas, stream));
    BLAS_CHECK(cublasSgemmBatched(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, HS, &one, k, C3, q, C3,
                                  &zero, att_out, T, NBH));
    causal_softmax<<<NBH * T / ROWS_PER_BLOCK, ROWS_PER_BLOCK * 32, 0, stream>>>(c->att);
    CUDA_CHECK(cudaGetLastError());
    BLAS_CHECK(cublasSgemmBatched(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, HS, T, T, &one, v, C3,
                                  att_in, T, &zero, yh, C, NBH));
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    gpt_ctx *c = (gpt_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 3, B, T, C) || check_f32(&out[0], "y0", 3, B, T, C)) return 1;
    if (layer_run(c->lt, &c->attn, (const float *)in[0].data, c->qkv, c->ws, stream)) return 1;
    if (attention(c, stream)) return 1;
    return layer_run(c->lt, &c->proj, c->yh, (float *)out[0].data, c->ws, stream);
}
