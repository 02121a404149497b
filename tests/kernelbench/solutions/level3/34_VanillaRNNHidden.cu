/* KernelBench level3/34_VanillaRNNHidden: a 256-step Elman RNN, batch 8, input 1024, hidden 256,
 * output 128, fp32: h_t = tanh(i2h([x_t, h_{t-1}])), y_t = h2o(h_t), all 256 y_t returned. Eager
 * PyTorch launches a cat, an addmm, a tanh and another addmm per step (over a thousand small
 * kernels, most of the time spent launching them). Only h_{t-1}·W_hᵀ is truly sequential, so:
 *   1. one SGEMM computes the input part for every step at once, P = x·W_xᵀ [2048, 256], W_x
 *      being the first 1024 columns of i2h.weight (read in place, leading dimension 1280);
 *   2. 256 small step kernels, h_t = tanh(P_t + b + h_{t-1}·W_hᵀ), one warp per hidden unit
 *      (lanes split k, coalesced 16-byte loads of W_h's row, a shuffle reduction per batch row),
 *      captured once in st_init into a CUDA graph on fixed scratch buffers, so each call
 *      launches them as one graph instead of 256 host launches;
 *   3. one cuBLASLt matmul with a BIAS epilogue, Y = H·W_oᵀ + b_o over all 2048 (t, b) rows.
 * Splitting i2h's K = 1280 sum into 1024 + 256 only changes the fp32 summation order; the
 * recurrence is contracting (tanh' ≤ 1, small weights), so those last-bit differences do not
 * grow over the steps. All GEMMs are true fp32 (the reference ran with TF32 off). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include "stitch/solution.h"

#define TAG "kernelbench level3/34"
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

enum { T = 256, B = 8, IN = 1024, H = 256, OUT = 128, KCAT = IN + H, WARPS = 8 };

typedef struct {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *ws;
    const float *w_i2h, *b_i2h;
    float *P;    /* [T, B, H] input part of every step */
    float *Hs;   /* [T + 1, B, H]: slot 0 is h0, slot t + 1 is h_t */
    lt_layer h2o;
    cudaGraphExec_t steps;
} rnn_ctx;

/* h_out[b][j] = tanh(P_t[b][j] + bias[j] + Σ_k W[j][IN + k]·h_in[b][k]), one warp per j. */
__global__ void __launch_bounds__(WARPS * 32)
rnn_step(const float *__restrict__ P_t, const float *__restrict__ w_i2h,
         const float *__restrict__ bias, const float *__restrict__ h_in,
         float *__restrict__ h_out) {
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const float4 *wrow = (const float4 *)(w_i2h + (long)j * KCAT + IN); /* 16-byte aligned */
    const float4 w0 = __ldg(&wrow[lane]), w1 = __ldg(&wrow[lane + 32]);
    float acc[B];
#pragma unroll
    for (int b = 0; b < B; b++) {
        const float4 *hb = (const float4 *)(h_in + b * H);
        const float4 a0 = hb[lane], a1 = hb[lane + 32];
        acc[b] = w0.x * a0.x + w0.y * a0.y + w0.z * a0.z + w0.w * a0.w +
                 w1.x * a1.x + w1.y * a1.y + w1.z * a1.z + w1.w * a1.w;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int b = 0; b < B; b++) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], off);
    if (lane < B) {
        float s = acc[0];
#pragma unroll
        for (int b = 1; b < B; b++) s = lane == b ? acc[b] : s; /* select without local memory */
        h_out[lane * H + j] = tanhf(P_t[lane * H + j] + bias[j] + s);
    }
}

extern "C" void st_free(void *p) {
    rnn_ctx *c = (rnn_ctx *)p;
    if (!c) return;
    /* st_free cannot report; each resource is released if it was made */
    if (c->steps) cudaGraphExecDestroy(c->steps);
    layer_free(&c->h2o);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->ws);
    cudaFree(c->P);
    cudaFree(c->Hs);
    free(c);
}

/* Capture the 256 step kernels, which only touch ctx-owned buffers and params, into a graph. */
static int capture_steps(rnn_ctx *c) {
    cudaStream_t s;
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (int t = 0; t < T && e == cudaSuccess; t++) {
        rnn_step<<<H / WARPS, WARPS * 32, 0, s>>>(c->P + (long)t * B * H, c->w_i2h, c->b_i2h,
                                                 c->Hs + (long)t * B * H,
                                                 c->Hs + (long)(t + 1) * B * H);
        e = cudaGetLastError();
    }
    const cudaError_t end = cudaStreamEndCapture(s, &g); /* always end, even after a failure */
    if (e == cudaSuccess) e = end;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&c->steps, g, 0);
    if (g) cudaGraphDestroy(g); /* the executable graph keeps what it needs */
    cudaStreamDestroy(s);
    CUDA_CHECK(e);
    return 0;
}

static int init_ctx(rnn_ctx *c, const st_tensor *params, int32_t n_params) {
    const st_tensor *wi = find_param(params, n_params, "i2h.weight");
    const st_tensor *bi = find_param(params, n_params, "i2h.bias");
    const st_tensor *wo = find_param(params, n_params, "h2o.weight");
    const st_tensor *bo = find_param(params, n_params, "h2o.bias");
    if (check_f32(wi, "i2h.weight", 2, H, KCAT) || check_f32(bi, "i2h.bias", 1, H) ||
        check_f32(wo, "h2o.weight", 2, OUT, H) || check_f32(bo, "h2o.bias", 1, OUT))
        return 1;
    if ((uintptr_t)wi->data & 15) {
        fprintf(stderr, TAG ": i2h.weight is not 16-byte aligned\n");
        return 1;
    }
    c->w_i2h = (const float *)wi->data;
    c->b_i2h = (const float *)bi->data;
    BLAS_CHECK(cublasCreate(&c->blas)); /* default math mode: true fp32, no TF32 */
    BLAS_CHECK(cublasLtCreate(&c->lt));
    CUDA_CHECK(cudaMalloc(&c->ws, LT_WORKSPACE));
    CUDA_CHECK(cudaMalloc(&c->P, sizeof(float) * T * B * H));
    CUDA_CHECK(cudaMalloc(&c->Hs, sizeof(float) * (T + 1) * B * H));
    if (layer_setup(c->lt, &c->h2o, T * B, OUT, H, (const float *)wo->data,
                    (const float *)bo->data, false))
        return 1;
    return capture_steps(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg; (void)stream;
    *out_ctx = NULL;
    rnn_ctx *c = (rnn_ctx *)calloc(1, sizeof(rnn_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    rnn_ctx *c = (rnn_ctx *)p;
    if (n_in != 2 || n_out != 1) {
        fprintf(stderr, TAG ": expected 2 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 3, T, B, IN) || check_f32(&in[1], "x1", 2, B, H) ||
        check_f32(&out[0], "y0", 3, T, B, OUT))
        return 1;
    const float one = 1.0f, zero = 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(c->Hs, in[1].data, sizeof(float) * B * H, cudaMemcpyDeviceToDevice,
                               stream));
    BLAS_CHECK(cublasSetStream(c->blas, stream));
    /* row-major P [T·B, H] = x·W_xᵀ is column-major Pᵀ = op_T(W_x)·xᵀ, W_x being column-major
     * [IN, H] with leading dimension KCAT */
    BLAS_CHECK(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, H, T * B, IN, &one, c->w_i2h, KCAT,
                           (const float *)in[0].data, IN, &zero, c->P, H));
    CUDA_CHECK(cudaGraphLaunch(c->steps, stream));
    return layer_run(c->lt, &c->h2o, c->Hs + B * H, (float *)out[0].data, c->ws, stream);
}
