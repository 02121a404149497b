/* Reference for t1/layernorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the rows of
 * x[rows, cols] (f32), as an eager framework runs it: one kernel for the row means, one for the
 * row variances (sum of squared deviations from the mean, so no cancellation), one elementwise
 * kernel that normalises and applies gamma and beta. Each reduction gives a row to one block and
 * sums through shared memory. Plain and obviously correct: x is read three times. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 256
#define EPS 1e-5f

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "layernorm reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct ln_ctx {
    int rows, cols;
    const float *gamma, *beta;  /* the harness's, live until st_free */
    float *mean;                /* [rows] */
    float *var;                 /* [rows] */
} ln_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernels */

__device__ float block_sum(float v) {
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    return buf[0];
}

__global__ void row_mean_kernel(const float *x, float *mean, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) s += xr[j];
    s = block_sum(s);
    if (threadIdx.x == 0) mean[blockIdx.x] = s / cols;
}

__global__ void row_var_kernel(const float *x, const float *mean, float *var, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    const float m = mean[blockIdx.x];
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float d = xr[j] - m;
        s += d * d;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) var[blockIdx.x] = s / cols;
}

__global__ void normalize_kernel(const float *x, const float *mean, const float *var,
                                 const float *gamma, const float *beta, float *y, int64_t n,
                                 int cols) {
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const int64_t r = i / cols;
        const int c = (int)(i % cols);
        y[i] = (x[i] - mean[r]) / sqrtf(var[r] + EPS) * gamma[c] + beta[c];
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static bool tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
}

extern "C" void st_free(void *ctx) {
    ln_ctx *c = (ln_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->mean);
    cudaFree(c->var);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 2) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    /* one block per row along the grid's x dimension */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX) return 1;
    if (!tensor_ok(&params[0], 1, cols, 0) || !tensor_ok(&params[1], 1, cols, 0)) return 1;

    ln_ctx *c = (ln_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    c->gamma = (const float *)params[0].data;
    c->beta = (const float *)params[1].data;
    if (cudaMalloc(&c->mean, rows * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&c->var, rows * sizeof(float)) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const ln_ctx *c = (const ln_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], 2, c->rows, c->cols) || !tensor_ok(&out[0], 2, c->rows, c->cols))
        return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;
    const int64_t n = (int64_t)c->rows * c->cols;
    const int64_t want = (n + BLOCK - 1) / BLOCK;
    const int grid = want < 65535 * 16 ? (int)want : 65535 * 16;

    row_mean_kernel<<<c->rows, BLOCK, 0, stream>>>(x, c->mean, c->cols);
    CUDA_CHECK(cudaGetLastError());
    row_var_kernel<<<c->rows, BLOCK, 0, stream>>>(x, c->mean, c->var, c->cols);
    CUDA_CHECK(cudaGetLastError());
    normalize_kernel<<<grid, BLOCK, 0, stream>>>(x, c->mean, c->var, c->gamma, c->beta, y, n,
                                                 c->cols);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
