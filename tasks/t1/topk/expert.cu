/* Expert for t1/topk: the k largest elements of each row of x[rows, cols] (f32), largest first,
 * equal values by smaller column first, with one read of the row from DRAM. A block per row.
 * Ranks are 64-bit keys: an order-preserving unsigned image of the float's bits above, the
 * inverted column below, so a larger key is an earlier place and no two elements tie.
 *
 * Fast path (k <= 128): the first sweep parks the row in shared memory (rows up to 16K columns)
 * and gives each of the 256 threads the maximum of its own elements. The k-th largest of those
 * 256 maxima, T, is found with 32 block-wide counts (a bitwise binary search), and at least k
 * elements of the row are >= T: the k maxima themselves. On random rows only about k + k/8
 * elements pass (74 for k = 64 out of 8192); they go to a shared buffer, are sorted by a bitonic
 * network, and the first k are written. Rows that put more than 1024 elements over T (many equal
 * values) and k > 128 take the general path instead: radix select of the k-th largest key by four
 * 8-bit histogram passes over the cached row, then one ordered pass that keeps every element
 * above it and the lowest-column ones equal to it, then the same sort. Rows too wide for the cache
 * are read again from global memory (L2) in the later passes. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256
#define WARPS (THREADS / 32)
#define CAP 1024                 /* candidate buffer: also the largest k */
#define FAST_MAX_K (THREADS / 2) /* T from 256 maxima keeps ~k(1 + 1/8) candidates up to here */
#define CACHE_MAX_COLS 16384     /* 64 KiB row cache: 3 blocks per SM still fit */
#define FULL_MASK 0xffffffffu

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "topk expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef unsigned long long u64;

typedef struct topk_ctx {
    int rows, cols, k;
    bool cache;      /* the row fits the shared-memory cache */
    size_t smem;     /* dynamic shared memory: the cache */
} topk_ctx;

/* ------------------------------------------------------------------------------------------ */
/* keys */

/* Order-preserving unsigned image of a finite float; -0.0 ranks as +0.0. Every key is > 0. */
__device__ __forceinline__ uint32_t value_key(float v) {
    uint32_t u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ u64 rank_key(uint32_t vk, int col) {
    return ((u64)vk << 32) | (0xffffffffu - (uint32_t)col);
}

/* ------------------------------------------------------------------------------------------ */
/* block-wide pieces (all threads of the block call them) */

/* Sorts buf[0, c) descending (padding to a power of two with 0, below every key) and writes the
 * first k keys of the row's order as values and columns. */
__device__ void sort_and_write(u64 *buf, int c, int k, float *vrow, int *irow) {
    const int t = threadIdx.x;
    int P = 1;
    while (P < c) P <<= 1;
    for (int i = c + t; i < P; i += THREADS) buf[i] = 0ull;
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = t; i < P / 2; i += THREADS) {
                const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                const bool desc = (lo & size) == 0;  /* the last merge (size == P) is all desc */
                const u64 a = buf[lo], b = buf[hi];
                if ((a < b) == desc) {
                    buf[lo] = b;
                    buf[hi] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int i = t; i < k; i += THREADS) {
        const u64 key = buf[i];
        vrow[i] = key_value((uint32_t)(key >> 32));
        irow[i] = (int)(0xffffffffu - (uint32_t)key);
    }
}

/* The element sweeps of the later passes, over the cache or the row in global memory. Thread t
 * visits the elements it loaded in the first sweep. */
template <bool VEC, bool CACHE, typename F>
__device__ __forceinline__ void for_own_elements(const float *xr, const float *cache, int cols,
                                                 F f) {
    const float *src = CACHE ? cache : xr;
    if (VEC) {
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        const int n4 = cols >> 2;
        for (int q = threadIdx.x; q < n4; q += THREADS) {
            const float4 v = s4[q];
            f(v.x, 4 * q);
            f(v.y, 4 * q + 1);
            f(v.z, 4 * q + 2);
            f(v.w, 4 * q + 3);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += THREADS) f(src[j], j);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* kernel */

/* VEC: cols % 4 == 0 and x 16-byte aligned, so every row is. CACHE: the row fits the dynamic
 * shared memory. */
template <bool VEC, bool CACHE>
__global__ void __launch_bounds__(THREADS)
topk_kernel(const float *__restrict__ x, float *__restrict__ values, int *__restrict__ indices,
            int cols, int k) {
    extern __shared__ float4 cache4[];
    __shared__ u64 buf[CAP];
    __shared__ unsigned hist[256];
    __shared__ int count, gt_count;
    __shared__ int wcnt[WARPS];
    __shared__ unsigned sel_digit, sel_above;

    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *cache = reinterpret_cast<float *>(cache4);
    float *vrow = values + (size_t)blockIdx.x * k;
    int *irow = indices + (size_t)blockIdx.x * k;
    if (t == 0) {
        count = 0;
        gt_count = 0;
    }

    /* sweep 1 (DRAM): the row into the cache, and this thread's maximum */
    float m = -INFINITY;
    bool any;
    if (VEC) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int q = t; q < n4; q += THREADS) {
            const float4 v = x4[q];
            if (CACHE) cache4[q] = v;
            m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        }
        any = t < n4;
    } else {
#pragma unroll 4
        for (int j = t; j < cols; j += THREADS) {
            const float v = xr[j];
            if (CACHE) cache[j] = v;
            m = fmaxf(m, v);
        }
        any = t < cols;
    }
    const uint32_t mkey = any ? value_key(m) : 0u;  /* 0: no element, below every key */

    if (k <= FAST_MAX_K) {
        /* T = the k-th largest of the 256 maxima, bit by bit: the largest T with at least k
         * maxima >= T. The counts are barriers too, so the cache and count are published. */
        uint32_t T = 0u;
        for (int b = 31; b >= 0; b--) {
            const uint32_t c = T | (1u << b);
            if (__syncthreads_count(mkey >= c) >= k) T = c;
        }
        /* as a float: v >= Tf exactly when value_key(v) >= T (T = 0: every element) */
        const float Tf = T == 0u ? -INFINITY : key_value(T);
        for_own_elements<VEC, CACHE>(xr, cache, cols, [&](float v, int j) {
            if (v >= Tf) {
                const int p = atomicAdd(&count, 1);
                if (p < CAP) buf[p] = rank_key(value_key(v), j);
            }
        });
        __syncthreads();
        const int c = count;  /* the same in every thread */
        if (c <= CAP) {
            sort_and_write(buf, c, k, vrow, irow);
            return;
        }
        /* too many candidates (a row of many equal values): no one reads buf any more */
    }

    /* General path. Radix select: the k-th largest value key K, 8 bits at a time from the top,
     * and `remaining`, how many elements equal to K belong to the answer. */
    uint32_t prefix = 0u, mask = 0u;
    int remaining = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = t; i < 256; i += THREADS) hist[i] = 0u;
        __syncthreads();  /* also publishes the cache on the first round */
        for_own_elements<VEC, CACHE>(xr, cache, cols, [&](float v, int) {
            const uint32_t key = value_key(v);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        });
        __syncthreads();
        if (t == 0) {
            /* the largest digit d with (count above d) < remaining <= (count at or above d) */
            unsigned above = 0u;
            int d = 255;
            for (; d > 0; d--) {
                if (above + hist[d] >= (unsigned)remaining) break;
                above += hist[d];
            }
            sel_digit = (unsigned)d;
            sel_above = above;
        }
        __syncthreads();
        prefix |= sel_digit << shift;
        mask |= 255u << shift;
        remaining -= (int)sel_above;
    }
    const uint32_t K = prefix;
    const int n_gt = k - remaining;

    /* One ordered pass: every element above K (exactly n_gt of them) to buf[0, n_gt) in any
     * order; the first `remaining` elements equal to K by column to buf[n_gt, k), ranked by a
     * block-wide count of the equal elements before them. */
    int taken = 0;  /* equal elements seen in earlier chunks; the same in every thread */
    for (int base = 0; base < cols; base += THREADS) {
        const int j = base + t;
        const uint32_t key = j < cols ? value_key(CACHE ? cache[j] : xr[j]) : 0u;
        if (j < cols && key > K) buf[atomicAdd(&gt_count, 1)] = rank_key(key, j);
        const bool eq = j < cols && key == K;
        const unsigned ball = __ballot_sync(FULL_MASK, eq);
        if (lane == 0) wcnt[warp] = __popc(ball);
        __syncthreads();
        int before = taken, total = 0;
        for (int w = 0; w < WARPS; w++) {
            if (w < warp) before += wcnt[w];
            total += wcnt[w];
        }
        const int rank = before + __popc(ball & ((1u << lane) - 1u));
        if (eq && rank < remaining) buf[n_gt + rank] = rank_key(key, j);
        taken += total;
        __syncthreads();  /* wcnt is rewritten by the next chunk */
    }
    sort_and_write(buf, k, k, vrow, irow);
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
           t->data != NULL && ((uintptr_t)t->data & 3) == 0;
}

template <bool VEC, bool CACHE>
static cudaError_t allow_smem(size_t smem) {
    return cudaFuncSetAttribute(topk_kernel<VEC, CACHE>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols, k;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols) || cfg_get(cfg, "k", &k))
        return 1;
    /* one block per row along the grid's x dimension; columns fit the key's low 32 bits */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX / 4 || k < 1 || k > cols ||
        k > CAP)
        return 1;
    topk_ctx *c = (topk_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    c->k = (int)k;
    c->cache = cols <= CACHE_MAX_COLS;
    c->smem = c->cache ? (size_t)cols * sizeof(float) : 0;
    if (c->smem > 48 * 1024 &&
        (allow_smem<true, true>(c->smem) != cudaSuccess ||
         allow_smem<false, true>(c->smem) != cudaSuccess)) {
        free(c);
        return 1;
    }
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
    const float *x = (const float *)in[0].data;
    float *values = (float *)out[0].data;
    int *indices = (int *)out[1].data;
    /* the pointer may move between calls, so the float4 path is decided per call */
    const bool vec = c->cols % 4 == 0 && ((uintptr_t)x & 15) == 0;
    const int grid = c->rows;
    if (c->cache) {
        if (vec)
            topk_kernel<true, true><<<grid, THREADS, c->smem, stream>>>(x, values, indices,
                                                                        c->cols, c->k);
        else
            topk_kernel<false, true><<<grid, THREADS, c->smem, stream>>>(x, values, indices,
                                                                         c->cols, c->k);
    } else {
        if (vec)
            topk_kernel<true, false><<<grid, THREADS, 0, stream>>>(x, values, indices, c->cols,
                                                                   c->k);
        else
            topk_kernel<false, false><<<grid, THREADS, 0, stream>>>(x, values, indices, c->cols,
                                                                    c->k);
    }
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
