/* KernelBench level2/33_Gemm_Scale_BatchNorm: y = BatchNorm1d((x·Wᵀ + b)·scale) for x [1024, 8192]
 * and nn.Linear(8192, 8192), fp32. The model is in train mode, as KernelBench builds it, so the
 * BatchNorm normalises with the batch's own per-feature mean and biased variance (eps 1e-5) and
 * then applies its weight and bias; the running statistics it updates never reach the output.
 * Eager PyTorch runs the addmm, the scale multiply, BatchNorm's statistics pass and its
 * normalising pass. Here cuBLAS computes x·Wᵀ (true fp32, default math mode, no TF32), and one
 * kernel does the rest: a block of 32 x 32 threads owns 32 features, each thread holds 32 rows
 * of them in registers, adds the bias and scales, and the block reduces the column mean, then the
 * centred sum of squares (two passes over registers, no cancellation), then writes
 * (v − mean)·rstd·weight + bias in PyTorch's order. The GEMM result is read once, y written
 * once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define TAG "kernelbench level2/33"
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

enum { BATCH = 1024, IN = 8192, OUT = 8192, COLS = 32, ROW_THREADS = 32,
       ROWS_PER_THREAD = BATCH / ROW_THREADS };
#define BN_EPS 1e-5f

typedef struct {
    cublasHandle_t h;
    const float *W, *b, *scale, *gamma, *beta;
    float *z; /* x·Wᵀ, [BATCH, OUT] */
} gsb_ctx;

/* Sum over the block's 32 row-threads of each column; every thread gets its column's total. */
__device__ float column_sum(float v, float (*red)[COLS + 1]) {
    red[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y == 0) {
        float s = 0.0f;
        for (int r = 0; r < ROW_THREADS; r++) s += red[r][threadIdx.x];
        red[ROW_THREADS][threadIdx.x] = s;
    }
    __syncthreads();
    const float total = red[ROW_THREADS][threadIdx.x];
    __syncthreads(); /* red is reused by the next call */
    return total;
}

__global__ void __launch_bounds__(COLS * ROW_THREADS)
scale_batchnorm(const float *__restrict__ z, const float *__restrict__ b,
                const float *__restrict__ scale, const float *__restrict__ gamma,
                const float *__restrict__ beta, float *__restrict__ y) {
    __shared__ float red[ROW_THREADS + 1][COLS + 1];
    const int col = blockIdx.x * COLS + threadIdx.x; /* a warp reads 32 adjacent features */
    const float bc = b[col], sc = scale[col];
    float v[ROWS_PER_THREAD];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; i++) {
        const int row = i * ROW_THREADS + threadIdx.y;
        v[i] = (z[(long)row * OUT + col] + bc) * sc; /* the addmm's bias, then x * self.scale */
        s += v[i];
    }
    const float mean = column_sum(s, red) * (1.0f / BATCH);
    float m2 = 0.0f;
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; i++) m2 += (v[i] - mean) * (v[i] - mean);
    const float var = column_sum(m2, red) * (1.0f / BATCH);
    const float rstd = 1.0f / sqrtf(var + BN_EPS);
    const float g = gamma[col], h = beta[col];
#pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; i++) {
        const int row = i * ROW_THREADS + threadIdx.y;
        __stcs(&y[(long)row * OUT + col], (v[i] - mean) * rstd * g + h);
    }
}

extern "C" void st_free(void *p) {
    gsb_ctx *c = (gsb_ctx *)p;
    if (!c) return;
    if (c->h) cublasDestroy(c->h); /* st_free cannot report a failure */
    cudaFree(c->z);
    free(c);
}

static const st_tensor *find_param(const st_tensor *p, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (p[i].name && strcmp(p[i].name, name) == 0) return &p[i];
    fprintf(stderr, TAG ": param '%s' missing\n", name);
    return NULL;
}

static int init_ctx(gsb_ctx *c, const st_tensor *params, int32_t n_params) {
    const st_tensor *W = find_param(params, n_params, "gemm.weight");
    const st_tensor *b = find_param(params, n_params, "gemm.bias");
    const st_tensor *s = find_param(params, n_params, "scale");
    const st_tensor *g = find_param(params, n_params, "bn.weight");
    const st_tensor *h = find_param(params, n_params, "bn.bias");
    if (check_f32(W, "gemm.weight", 2, OUT, IN) || check_f32(b, "gemm.bias", 1, OUT) ||
        check_f32(s, "scale", 1, OUT) || check_f32(g, "bn.weight", 1, OUT) ||
        check_f32(h, "bn.bias", 1, OUT))
        return 1;
    c->W = (const float *)W->data;
    c->b = (const float *)b->data;
    c->scale = (const float *)s->data;
    c->gamma = (const float *)g->data;
    c->beta = (const float *)h->data;
    CUDA_CHECK(cudaMalloc(&c->z, sizeof(float) * BATCH * OUT));
    /* default math mode: true fp32, never TF32 */
    BLAS_CHECK(cublasCreate(&c->h));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg; (void)stream;
    *out_ctx = NULL;
    gsb_ctx *c = (gsb_ctx *)calloc(1, sizeof(gsb_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    gsb_ctx *c = (gsb_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 2, BATCH, IN) || check_f32(&out[0], "y0", 2, BATCH, OUT)) return 1;
    const float one = 1.0f, zero = 0.0f;
    BLAS_CHECK(cublasSetStream(c->h, stream));
    /* row-major z = x·Wᵀ is column-major zᵀ [OUT, BATCH] = W(col-major [IN, OUT])ᵀ · xᵀ */
    BLAS_CHECK(cublasSgemm(c->h, CUBLAS_OP_T, CUBLAS_OP_N, OUT, BATCH, IN, &one, c->W, IN,
                           (const float *)in[0].data, IN, &zero, c->z, OUT));
    scale_batchnorm<<<OUT / COLS, dim3(COLS, ROW_THREADS), 0, stream>>>(
        c->z, c->b, c->scale, c->gamma, c->beta, (float *)out[0].data);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
