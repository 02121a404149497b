/* KernelBench level2/40_Matmul_Scaling_ResidualAdd: y = t·0.5 + t with t = x·Wᵀ + b, for x
 * [16384, 4096] and nn.Linear(4096, 4096), fp32. The "residual" is t itself (a detached clone), so
 * y = 1.5·(x·Wᵀ + b). Eager PyTorch runs the addmm, then a clone, a multiply and an add, three more
 * passes over the 256 MB result (about 1.8 GB of traffic). Here the 1.5 is folded into the weights
 * at init (W' = 1.5·W, b' = 1.5·b, one rounding each, about 6e-8 relative) and each call is a
 * single cuBLASLt matmul whose BIAS epilogue adds b' while the tile is in registers: the output is
 * written once and never read back. Folding into W and b rather than using alpha keeps the result
 * independent of whether an epilogue's bias is scaled by alpha. The GEMM is true fp32 (compute type
 * 32F; the reference has TF32 off), and the algorithm is chosen once in st_init. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include "stitch/solution.h"

#define TAG "kernelbench level2/40"
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

/* One fixed-shape cuBLASLt GEMM, Y[M, N] = epilogue(X[M, K]·W[N, K]ᵀ + bias), row-major. Row-major
 * Y is column-major Yᵀ [N, M], so it is posed as Yᵀ = op_T(W)·Xᵀ: W is a column-major K x N
 * matrix used transposed, X a column-major K x M one, and the bias runs along Yᵀ's rows, the
 * output features, as cuBLASLt's bias epilogues expect. Compute type 32F is true fp32 (no TF32). */
typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t w, x, y;
    cublasLtMatmulAlgo_t algo;
    void *ws;
} lt_gemm;

static void lt_free(lt_gemm *g) {
    /* teardown cannot report; each handle is released if it was made */
    if (g->y) cublasLtMatrixLayoutDestroy(g->y);
    if (g->x) cublasLtMatrixLayoutDestroy(g->x);
    if (g->w) cublasLtMatrixLayoutDestroy(g->w);
    if (g->op) cublasLtMatmulDescDestroy(g->op);
    if (g->lt) cublasLtDestroy(g->lt);
    cudaFree(g->ws);
}

static int lt_setup(lt_gemm *g, int M, int N, int K, cublasLtEpilogue_t epi, const float *bias) {
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    BLAS_CHECK(cublasLtCreate(&g->lt));
    BLAS_CHECK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                              sizeof epi));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof bias));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&g->w, CUDA_R_32F, K, N, K));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&g->x, CUDA_R_32F, K, M, K));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&g->y, CUDA_R_32F, N, M, N));
    CUDA_CHECK(cudaMalloc(&g->ws, LT_WORKSPACE));
    cublasLtMatmulPreference_t pref;
    BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws_bytes = LT_WORKSPACE;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, g->w, g->x, g->y, g->y, pref, 1, &res,
                                            &found);
    cublasLtMatmulPreferenceDestroy(pref); /* its failure would change nothing below */
    BLAS_CHECK(st);
    if (found < 1) {
        fprintf(stderr, TAG ": cuBLASLt has no algorithm for this GEMM\n");
        return 1;
    }
    g->algo = res.algo;
    return 0;
}

/* The algorithm was chosen for the default 256-byte alignment the harness's buffers have. */
static int lt_run(lt_gemm *g, const float *W, const float *X, float *Y, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    if (((uintptr_t)X | (uintptr_t)Y) & 255) {
        fprintf(stderr, TAG ": input or output not 256-byte aligned\n");
        return 1;
    }
    BLAS_CHECK(cublasLtMatmul(g->lt, g->op, &one, W, g->w, X, g->x, &zero, Y, g->y, Y, g->y,
                              &g->algo, g->ws, LT_WORKSPACE, stream));
    return 0;
}

static const st_tensor *find_param(const st_tensor *p, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (p[i].name && strcmp(p[i].name, name) == 0) return &p[i];
    fprintf(stderr, TAG ": param '%s' missing\n", name);
    return NULL;
}

enum { BATCH = 16384, IN = 4096, OUT = 4096 };
#define FACTOR 1.5f /* 1 + scaling_factor (0.5): t·0.5 + t */

typedef struct { lt_gemm g; float *W, *b; /* the scaled copies, owned */ } msr_ctx;

extern "C" void st_free(void *p) {
    msr_ctx *c = (msr_ctx *)p;
    if (!c) return;
    lt_free(&c->g);
    cudaFree(c->W);
    cudaFree(c->b);
    free(c);
}

__global__ void scale_copy(const float *__restrict__ src, float *__restrict__ dst, long n) {
    const long step = (long)gridDim.x * blockDim.x;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += step) dst[i] = FACTOR * src[i];
}

static int init_ctx(msr_ctx *c, const st_tensor *params, int32_t n_params, cudaStream_t stream) {
    const st_tensor *W = find_param(params, n_params, "matmul.weight");
    const st_tensor *b = find_param(params, n_params, "matmul.bias");
    if (check_f32(W, "matmul.weight", 2, OUT, IN) || check_f32(b, "matmul.bias", 1, OUT)) return 1;
    CUDA_CHECK(cudaMalloc(&c->W, sizeof(float) * OUT * IN));
    CUDA_CHECK(cudaMalloc(&c->b, sizeof(float) * OUT));
    scale_copy<<<1024, 256, 0, stream>>>((const float *)W->data, c->W, (long)OUT * IN);
    CUDA_CHECK(cudaGetLastError());
    scale_copy<<<16, 256, 0, stream>>>((const float *)b->data, c->b, OUT);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream)); /* report a fault here, not in the first run */
    return lt_setup(&c->g, BATCH, OUT, IN, CUBLASLT_EPILOGUE_BIAS, c->b);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg;
    *out_ctx = NULL;
    msr_ctx *c = (msr_ctx *)calloc(1, sizeof(msr_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params, stream)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    msr_ctx *c = (msr_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 2, BATCH, IN) || check_f32(&out[0], "y0", 2, BATCH, OUT)) return 1;
    return lt_run(&c->g, c->W, (const float *)in[0].data, (float *)out[0].data, stream);
}
