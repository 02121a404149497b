/* Reference for t1/scan: inclusive prefix sum of x[n] (i32) by the textbook three-phase block
 * scan: each block of 1024 threads scans its tile of 1024 values in shared memory (Hillis-Steele,
 * double-buffered) and records the tile total; one block scans the tile totals, chunk by chunk
 * with a running carry; a third kernel adds to every tile the total of the tiles before it.
 * Obviously correct, and y is written twice and read once on top of the one read of x. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TILE 1024  /* values per tile = threads per block */

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "scan reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct scan_ctx {
    int64_t n, tiles;
    int *sums;  /* [tiles]: tile totals, then their inclusive scan */
} scan_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* Inclusive scan of v over the block; buf is [2][TILE] shared memory. */
__device__ int block_scan(int v, int (*buf)[TILE]) {
    const int t = threadIdx.x;
    int cur = 0;
    buf[0][t] = v;
    __syncthreads();
    for (int offset = 1; offset < TILE; offset *= 2) {
        int s = buf[cur][t];
        if (t >= offset) s += buf[cur][t - offset];
        buf[1 - cur][t] = s;
        cur = 1 - cur;
        __syncthreads();
    }
    return buf[cur][t];
}

__global__ void scan_tiles_kernel(const int *x, int *y, int *sums, int64_t n) {
    __shared__ int buf[2][TILE];
    const int64_t i = (int64_t)blockIdx.x * TILE + threadIdx.x;
    const int s = block_scan(i < n ? x[i] : 0, buf);
    if (i < n) y[i] = s;
    if (threadIdx.x == TILE - 1) sums[blockIdx.x] = s;
}

/* One block: the tile totals in chunks of TILE, each chunk offset by the total of those before. */
__global__ void scan_sums_kernel(int *sums, int64_t count) {
    __shared__ int buf[2][TILE];
    __shared__ int chunk_total;
    int carry = 0;  /* the same in every thread */
    for (int64_t base = 0; base < count; base += TILE) {
        const int64_t i = base + threadIdx.x;
        const int s = block_scan(i < count ? sums[i] : 0, buf);
        if (i < count) sums[i] = s + carry;
        if (threadIdx.x == TILE - 1) chunk_total = s;
        __syncthreads();
        carry += chunk_total;
        __syncthreads();  /* everyone has read chunk_total and buf before the next chunk */
    }
}

__global__ void add_offsets_kernel(int *y, const int *sums, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * TILE + threadIdx.x;
    if (blockIdx.x > 0 && i < n) y[i] += sums[blockIdx.x - 1];
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

static bool tensor_ok(const st_tensor *t, int64_t len) {
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
}

extern "C" void st_free(void *ctx) {
    scan_ctx *c = (scan_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->sums);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t n;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    /* one block per tile along the grid's x dimension */
    if (cfg_get(cfg, "n", &n) || n < 1 || (n + TILE - 1) / TILE > INT32_MAX) return 1;
    scan_ctx *c = (scan_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->tiles = (n + TILE - 1) / TILE;
    if (cudaMalloc(&c->sums, (size_t)c->tiles * sizeof(int)) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const scan_ctx *c = (const scan_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->n)) return 1;
    const int *x = (const int *)in[0].data;
    int *y = (int *)out[0].data;

    scan_tiles_kernel<<<(unsigned)c->tiles, TILE, 0, stream>>>(x, y, c->sums, c->n);
    CUDA_CHECK(cudaGetLastError());
    if (c->tiles > 1) {
        scan_sums_kernel<<<1, TILE, 0, stream>>>(c->sums, c->tiles);
        CUDA_CHECK(cudaGetLastError());
        add_offsets_kernel<<<(unsigned)c->tiles, TILE, 0, stream>>>(y, c->sums, c->n);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
