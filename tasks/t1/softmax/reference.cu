/* Reference for t1/softmax: row-wise softmax of x[rows, cols] (f32) into y, as an eager
 * framework runs it: one kernel for the row max, one for exp(x - max) and the row sum, one to
 * divide. Each kernel gives a row to one block and reduces through shared memory. Plain and
 * obviously correct rather than fast: x is read twice and y written twice and read once. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 256

typedef struct softmax_ctx {
    int rows, cols;
    float *row_max;  /* [rows] */
    float *row_sum;  /* [rows] */
} softmax_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernels */

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
    return buf[0];
}

__global__ void row_max_kernel(const float *x, float *row_max, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
    m = block_reduce(m, true);
    if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void exp_sum_kernel(const float *x, float *y, const float *row_max, float *row_sum,
                               int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    const float m = row_max[blockIdx.x];
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) {
        float e = expf(xr[j] - m);
        yr[j] = e;
        s += e;
    }
    s = block_reduce(s, false);
    if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

__global__ void divide_kernel(float *y, const float *row_sum, int cols) {
    float *yr = y + (size_t)blockIdx.x * cols;
    const float s = row_sum[blockIdx.x];
    for (int j = threadIdx.x; j < cols; j += BLOCK) yr[j] = yr[j] / s;
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

static bool tensor_ok(const st_tensor *t, int rows, int cols) {
    return t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
}

extern "C" void st_free(void *ctx) {
    softmax_ctx *c = (softmax_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->row_max);
    cudaFree(c->row_sum);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    /* the grid's x dimension holds one block per row */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX) return 1;

    softmax_ctx *c = (softmax_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    if (cudaMalloc(&c->row_max, rows * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&c->row_sum, rows * sizeof(float)) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const softmax_ctx *c = (const softmax_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->rows, c->cols) || !tensor_ok(&out[0], c->rows, c->cols)) return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;

    row_max_kernel<<<c->rows, BLOCK, 0, stream>>>(x, c->row_max, c->cols);
    if (cudaGetLastError() != cudaSuccess) return 1;
    exp_sum_kernel<<<c->rows, BLOCK, 0, stream>>>(x, y, c->row_max, c->row_sum, c->cols);
    if (cudaGetLastError() != cudaSuccess) return 1;
    divide_kernel<<<c->rows, BLOCK, 0, stream>>>(y, c->row_sum, c->cols);
    if (cudaGetLastError() != cudaSuccess) return 1;
    return 0;
}
