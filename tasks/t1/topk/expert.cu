/* Expert for t1/topk: the k largest elements of each row of x[rows, cols] (f32), largest first,
 * equal values by smaller column first, with one read of the row from DRAM. Ranks are 64-bit
 * keys: an order-preserving unsigned image of the float's bits above, the inverted column below,
 * so a larger key is an earlier place and no two elements tie.
 *
 * Per row, a block of 256 threads: each thread takes the maximum of its own elements; T, the k-th
 * largest of those 256 maxima, is found by one warp bit by bit over the bits where the maxima
 * differ (a warp-wide sum a step), and at least k elements of the row are >= T: the k maxima
 * themselves. On random rows about k + k/8 elements pass (74 for k = 64 out of 8192); each is
 * ranked by counting the candidates above it and written at its place. Up to 1024 candidates go
 * through a bitonic network instead; more (a row of many equal values), or k > 128, take the
 * general path: radix select of the k-th largest key by four 8-bit histogram passes over the row,
 * one ordered pass that keeps every element above it and the lowest-column ones equal to it, then
 * the network.
 *
 * Rows of up to 8192 columns, 16-byte aligned, with k <= 128 (the eval shape) go to persistent
 * blocks, four to an SM: a row comes into shared memory by one bulk copy on sm_90 and later
 * (1.05x cp.async on an H100 with the guessed threshold below), by cp.async before, each
 * thread takes its float4s into registers, and the buffer takes the block's next row while
 * this one is selected on. There the candidates are the elements at or above a threshold guessed
 * from the block's row before the previous one (2a - b from its k-th largest value a and
 * (k/2)-th b: about k + k/2 candidates on rows like it), so a row costs one barrier and no
 * threshold search; a row that the guess leaves with fewer than k (1.5 % of the eval's) takes T
 * as above (1.016x and 1.019x the three-barrier kernel on an H100). Other rows: a block per row,
 * cached in shared memory up to 16,384 columns, else read again from global memory (L2) in the
 * later passes. */
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
#define RANK_MAX (THREADS - 32)  /* candidates ranked by counting in a block-per-row kernel */
#define FAST_MAX_K (THREADS / 2) /* T from 256 maxima keeps ~k(1 + 1/8) candidates up to here */
#define CACHE_MAX_COLS 16384     /* 64 KiB row cache: 3 blocks per SM still fit */
#define PIPE_MAX_COLS 8192       /* a 32 KiB row buffer (NBUF of them), four blocks an SM */
#define PIPE_PER (PIPE_MAX_COLS / 4 / THREADS) /* float4s a thread holds */
#ifndef NBUF
#define NBUF 1 /* rows a block has in flight (2 and 3 were slower on the H200) */
#endif
#define PIPE_BLOCKS_PER_SM (NBUF == 1 ? 4 : NBUF == 2 ? 3 : 2)
#ifndef TOPK_TMA
#define TOPK_TMA 1 /* 0: cp.async on sm_90 too (tests/gpu/test_topk_cuda.sh runs both) */
#endif
#define FULL_MASK 0xffffffffu

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "topk expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef unsigned long long u64;

typedef struct topk_ctx {
    int rows, cols, k;
    bool cache;      /* the row fits the shared-memory cache */
    size_t smem;     /* dynamic shared memory: the cache */
    bool pipe;       /* k <= FAST_MAX_K and cols <= PIPE_MAX_COLS, cols % 4 == 0 */
    int pipe_grid;   /* persistent blocks: as many as fit on the device at once, at most rows */
    bool bulk;       /* the pipe's rows by one bulk copy (else cp.async): see ROW_BULK_OK */
} topk_ctx;

/* A block's shared state besides the row: the candidates and the selection's counters. */
struct __align__(16) topk_shared {
    u64 buf[CAP];
    unsigned hist[256];
    uint32_t maxk[THREADS];     /* the threads' maxima, for the threshold */
    uint32_t T;                 /* the threshold */
    int count;                  /* candidates of a row */
    int gt_count;
    int wcnt[WARPS];
    unsigned sel_digit, sel_above;
};

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

/* The candidates buf[0, c) in order, by `n` threads numbered `self` from 0: a key's place is
 * the number of keys above it (keys are distinct), so each thread counts for its own and writes
 * it there when it is among the first k. No barrier: a few hundred shared-memory broadcasts
 * against the network's 28 block-wide stages for 128 slots. With `part`, the values at places
 * k - 1 and k/2 - 1 also go to part[0] and part[1] (the persistent kernel's guess_of). */
__device__ __forceinline__ void rank_and_write(const u64 *buf, int c, int k, float *vrow,
                                               int *irow, int self, int n,
                                               float *part = nullptr) {
    const ulonglong2 *pairs = reinterpret_cast<const ulonglong2 *>(buf);
    for (int i = self; i < c; i += n) {
        const u64 key = buf[i];
        int above = 0;
        for (int j = 0; j < c / 2; j++) {
            const ulonglong2 p = pairs[j];
            above += (p.x > key) + (p.y > key);
        }
        if (c & 1) above += buf[c - 1] > key;
        if (above < k) {
            const float v = key_value((uint32_t)(key >> 32));
            vrow[above] = v;
            irow[above] = (int)(0xffffffffu - (uint32_t)key);
            if (part != nullptr && above == k - 1) part[0] = v;
            if (part != nullptr && above == k / 2 - 1) part[1] = v;
        }
    }
}

/* The candidates buf[0, c) written in order: ranked when few, else sorted. */
__device__ __forceinline__ void order_and_write(u64 *buf, int c, int k, float *vrow, int *irow) {
    if (c <= RANK_MAX)
        rank_and_write(buf, c, k, vrow, irow, threadIdx.x, THREADS);
    else
        sort_and_write(buf, c, k, vrow, irow);
}

/* T = the largest key with at least k (<= THREADS) of the block's THREADS keys maxk[] >= T:
 * the k-th largest, which is one of the keys. Called by one warp, each lane holding 8 keys, bit
 * by bit with a warp-wide sum a step; only the bits where the keys differ are searched: those
 * above the highest bit where the smallest and largest key differ are every key's, and those
 * below the lowest bit set in any key are 0 in all (15 steps at eval, where the maxima share
 * their sign and exponent and are whole numbers). */
__device__ uint32_t warp_kth_largest(const uint32_t *maxk, int k) {
    const int lane = threadIdx.x & 31;
    const uint4 a = reinterpret_cast<const uint4 *>(maxk)[2 * lane];
    const uint4 b = reinterpret_cast<const uint4 *>(maxk)[2 * lane + 1];
    const uint32_t key[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t lo = key[0], hi = key[0], any = 0u;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        lo = min(lo, key[i]);
        hi = max(hi, key[i]);
        any |= key[i];
    }
    lo = __reduce_min_sync(FULL_MASK, lo);
    hi = __reduce_max_sync(FULL_MASK, hi);
    any = __reduce_or_sync(FULL_MASK, any);
    if (lo == hi) return lo;
    const int top = 31 - __clz((int)(lo ^ hi)), low = __ffs((int)any) - 1;
    uint32_t T = lo & ~((2u << top) - 1u); /* the bits above `top` (none when top is 31) */
    for (int bit = top; bit >= low; bit--) {
        const uint32_t c = T | (1u << bit);
        unsigned n = 0u;
#pragma unroll
        for (int i = 0; i < 8; i++) n += key[i] >= c;
        if (__reduce_add_sync(FULL_MASK, n) >= (unsigned)k) T = c;
    }
    return T;
}

/* The k-th largest of the threads' keys mkey (warp_kth_largest), in every thread; two barriers,
 * the first of which publishes what the block wrote before. The other warps wait. `zero`, when
 * given, is set to 0 between the barriers: after every thread has read it, before any uses it. */
__device__ uint32_t kth_largest(uint32_t mkey, int k, topk_shared &sh, int *zero = nullptr) {
    sh.maxk[threadIdx.x] = mkey;
    __syncthreads();
    if (threadIdx.x < 32) {
        const uint32_t T = warp_kth_largest(sh.maxk, k);
        if (threadIdx.x == 0) {
            sh.T = T;
            if (zero != nullptr) *zero = 0;
        }
    }
    __syncthreads();
    return sh.T;
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

/* The general path over a row the whole block can read (the cache published, or global memory).
 * Radix select: the k-th largest value key K, 8 bits at a time from the top, and `remaining`,
 * how many elements equal to K belong to the answer; then one ordered pass: every element above
 * K (exactly n_gt of them) to buf[0, n_gt) in any order, the first `remaining` elements equal to
 * K by column to buf[n_gt, k), ranked by a block-wide count of the equal elements before them. */
template <bool VEC, bool CACHE>
__device__ void select_general(const float *xr, const float *cache, int cols, int k,
                               topk_shared &sh, float *vrow, int *irow) {
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    uint32_t prefix = 0u, mask = 0u;
    int remaining = k;
    if (t == 0) sh.gt_count = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = t; i < 256; i += THREADS) sh.hist[i] = 0u;
        __syncthreads();  /* also publishes the cache and gt_count on the first round */
        for_own_elements<VEC, CACHE>(xr, cache, cols, [&](float v, int) {
            const uint32_t key = value_key(v);
            if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
        });
        __syncthreads();
        if (t == 0) {
            /* the largest digit d with (count above d) < remaining <= (count at or above d) */
            unsigned above = 0u;
            int d = 255;
            for (; d > 0; d--) {
                if (above + sh.hist[d] >= (unsigned)remaining) break;
                above += sh.hist[d];
            }
            sh.sel_digit = (unsigned)d;
            sh.sel_above = above;
        }
        __syncthreads();
        prefix |= sh.sel_digit << shift;
        mask |= 255u << shift;
        remaining -= (int)sh.sel_above;
    }
    const uint32_t K = prefix;
    const int n_gt = k - remaining;

    int taken = 0;  /* equal elements seen in earlier chunks; the same in every thread */
    for (int base = 0; base < cols; base += THREADS) {
        const int j = base + t;
        const uint32_t key = j < cols ? value_key(CACHE ? cache[j] : xr[j]) : 0u;
        if (j < cols && key > K) sh.buf[atomicAdd(&sh.gt_count, 1)] = rank_key(key, j);
        const bool eq = j < cols && key == K;
        const unsigned ball = __ballot_sync(FULL_MASK, eq);
        if (lane == 0) sh.wcnt[warp] = __popc(ball);
        __syncthreads();
        int before = taken, total = 0;
        for (int w = 0; w < WARPS; w++) {
            if (w < warp) before += sh.wcnt[w];
            total += sh.wcnt[w];
        }
        const int rank = before + __popc(ball & ((1u << lane) - 1u));
        if (eq && rank < remaining) sh.buf[n_gt + rank] = rank_key(key, j);
        taken += total;
        __syncthreads();  /* wcnt is rewritten by the next chunk */
    }
    sort_and_write(sh.buf, k, k, vrow, irow);
}

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* A block per row. VEC: cols % 4 == 0 and x 16-byte aligned, so every row is. CACHE: the row
 * fits the dynamic shared memory. */
template <bool VEC, bool CACHE>
__global__ void __launch_bounds__(THREADS)
topk_kernel(const float *__restrict__ x, float *__restrict__ values, int *__restrict__ indices,
            int cols, int k) {
    extern __shared__ float4 cache4[];
    __shared__ topk_shared sh;

    const int t = threadIdx.x;
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *cache = reinterpret_cast<float *>(cache4);
    float *vrow = values + (size_t)blockIdx.x * k;
    int *irow = indices + (size_t)blockIdx.x * k;
    if (t == 0) sh.count = 0;

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
        /* its barriers publish the cache and the count */
        const uint32_t T = kth_largest(mkey, k, sh);
        /* as a float: v >= Tf exactly when value_key(v) >= T (T = 0: every element) */
        const float Tf = T == 0u ? -INFINITY : key_value(T);
        for_own_elements<VEC, CACHE>(xr, cache, cols, [&](float v, int j) {
            if (v >= Tf) {
                const int p = atomicAdd(&sh.count, 1);
                if (p < CAP) sh.buf[p] = rank_key(value_key(v), j);
            }
        });
        __syncthreads();
        const int c = sh.count;  /* the same in every thread */
        if (c <= CAP) {
            order_and_write(sh.buf, c, k, vrow, irow);
            return;
        }
        /* too many candidates (a row of many equal values): no one reads buf any more */
    }
    select_general<VEC, CACHE>(xr, cache, cols, k, sh, vrow, irow);
}

/* A row comes by one bulk copy (the TMA engine) that completes on an mbarrier, or by a group of
 * 16-byte cp.async a thread. The bulk copy needs sm_90, where st_init picks it (cp.async was
 * faster on an H100 before the guessed threshold, slower since: NOTES.md); the pipe kernel is
 * built for both (BULK) and takes cp.async where the bulk copy cannot be. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && TOPK_TMA
#define ROW_BULK_OK 1
#else
#define ROW_BULK_OK 0
#endif

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}

/* Starts the copy of a row into dst: the thread's own float4s as one group of copies (an empty
 * group past the last row, so that every iteration waits on the same count), or one bulk copy
 * by thread 0 that completes on *bar. */
template <bool BULK>
__device__ __forceinline__ void fetch_row(float4 *dst, const float4 *src, int n4, bool valid,
                                          uint64_t *bar) {
#if ROW_BULK_OK
    if (BULK) {
        if (valid && threadIdx.x == 0) {
            const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
            const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
            const unsigned bytes = (unsigned)n4 * 16u;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b),
                         "r"(bytes) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                         "[%0], [%1], %2, [%3];\n" ::"r"(d), "l"(src), "r"(bytes), "r"(b)
                         : "memory");
        }
        return;
    }
#endif
    (void)bar;
    if (valid) {
#pragma unroll
        for (int j = 0; j < PIPE_PER; j++) {
            const int q = threadIdx.x + j * THREADS;
            if (q < n4) cp_async16(dst + q, src + q);
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits for the copy of the row fetched into the buffer whose barrier is *bar; `phase` is the
 * parity of that buffer's use. With cp.async: all but the NBUF - 1 latest groups. */
template <bool BULK>
__device__ __forceinline__ void wait_row(uint64_t *bar, unsigned phase) {
#if ROW_BULK_OK
    if (BULK) {
        const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
        asm volatile("{\n"
                     ".reg .pred done;\n"
                     "WAIT_%=:\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                     "@!done bra WAIT_%=;\n"
                     "}\n" ::"r"(b), "r"(phase) : "memory");
        return;
    }
#endif
    (void)bar;
    (void)phase;
    asm volatile("cp.async.wait_group %0;\n" ::"n"(NBUF - 1) : "memory");
}

/* The row's candidates among a thread's float4s (those past the row's end not counted), as a bit
 * for each of the 4 * PIPE_PER elements. */
__device__ __forceinline__ unsigned candidate_mask(const float4 (&f)[PIPE_PER], int n4,
                                                   float Tf) {
    unsigned mask = 0u;
#pragma unroll
    for (int j = 0; j < PIPE_PER; j++) {
        const unsigned m4 = (unsigned)(f[j].x >= Tf) | (unsigned)(f[j].y >= Tf) << 1 |
                            (unsigned)(f[j].z >= Tf) << 2 | (unsigned)(f[j].w >= Tf) << 3;
        if ((int)threadIdx.x + j * THREADS < n4) mask |= m4 << (4 * j);
    }
    return mask;
}

/* A thread's candidates against Tf appended to buf at *count (those past CAP counted, not
 * written): about k + k/2 in the row, so a few threads of each warp. */
__device__ __forceinline__ void append_candidates(const float4 (&f)[PIPE_PER], int n4, float Tf,
                                                  u64 *buf, int *count) {
    const unsigned mask = candidate_mask(f, n4, Tf);
    if (!mask) return;
    int p = atomicAdd(count, __popc(mask));
#pragma unroll
    for (int j = 0; j < PIPE_PER; j++) {
        const unsigned m4 = (mask >> (4 * j)) & 15u;
        if (m4 == 0u) continue;
        const int col = 4 * ((int)threadIdx.x + j * THREADS);
        const float e[4] = {f[j].x, f[j].y, f[j].z, f[j].w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (m4 & (1u << i)) {
                if (p < CAP) buf[p] = rank_key(value_key(e[i]), col + i);
                p++;
            }
        }
    }
}

/* A threshold for a later row from this row's k-th largest value a and (k/2)-th b: as far below
 * a as b is above it, where about k/2 more elements than the k lie on rows like this one (so
 * about k + k/2 candidates). NaN (no guess: T is searched) when k < 2 or it overflows. */
__device__ __forceinline__ float guess_of(const float *part, int k) {
    const float g = 2.0f * part[0] - part[1];
    return k >= 2 && isfinite(g) ? g : __int_as_float(0x7fc00000);
}

/* Persistent blocks over rows r = blockIdx.x, + gridDim.x, ... (cols % 4 == 0, <= PIPE_MAX_COLS,
 * x 16-byte aligned, k <= FAST_MAX_K), NBUF rows fetched ahead into shared memory; a thread takes
 * its float4s of the row into registers, and once every thread has, the buffer takes the row
 * NBUF further on. The candidates are the elements >= a guess made from the block's row before
 * the previous one (guess_of): one barrier a row, after which the block ranks and writes them,
 * a thread a candidate, while the next row's candidates go to the other of two buffers. Where
 * the guess admits fewer than k (or more than CAP) elements, or there is none yet, the row takes
 * the exact threshold: T, the k-th largest of the threads' maxima, searched by warp 0 (three
 * barriers more). Over THREADS candidates the whole block sorts them; over CAP with T, the
 * general path reads the row again from global memory (L2). */
template <bool BULK_ASKED>
__global__ void __launch_bounds__(THREADS, PIPE_BLOCKS_PER_SM)
topk_pipe_kernel(const float *__restrict__ x, float *__restrict__ values,
                 int *__restrict__ indices, int rows, int cols, int k) {
    extern __shared__ float4 rowbuf[];  /* [NBUF][n4] */
    __shared__ topk_shared sh;
    __shared__ u64 buf2[CAP];           /* odd rows' candidates (even rows' in sh.buf) */
    __shared__ uint64_t bar[NBUF];
    __shared__ int cnt[3];              /* candidates of row use % 3: reset two rows ahead */
    __shared__ float part[2][2];        /* row use % 2's parts of the guess for row use + 2 */
    const int t = threadIdx.x, n4 = cols >> 2;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    constexpr bool BULK = BULK_ASKED && ROW_BULK_OK;
#if ROW_BULK_OK
    if (BULK && t == 0) {
        for (int i = 0; i < NBUF; i++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(
                             (unsigned)__cvta_generic_to_shared(&bar[i])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#endif
    if (t < 3) cnt[t] = 0;
    if (t < 4) part[t >> 1][t & 1] = __int_as_float(0x7fc00000);
    __syncthreads();
    for (int i = 0; i < NBUF; i++) {
        const int r = blockIdx.x + i * gridDim.x;
        fetch_row<BULK>(rowbuf + i * n4, x4 + (size_t)r * n4, n4, r < rows, &bar[i]);
    }
    unsigned use = 0; /* rows this block has taken; buffer b's use is use / NBUF */
    for (int row = blockIdx.x; row < rows; row += gridDim.x, use++) {
        const int b = (int)(use % NBUF);
        float4 *cur = rowbuf + b * n4;
        wait_row<BULK>(&bar[b], (use / NBUF) & 1u);
        float4 f[PIPE_PER];
#pragma unroll
        for (int j = 0; j < PIPE_PER; j++) {
            const int q = t + j * THREADS;
            f[j] = q < n4 ? cur[q] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        const int ahead = row + NBUF * gridDim.x;
        if (!BULK) fetch_row<BULK>(cur, x4 + (size_t)ahead * n4, n4, ahead < rows, &bar[b]);
        u64 *cb = (use & 1u) ? buf2 : sh.buf;
        int *count = &cnt[use % 3];
        float *pp = part[use & 1u]; /* read here before the barrier, rewritten after it */
        const float G = guess_of(pp, k);
        if (!isnan(G)) append_candidates(f, n4, G, cb, count);
        __syncthreads(); /* the candidates; every thread holds its float4s; the row before ranked */
        if (BULK && t == 0)
            fetch_row<BULK>(cur, x4 + (size_t)ahead * n4, n4, ahead < rows, &bar[b]);
        if (t == 0) cnt[(use + 2) % 3] = 0;
        int c = *count;
        if (isnan(G) || c < k || c > CAP) {
            float m = -INFINITY;
#pragma unroll
            for (int j = 0; j < PIPE_PER; j++)
                if (t + j * THREADS < n4)
                    m = fmaxf(m, fmaxf(fmaxf(f[j].x, f[j].y), fmaxf(f[j].z, f[j].w)));
            /* the row's count, read by every thread above, starts again for T's candidates */
            const uint32_t T = kth_largest(t < n4 ? value_key(m) : 0u, k, sh, count);
            append_candidates(f, n4, T == 0u ? -INFINITY : key_value(T), cb, count);
            __syncthreads(); /* the candidates */
            c = *count;
        }
        float *vrow = values + (size_t)row * k;
        int *irow = indices + (size_t)row * k;
        if (c <= THREADS) {
            rank_and_write(cb, c, k, vrow, irow, t, THREADS, pp);
        } else if (c <= CAP) {
            sort_and_write(cb, c, k, vrow, irow);
            if (t == 0) {
                pp[0] = key_value((uint32_t)(cb[k - 1] >> 32));
                pp[1] = key_value((uint32_t)(cb[k > 1 ? k / 2 - 1 : 0] >> 32));
            }
        } else {
            select_general<true, false>(x + (size_t)row * cols, nullptr, cols, k, sh, vrow,
                                        irow);
            if (t == 0) pp[0] = __int_as_float(0x7fc00000);
            __syncthreads(); /* sh.buf may be the next row's buffer */
        }
    }
    if (!BULK) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
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

/* The persistent kernel's copy path and grid: every block it can keep resident on the device, at
 * most one per row. The bulk copy on sm_90 and later (unless built with TOPK_TMA 0); the kernel
 * falls back to cp.async where it was not built for sm_90. */
static int pipe_setup(topk_ctx *c) {
    const size_t smem = NBUF * (size_t)c->cols * sizeof(float);
    int dev, sms, per_sm, major;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    c->bulk = major >= 9 && TOPK_TMA;
    void (*kernel)(const float *, float *, int *, int, int, int) =
        c->bulk ? topk_pipe_kernel<true> : topk_pipe_kernel<false>;
    /* with the static candidate buffers the block's total passes 48 KiB: always opted in */
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem));
    if (per_sm < 1) return 1;
    const long long fit = (long long)per_sm * sms;
    c->pipe_grid = fit < c->rows ? (int)fit : c->rows;
    return 0;
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
    c->pipe = k <= FAST_MAX_K && cols <= PIPE_MAX_COLS && cols % 4 == 0;
    if (c->pipe && pipe_setup(c) != 0) {
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
    if (c->pipe && vec) {
        const size_t smem = NBUF * (size_t)c->cols * sizeof(float);
        if (c->bulk)
            topk_pipe_kernel<true><<<c->pipe_grid, THREADS, smem, stream>>>(x, values, indices,
                                                                            c->rows, c->cols, c->k);
        else
            topk_pipe_kernel<false><<<c->pipe_grid, THREADS, smem, stream>>>(x, values, indices,
                                                                             c->rows, c->cols, c->k);
    } else if (c->cache) {
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
