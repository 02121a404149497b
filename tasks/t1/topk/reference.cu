/* Reference for t1/topk: the k largest elements of each row of x[rows, cols] (f32), largest first,
 * equal values by smaller column first. Nothing clever: a block per row picks the next element k
 * times, each time the largest (value, column) pair that ranks below the one picked before, found
 * by a scan of the row and a shared-memory max tree. The rank is one 64-bit key per element: an
 * order-preserving unsigned image of the float's bits above, the inverted column below, so that
 * "larger key" is exactly "earlier in the required order" and no two elements share a key. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 256
#define K_MAX 1024

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "topk reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct topk_ctx {
    int rows, cols, k;
} topk_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

/* Negative floats order backwards as unsigned bits: flip them all; positive ones get the sign bit
 * set so they rank above every negative. -0.0 first becomes +0.0. Every key of a finite value
 * is > 0. */
__device__ unsigned long long rank_key(float v, int col) {
    uint32_t u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (0xffffffffu - (uint32_t)col);
}

__global__ void topk_select_kernel(const float *x, float *values, int *indices, int cols, int k) {
    __shared__ unsigned long long best[BLOCK];
    const float *xr = x + (size_t)blockIdx.x * cols;
    unsigned long long prev = ~0ull;  /* above every key */
    for (int i = 0; i < k; i++) {
        unsigned long long b = 0ull;   /* below every key */
        for (int j = threadIdx.x; j < cols; j += BLOCK) {
            const unsigned long long key = rank_key(xr[j], j);
            if (key < prev && key > b) b = key;
        }
        best[threadIdx.x] = b;
        __syncthreads();
        for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
            if (threadIdx.x < stride && best[threadIdx.x + stride] > best[threadIdx.x])
                best[threadIdx.x] = best[threadIdx.x + stride];
            __syncthreads();
        }
        prev = best[0];
        __syncthreads();  /* everyone has read best[0] before the next round writes */
        if (threadIdx.x == 0) {
            const int col = (int)(0xffffffffu - (uint32_t)prev);
            values[(size_t)blockIdx.x * k + i] = xr[col];
            indices[(size_t)blockIdx.x * k + i] = col;
        }
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

static bool tensor_ok(const st_tensor *t, st_dtype dtype, int64_t d0, int64_t d1) {
    return t->dtype == dtype && t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols, k;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols) || cfg_get(cfg, "k", &k))
        return 1;
    /* one block per row along the grid's x dimension */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX || k < 1 || k > cols ||
        k > K_MAX)
        return 1;
    topk_ctx *c = (topk_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    c->k = (int)k;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const topk_ctx *c = (const topk_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 2) return 1;
    if (!tensor_ok(&in[0], ST_F32, c->rows, c->cols) ||
        !tensor_ok(&out[0], ST_F32, c->rows, c->k) || !tensor_ok(&out[1], ST_I32, c->rows, c->k))
        return 1;
    topk_select_kernel<<<c->rows, BLOCK, 0, stream>>>((const float *)in[0].data,
                                                      (float *)out[0].data, (int *)out[1].data,
                                                      c->cols, c->k);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
