/* Expert for t2/mlp_gelu: Y = GELU(X·W1 + b1)·W2 + b2 as two cuBLASLt matmuls whose epilogues do
 * the elementwise work: GEMM 1 adds b1 and applies GELU (tanh form) before its bf16 store, GEMM 2
 * adds b2. The [T, H] intermediate is written once and read once, and nothing else touches device
 * memory. Descriptors, layouts, the heuristic's algorithms and the workspace are all prepared in
 * st_init, so st_run is two cublasLtMatmul calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mlp_gelu expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mlp_gelu expert: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

/* 32 MiB is what NVIDIA recommends for Hopper; the heuristic may pick split-K or stream-K
 * algorithms that need it. */
#define WORKSPACE_BYTES ((size_t)32 << 20)
/* X and Y arrive fresh on every call, so the algorithms are chosen for 16-byte alignment (what
 * Hopper's TMA needs) rather than the heuristic's default of 256; st_run checks it. */
#define MIN_ALIGN 16u

/* One planned matmul. In column-major terms it is D[m, n] = A[m, k] · B[k, n] + bias[m], with
 * the epilogue applied; see plan_gemm for how the row-major tensors map onto it. */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
} lt_gemm;

typedef struct {
    int64_t T, D, H;
    const __nv_bfloat16 *W1, *W2; /* owned by the harness, live until st_free */
    __nv_bfloat16 *hid;           /* [T, H], GELU already applied */
    void *workspace;
    cublasLtHandle_t lt;
    lt_gemm g1, g2;
} mlp_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mlp_gelu expert: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL &&
             (uintptr_t)t->data % MIN_ALIGN == 0;
    if (!ok && ndim == 1)
        fprintf(stderr, "mlp_gelu expert: %s: expected %u-byte aligned bf16 of shape [%lld]\n",
                what, MIN_ALIGN, (long long)d0);
    else if (!ok)
        fprintf(stderr, "mlp_gelu expert: %s: expected %u-byte aligned bf16 of shape [%lld, %lld]\n",
                what, MIN_ALIGN, (long long)d0, (long long)d1);
    return !ok;
}

/* Row-major Out[M, N] = In[M, K] · W[K, N] + bias[N], seen column-major, is
 * Out^T[N, M] = W^T[N, K] · In^T[K, M] + bias: the row-major buffers of W, In and Out already are
 * W^T, In^T and Out^T in column-major form (leading dimensions N, K and N), so no operand is
 * transposed. The output's column-major rows are our features N, which is the dimension the
 * epilogue broadcasts its bias vector along ("bias length = rows of D"): bias[N] lands on the
 * right axis. Putting In first instead would compute Out^T with the bias along tokens. */
static int plan_gemm(cublasLtHandle_t lt, lt_gemm *g, int64_t M, int64_t N, int64_t K,
                     cublasLtEpilogue_t epilogue, const void *bias) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                &epilogue, sizeof(epilogue)));
    /* bias type defaults to D's type (bf16), which is what b1 and b2 are */
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &bias, sizeof(bias)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, (uint64_t)N, (uint64_t)K, N));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->d, CUDA_R_16BF, (uint64_t)N, (uint64_t)M, N));

    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    uint32_t align = MIN_ALIGN;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref,
        CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const cublasLtMatmulPreferenceAttributes_t align_attrs[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &align, sizeof(align));
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->d, g->d, pref, 1, &res, &n_res);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (n_res < 1) {
        fprintf(stderr, "mlp_gelu expert: no cuBLASLt algorithm for M=%lld N=%lld K=%lld epilogue %d\n",
                (long long)M, (long long)N, (long long)K, (int)epilogue);
        return 1;
    }
    g->algo = res.algo;
    return 0;
}

static void gemm_free(lt_gemm *g) {
    if (g->a) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b) cublasLtMatrixLayoutDestroy(g->b);
    if (g->d) cublasLtMatrixLayoutDestroy(g->d);
    if (g->desc) cublasLtMatmulDescDestroy(g->desc);
}

/* out = epilogue(W-first matmul) as planned; beta is 0, so C aliases D and is never read. */
static int gemm_run(const mlp_ctx *ctx, const lt_gemm *g, const void *W, const void *in, void *out,
                    cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(ctx->lt, g->desc, &one, W, g->a, in, g->b, &zero, out, g->d, out, g->d,
                                &g->algo, ctx->workspace, WORKSPACE_BYTES, stream));
    return 0;
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    mlp_ctx *ctx = (mlp_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing destroy here would only hide the real error. */
    gemm_free(&ctx->g1);
    gemm_free(&ctx->g2);
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    cudaFree(ctx->hid);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(mlp_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "D", &ctx->D) || cfg_get(cfg, "H", &ctx->H))
        return 1;
    if (ctx->T <= 0 || ctx->D <= 0 || ctx->H <= 0) {
        fprintf(stderr, "mlp_gelu expert: sizes must be positive\n");
        return 1;
    }
    if (n_params != 4) {
        fprintf(stderr, "mlp_gelu expert: expected 4 params, got %d\n", n_params);
        return 1;
    }
    if (check_tensor(&params[0], "W1", 2, ctx->D, ctx->H) || check_tensor(&params[1], "b1", 1, ctx->H, 0) ||
        check_tensor(&params[2], "W2", 2, ctx->H, ctx->D) || check_tensor(&params[3], "b2", 1, ctx->D, 0))
        return 1;
    ctx->W1 = (const __nv_bfloat16 *)params[0].data;
    ctx->W2 = (const __nv_bfloat16 *)params[2].data;

    CUDA_CHECK(cudaMalloc(&ctx->hid, (size_t)(ctx->T * ctx->H) * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    /* the bias pointers go into the descriptors now: the heuristic reads their alignment */
    if (plan_gemm(ctx->lt, &ctx->g1, ctx->T, ctx->H, ctx->D, CUBLASLT_EPILOGUE_GELU_BIAS,
                  params[1].data))
        return 1;
    if (plan_gemm(ctx->lt, &ctx->g2, ctx->T, ctx->D, ctx->H, CUBLASLT_EPILOGUE_BIAS,
                  params[3].data))
        return 1;
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
        fprintf(stderr, "mlp_gelu expert: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "X", 2, ctx->T, ctx->D) || check_tensor(&out[0], "Y", 2, ctx->T, ctx->D))
        return 1;
    if (gemm_run(ctx, &ctx->g1, ctx->W1, in[0].data, ctx->hid, stream)) return 1;
    if (gemm_run(ctx, &ctx->g2, ctx->W2, ctx->hid, out[0].data, stream)) return 1;
    return 0;
}
