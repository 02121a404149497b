/* Expert for t1/softmax: row-wise softmax of x[rows, cols] (f32) into y in one kernel that reads
 * x from DRAM once and writes y once, the least traffic the task allows. Short rows (<= 1024)
 * get one warp each and live in registers; longer rows get one block each, gather their max and
 * sum in a single sweep with the online recurrence (running max, sum rescaled when the max grows)
 * while parking the row in shared memory, then write y from there. Rows too long for shared
 * memory are swept again from L2. Loads and stores are float4 over the 16-byte-aligned middle of
 * each row, scalar over the ragged ends: with an odd cols, rows start at varying alignments. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define WARP_MAX_COLS 1024          /* up to here a warp holds the row in 32 registers a lane */
#define WARP_ROWS_PER_BLOCK 8
#define CACHE_MAX_BYTES (96 * 1024) /* beyond this a cached row would starve the SM of blocks */

typedef struct softmax_ctx {
    int rows, cols;
    int block_threads;
    size_t cache_bytes;  /* dynamic shared memory of the block kernel; 0: row not cached */
} softmax_ctx;

/* ------------------------------------------------------------------------------------------ */
/* online max/sum pairs: s is the sum of exp(v - m) over the values seen so far */

/* Folding in an all -inf part must leave (m, s) alone: -inf - -inf would be NaN. */
__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

__device__ __forceinline__ void online_add4(float &m, float &s, float4 v) {
    float mn = fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
    if (mn == -INFINITY) return;
    s = s * __expf(m - mn) + __expf(v.x - mn) + __expf(v.y - mn) + __expf(v.z - mn) +
        __expf(v.w - mn);
    m = mn;
}

__device__ __forceinline__ void warp_merge(float &m, float &s) {
    for (int offset = 16; offset > 0; offset /= 2) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        online_merge(m, s, m2, s2);
    }
}

/* Every warp reduces the per-warp partials itself, so all threads end with the row's (m, s)
 * after a single barrier. */
__device__ void block_merge(float &m, float &s) {
    __shared__ float warp_m[32], warp_s[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    warp_merge(m, s);
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    const bool have = lane < (int)(blockDim.x / 32);
    m = have ? warp_m[lane] : -INFINITY;
    s = have ? warp_s[lane] : 0.0f;
    warp_merge(m, s);
}

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* One warp per row, cols <= 32 * N: lane holds elements lane, lane + 32, ... in registers. */
template <int N>
__global__ void softmax_warp_kernel(const float *__restrict__ x, float *__restrict__ y,
                                    int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * WARP_ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;

    float v[N];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int j = lane + 32 * i;
        v[i] = j < cols ? xr[j] : -INFINITY;
        m = fmaxf(m, v[i]);
    }
    for (int offset = 16; offset > 0; offset /= 2)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));

    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < N; i++) {
        v[i] = __expf(v[i] - m);  /* padding: exp(-inf) = 0 */
        s += v[i];
    }
    for (int offset = 16; offset > 0; offset /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, offset);

    const float inv = 1.0f / s;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int j = lane + 32 * i;
        if (j < cols) yr[j] = v[i] * inv;
    }
}

/* One block per row. VEC: x and y agree modulo 16 bytes, so both split into the same scalar
 * head [0, head), float4 body [head, tail) and scalar tail [tail, cols); without VEC the whole
 * row is "tail". CACHE: the row is parked in dynamic shared memory, shifted so that its body is
 * 16-byte aligned there too; otherwise the write pass reads x again (from L2, mostly). */
template <bool VEC, bool CACHE>
__global__ void softmax_block_kernel(const float *__restrict__ x, float *__restrict__ y,
                                     int cols) {
    extern __shared__ float4 cache_raw[];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    const int t = threadIdx.x, nt = blockDim.x;

    int head = 0, n4 = 0;
    if (VEC) {
        head = (int)(((16 - ((uintptr_t)xr & 15)) & 15) / 4);
        head = min(head, cols);
        n4 = (cols - head) / 4;
    }
    const int tail = head + 4 * n4;
    const float4 *x4 = (const float4 *)(xr + head);
    float4 *y4 = (float4 *)(yr + head);
    float *cache = (float *)cache_raw + ((4 - head) & 3);
    float4 *cache4 = (float4 *)(cache + head);

    /* sweep 1: statistics, and the row into shared memory */
    float m = -INFINITY, s = 0.0f;
    if (t < head) {
        float v = xr[t];
        if (CACHE) cache[t] = v;
        online_merge(m, s, v, 1.0f);
    }
#pragma unroll 4
    for (int i = t; i < n4; i += nt) {
        float4 v = x4[i];
        if (CACHE) cache4[i] = v;
        online_add4(m, s, v);
    }
    for (int j = tail + t; j < cols; j += nt) {
        float v = xr[j];
        if (CACHE) cache[j] = v;
        online_merge(m, s, v, 1.0f);
    }
    block_merge(m, s);  /* its barrier also publishes the cache */

    /* sweep 2: y = exp(x - m) / s */
    const float inv = 1.0f / s;
    if (t < head) yr[t] = __expf((CACHE ? cache[t] : xr[t]) - m) * inv;
#pragma unroll 4
    for (int i = t; i < n4; i += nt) {
        float4 v = CACHE ? cache4[i] : x4[i];
        v.x = __expf(v.x - m) * inv;
        v.y = __expf(v.y - m) * inv;
        v.z = __expf(v.z - m) * inv;
        v.w = __expf(v.w - m) * inv;
        y4[i] = v;
    }
    for (int j = tail + t; j < cols; j += nt)
        yr[j] = __expf((CACHE ? cache[j] : xr[j]) - m) * inv;
}

/* ------------------------------------------------------------------------------------------ */
/* launch */

static cudaError_t launch_warp(const softmax_ctx *c, const float *x, float *y,
                               cudaStream_t stream) {
    const int grid = (c->rows + WARP_ROWS_PER_BLOCK - 1) / WARP_ROWS_PER_BLOCK;
    const int block = 32 * WARP_ROWS_PER_BLOCK;
    const int n = (c->cols + 31) / 32;
    if (n <= 1)       softmax_warp_kernel<1><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    else if (n <= 2)  softmax_warp_kernel<2><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    else if (n <= 4)  softmax_warp_kernel<4><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    else if (n <= 8)  softmax_warp_kernel<8><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    else if (n <= 16) softmax_warp_kernel<16><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    else              softmax_warp_kernel<32><<<grid, block, 0, stream>>>(x, y, c->rows, c->cols);
    return cudaGetLastError();
}

static cudaError_t launch_block(const softmax_ctx *c, const float *x, float *y, bool vec,
                               cudaStream_t stream) {
    const int grid = c->rows, block = c->block_threads;
    const size_t smem = c->cache_bytes;
    if (smem > 0) {
        if (vec) softmax_block_kernel<true, true><<<grid, block, smem, stream>>>(x, y, c->cols);
        else     softmax_block_kernel<false, true><<<grid, block, smem, stream>>>(x, y, c->cols);
    } else {
        if (vec) softmax_block_kernel<true, false><<<grid, block, 0, stream>>>(x, y, c->cols);
        else     softmax_block_kernel<false, false><<<grid, block, 0, stream>>>(x, y, c->cols);
    }
    return cudaGetLastError();
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
           t->data != NULL && ((uintptr_t)t->data & 3) == 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    /* the block kernel's grid holds one block per row along x */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX) return 1;

    softmax_ctx *c = (softmax_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    /* enough threads that each moves a few float4s per sweep, but no more */
    c->block_threads = cols <= 4096 ? 128 : cols <= 16384 ? 256 : cols <= 32768 ? 512 : 1024;
    /* 3 floats of slack for the shift that aligns the body in shared memory */
    const size_t cache_bytes = ((size_t)cols + 3) * sizeof(float);
    c->cache_bytes = cols > WARP_MAX_COLS && cache_bytes <= CACHE_MAX_BYTES ? cache_bytes : 0;
    if (c->cache_bytes > 0) {
        if (cudaFuncSetAttribute(softmax_block_kernel<true, true>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)c->cache_bytes) != cudaSuccess ||
            cudaFuncSetAttribute(softmax_block_kernel<false, true>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)c->cache_bytes) != cudaSuccess) {
            free(c);
            return 1;
        }
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

    cudaError_t err;
    if (c->cols <= WARP_MAX_COLS) {
        err = launch_warp(c, x, y, stream);
    } else {
        /* the pointers may move between calls, so the float4 split is decided per call */
        const bool vec = (((uintptr_t)x ^ (uintptr_t)y) & 15) == 0;
        err = launch_block(c, x, y, vec, stream);
    }
    return err == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
