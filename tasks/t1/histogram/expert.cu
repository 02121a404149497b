/* Expert for t1/histogram: counts[b] = #{i : x[i] == b} over x[n] (i32), values
 * outside [0, bins) ignored, in one pass over x and, for bins <= 512 (the eval case), in ONE kernel
 * launch with no memset.
 *
 * Small bins (<= LANE_MAX_BINS): lane-private counters. Each block of 1024 threads keeps 32 copies
 * of the histogram in shared memory, interleaved so that counter (b, lane) sits at word
 * b * 32 + lane, i.e. always in bank `lane`. A warp's 32 shared atomics therefore hit 32
 * different banks whatever the data (no bank conflicts and no equal addresses inside one
 * instruction: one shared-memory wavefront per ATOMS), where per-warp copies indexed by value
 * average about 3 to 4 wavefronts per ATOMS on the skewed eval data (random banks, hot bins).
 * Lanes with the same index in different warps share a counter, so consecutive instructions may
 * update the same word; each instruction still takes one pass over the banks. 32 KiB per block
 * at 256 bins, two blocks (64 warps, 32 registers a thread) per SM.
 *   Loads: persistent grid, four int4 loads per thread in flight per step (as the reduction
 * expert, which streams 2^26 values at 81 % of copy bandwidth); the first step is issued before
 * the shared-memory histogram is cleared, and the up-to-three leftover int4 of a thread are
 * loaded together rather than one after another.
 *   No memset: the output is cleared inside the kernel. Each block's warp 0 draws a ticket from a
 * 64-bit counter that only grows (by exactly gridDim.x per call, the calls being stream-ordered);
 * the block that draws ticket 0 mod grid zeroes `counts`, fences and raises a 64-bit flag
 * (atomicMax, so it only grows) to the call's epoch, ticket / grid + 1. Every block checks the
 * flag (an acquire: volatile read, then a fence, then the block barrier) before it adds its
 * counts to the output, one global atomic per non-empty bin. The zeroing block is running when
 * it draws its ticket and waits for nothing before publishing, so the wait cannot deadlock
 * whatever the block scheduling; the flag is in practice up ~70 us before anyone looks at it.
 * State lives in the context (like the reduction expert's ticket): one context must not run on
 * two streams at once.
 *
 * Larger bins keep the structure of the shipped expert (cudaMemsetAsync, then one kernel): one
 * copy per warp (bins <= 2048), one copy per block (bins <= 24576), else global atomics.
 * Integer counts: any order of atomics is exact and deterministic. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define FULL_MASK 0xffffffffu

/* lane-private path */
#define LANE_THREADS 1024
#define LANE_MAX_BINS 512             /* 32 copies * 512 * 4 B = 64 KiB per block, 2 blocks/SM */
/* Sets of 32 lane copies per block, warp w using set w % LANE_COPIES: 1 by default. 2 halves how
 * often two warps update the same word (64 KiB per block at 256 bins, still two blocks per SM;
 * bins 257..512 then fit one block per SM). A knob for measurement: -DLANE_COPIES=2. */
#ifndef LANE_COPIES
#define LANE_COPIES 1
#endif

/* shipped-expert paths */
#define THREADS 256
#define WARPS (THREADS / 32)
#define WARP_COPIES_MAX_BINS 2048     /* 8 copies of 2048 counters: 64 KiB of shared memory */
#define BLOCK_COPY_MAX_BINS 24576     /* 96 KiB: still two blocks per SM */

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "histogram expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

enum { MODE_LANE, MODE_WARP, MODE_BLOCK, MODE_GLOBAL };

/* device-side state of the lane path, zeroed once in st_init */
typedef struct hist_sync {
    unsigned long long ticket;  /* blocks started, over all calls: gridDim.x per call */
    unsigned long long flag;    /* highest epoch whose output has been zeroed (only grows) */
} hist_sync;

typedef struct hist_ctx {
    int64_t n;
    int bins;
    int mode;
    int grid;
    size_t smem;  /* dynamic shared memory of the kernel */
    int lane_max; /* lane path: which instantiation (256 or LANE_MAX_BINS) */
    hist_sync *sync;
} hist_ctx;

/* ------------------------------------------------------------------------------------------ */
/* lane-private kernel (bins <= LANE_MAX_BINS) */

/* hl = histogram + lane: counter (v, lane) is hl[v * 32]. One unsigned compare covers both ends
 * of the range, negatives and the int32 extremes included. */
__device__ __forceinline__ void lane_tally(int *hl, unsigned bins, int v) {
    if ((unsigned)v < bins) atomicAdd(hl + ((unsigned)v << 5), 1);
}

__device__ __forceinline__ void lane_tally4(int *hl, unsigned bins, int4 v) {
    lane_tally(hl, bins, v.x);
    lane_tally(hl, bins, v.y);
    lane_tally(hl, bins, v.z);
    lane_tally(hl, bins, v.w);
}

/* MAXB (256 or 512) only makes two functions, so that each keeps one fixed shared-memory carveout
 * whatever the bins of the contexts that share it; the code does not depend on it. */
template <int MAXB>
__global__ void __launch_bounds__(LANE_THREADS, 2)
hist_lane_kernel(const int *__restrict__ x, int64_t n, int bins, int *__restrict__ counts,
                 hist_sync *__restrict__ sync, int head, int64_t n4, int per_thread, int extra) {
    extern __shared__ int4 sh4[];        /* [LANE_COPIES][bins][32] counters */
    __shared__ unsigned long long s_epoch;
    int *sh = reinterpret_cast<int *>(sh4);
    const unsigned ubins = (unsigned)bins;
    const int lane = threadIdx.x & 31;
    const int tid = blockIdx.x * LANE_THREADS + threadIdx.x;
    const int nthreads = gridDim.x * LANE_THREADS;

    /* x = a scalar head up to the first 16-byte boundary (head <= 3 values), an int4 body of n4
     * vectors and a scalar tail (< 4 values). Body vector tid + i * nthreads belongs to this
     * thread for i < m, m = per_thread + (tid < extra), where n4 = per_thread * nthreads + extra:
     * exactly the vectors of the grid-stride loop, counted up front (st_run) so that the loop
     * runs on a 32-bit counter and one pointer. */
    const int4 *p = reinterpret_cast<const int4 *>(x + head) + tid;
    const int m = per_thread + (tid < extra ? 1 : 0);
    int steps = m >> 2;

    /* the first step's loads go out before the setup below, which then hides under them */
    int4 a = make_int4(0, 0, 0, 0), b = a, c = a, d = a;
    if (steps > 0) {
        a = p[0];
        b = p[nthreads];
        c = p[2 * nthreads];
        d = p[3 * nthreads];
    }

    if (threadIdx.x < 32) {
        /* ticket: calls are stream-ordered and each adds exactly gridDim.x, so ticket / grid
         * numbers the call and ticket % grid == 0 picks one block of it to clear the output */
        unsigned long long t = 0;
        if (lane == 0) t = atomicAdd(&sync->ticket, 1ull);
        t = __shfl_sync(FULL_MASK, t, 0);
        const unsigned long long g = gridDim.x;
        const unsigned long long epoch = t / g + 1;
        if (t % g == 0) {
            for (int i = lane; i < bins; i += 32) counts[i] = 0;
            __threadfence();   /* every lane's zeros are visible device-wide ... */
            __syncwarp();
            if (lane == 0) {
                __threadfence();
                atomicMax(&sync->flag, epoch);  /* ... before the flag says so */
            }
        }
        if (lane == 0) s_epoch = epoch;
    }
    for (int i = threadIdx.x; i < LANE_COPIES * bins * 8; i += LANE_THREADS)
        sh4[i] = make_int4(0, 0, 0, 0);
    __syncthreads();

    int *hl = sh + (LANE_COPIES > 1 ? (threadIdx.x >> 5) % LANE_COPIES * bins * 32 : 0) + lane;
    while (steps > 0) {
        lane_tally4(hl, ubins, a);
        lane_tally4(hl, ubins, b);
        lane_tally4(hl, ubins, c);
        lane_tally4(hl, ubins, d);
        p += 4 * nthreads;
        if (--steps > 0) {
            /* all four loads issue before the first atomic waits on them */
            a = p[0];
            b = p[nthreads];
            c = p[2 * nthreads];
            d = p[3 * nthreads];
        }
    }
    /* the flag was published long ago (at the start of the kernel); its read goes out with the
     * last loads and is looked at only before the merge into the output */
    unsigned long long f = 0;
    if (threadIdx.x == 0) f = *(volatile unsigned long long *)&sync->flag;

    /* the (m & 3) <= 3 vectors left are loaded together; -1 is out of range and counts nothing */
    {
        const int r = m & 3;
        int4 r0 = make_int4(-1, -1, -1, -1), r1 = r0, r2 = r0;
        if (r > 0) r0 = p[0];
        if (r > 1) r1 = p[nthreads];
        if (r > 2) r2 = p[2 * nthreads];
        lane_tally4(hl, ubins, r0);
        lane_tally4(hl, ubins, r1);
        lane_tally4(hl, ubins, r2);
    }
    /* scalar head and tail: fewer than 4 values each, and every grid has >= 1024 threads */
    if (tid < head) lane_tally(hl, ubins, x[tid]);
    const int64_t tail = head + 4 * n4;
    if (tid < n - tail) lane_tally(hl, ubins, x[tail + tid]);

    __syncthreads();

    /* bin b's 32 lane counters, read in a rotated order so that the lanes of a warp (consecutive
     * b) read 32 different banks */
    const int bin = threadIdx.x;  /* bins <= LANE_THREADS: one bin per thread at most */
    int s = 0;
    if (bin < bins) {
#pragma unroll
        for (int k = 0; k < LANE_COPIES; k++) {
            const int *row = sh + (k * bins + bin) * 32;
#pragma unroll
            for (int j = 0; j < 32; j++) s += row[(bin + j) & 31];
        }
    }
    if (threadIdx.x == 0) {
        const unsigned long long epoch = s_epoch;
        while (f < epoch) {  /* this call's output not yet zeroed: never in practice */
            __nanosleep(100);
            f = *(volatile unsigned long long *)&sync->flag;
        }
        __threadfence();  /* acquire: the zeros come before this block's additions */
    }
    __syncthreads();
    if (bin < bins && s != 0) atomicAdd(&counts[bin], s);
}

/* ------------------------------------------------------------------------------------------ */
/* shipped-expert kernel (bins > LANE_MAX_BINS): output zeroed by a memset first */

__device__ __forceinline__ void tally(int *h, unsigned bins, int v) {
    if ((unsigned)v < bins) atomicAdd(&h[v], 1);
}

__device__ __forceinline__ void tally4(int *h, unsigned bins, int4 v) {
    tally(h, bins, v.x);
    tally(h, bins, v.y);
    tally(h, bins, v.z);
    tally(h, bins, v.w);
}

template <int MODE>
__global__ void __launch_bounds__(THREADS)
hist_kernel(const int *__restrict__ x, int64_t n, int bins, int *__restrict__ counts) {
    extern __shared__ int sh[];
    const unsigned ubins = (unsigned)bins;
    int *h = MODE == MODE_WARP ? sh + (threadIdx.x >> 5) * bins
                               : MODE == MODE_BLOCK ? sh : counts;
    if (MODE != MODE_GLOBAL) {
        const int total = MODE == MODE_WARP ? WARPS * bins : bins;
        for (int i = threadIdx.x; i < total; i += THREADS) sh[i] = 0;
        __syncthreads();
    }

    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int64_t nthreads = (int64_t)gridDim.x * THREADS;
    const int64_t head = min(n, (int64_t)(((16u - ((uintptr_t)x & 15u)) & 15u) >> 2));
    const int64_t n4 = (n - head) >> 2;
    const int4 *x4 = reinterpret_cast<const int4 *>(x + head);

    int64_t q = tid;
    for (; q + 3 * nthreads < n4; q += 4 * nthreads) {
        const int4 a = x4[q], b = x4[q + nthreads], c = x4[q + 2 * nthreads],
                   d = x4[q + 3 * nthreads];
        tally4(h, ubins, a);
        tally4(h, ubins, b);
        tally4(h, ubins, c);
        tally4(h, ubins, d);
    }
    for (; q < n4; q += nthreads) tally4(h, ubins, x4[q]);
    if (tid < head) tally(h, ubins, x[tid]);
    for (int64_t j = head + 4 * n4 + tid; j < n; j += nthreads) tally(h, ubins, x[j]);

    if (MODE != MODE_GLOBAL) {
        __syncthreads();
        for (int b = threadIdx.x; b < bins; b += THREADS) {
            int s = sh[b];
            if (MODE == MODE_WARP)
                for (int w = 1; w < WARPS; w++) s += sh[w * bins + b];
            if (s != 0) atomicAdd(&counts[b], s);
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

static bool tensor_ok(const st_tensor *t, int64_t len) {
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL &&
           ((uintptr_t)t->data & 3) == 0;
}

/* one resident wave, but no block without at least one int4 per thread: every extra block
 * costs a merge of all bins */
static int pick_grid(hist_ctx *c, int sms, int per_sm, int threads) {
    if (per_sm < 1) return 1;
    const int64_t useful = (c->n + 4 * threads - 1) / (4 * threads);
    const int64_t grid = (int64_t)sms * per_sm;
    c->grid = (int)(grid < useful ? grid : useful);
    return 0;
}

/* Lane path: two resident blocks of 1024 threads per SM. The carveout hint asks for just the
 * shared memory two blocks of the largest bins of this instantiation need, so that the rest of
 * the SM's 256 KiB stays L1, where the in-flight lines of the streaming loads land (by default
 * the driver may pick a larger carveout). If the hint costs occupancy, the default is restored. */
template <int MAXB>
static int configure_lane(hist_ctx *c, int sms, int device) {
    int per_sm = 0, max_sm = 0, reserved = 0;
    cudaFuncAttributes attr;
    const size_t dyn_max = (size_t)LANE_COPIES * 32 * MAXB * sizeof(int);
    if (dyn_max > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(hist_lane_kernel<MAXB>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)dyn_max));
    CUDA_CHECK(cudaFuncGetAttributes(&attr, hist_lane_kernel<MAXB>));
    CUDA_CHECK(cudaDeviceGetAttribute(&max_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                      device));
    if (cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        reserved = 1024;
    }
    if (max_sm > 0) {
        const size_t need = 2 * (dyn_max + attr.sharedSizeBytes + (size_t)reserved);
        int pct = (int)((need * 100 + (size_t)max_sm - 1) / (size_t)max_sm);
        if (pct > 100) pct = 100;
        if (cudaFuncSetAttribute(hist_lane_kernel<MAXB>,
                                 cudaFuncAttributePreferredSharedMemoryCarveout, pct) !=
            cudaSuccess)
            (void)cudaGetLastError();  /* only a hint */
    }
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hist_lane_kernel<MAXB>,
                                                             LANE_THREADS, c->smem));
    if (per_sm < 2) {
        if (cudaFuncSetAttribute(hist_lane_kernel<MAXB>,
                                 cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutDefault) != cudaSuccess)
            (void)cudaGetLastError();
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, hist_lane_kernel<MAXB>, LANE_THREADS, c->smem));
    }
    return pick_grid(c, sms, per_sm, LANE_THREADS);
}

template <int MODE>
static int configure(hist_ctx *c, int sms) {
    int per_sm = 0;
    if (c->smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(hist_kernel<MODE>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)c->smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hist_kernel<MODE>, THREADS,
                                                             c->smem));
    return pick_grid(c, sms, per_sm, THREADS);
}

extern "C" void st_free(void *ctx) {
    hist_ctx *c = (hist_ctx *)ctx;
    if (c == NULL) return;
    if (c->sync != NULL) cudaFree(c->sync);
    free(c);
}

static int init_lane_sync(hist_ctx *c, cudaStream_t stream) {
    CUDA_CHECK(cudaMalloc((void **)&c->sync, sizeof(hist_sync)));
    CUDA_CHECK(cudaMemsetAsync(c->sync, 0, sizeof(hist_sync), stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params;
    int64_t n, bins;
    int device, sms;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "bins", &bins)) return 1;
    if (n < 1 || bins < 1 || bins > INT32_MAX / WARPS) return 1;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return 1;
    hist_ctx *c = (hist_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->bins = (int)bins;
    int rc;
    if (bins <= LANE_MAX_BINS && n < ((int64_t)1 << 40)) {  /* int per-thread counts */
        c->mode = MODE_LANE;
        c->smem = (size_t)LANE_COPIES * 32 * bins * sizeof(int);
        c->lane_max = bins <= 256 ? 256 : LANE_MAX_BINS;
        rc = c->lane_max == 256 ? configure_lane<256>(c, sms, device)
                                : configure_lane<LANE_MAX_BINS>(c, sms, device);
        if (rc == 0) rc = init_lane_sync(c, stream);
    } else if (bins <= WARP_COPIES_MAX_BINS) {
        c->mode = MODE_WARP;
        c->smem = (size_t)WARPS * bins * sizeof(int);
        rc = configure<MODE_WARP>(c, sms);
    } else if (bins <= BLOCK_COPY_MAX_BINS) {
        c->mode = MODE_BLOCK;
        c->smem = (size_t)bins * sizeof(int);
        rc = configure<MODE_BLOCK>(c, sms);
    } else {
        c->mode = MODE_GLOBAL;
        c->smem = 0;
        rc = configure<MODE_GLOBAL>(c, sms);
    }
    if (rc) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

static int64_t lane_head(const int *x, int64_t n) {
    const int64_t h = (int64_t)(((16u - ((uintptr_t)x & 15u)) & 15u) >> 2);
    return h < n ? h : n;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const hist_ctx *c = (const hist_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->bins)) return 1;
    const int *x = (const int *)in[0].data;
    int *counts = (int *)out[0].data;

    if (c->mode == MODE_LANE) {
        /* the same split as the other kernels compute on the device: scalar head up to the
         * first 16-byte boundary, int4 body, scalar tail; the body dealt out grid-stride */
        const int64_t head = lane_head(x, c->n), n4 = (c->n - head) >> 2;
        const int64_t nthreads = (int64_t)c->grid * LANE_THREADS;
        /* one launch: the kernel clears the output itself */
        if (c->lane_max == 256)
            hist_lane_kernel<256><<<c->grid, LANE_THREADS, c->smem, stream>>>(
                x, c->n, c->bins, counts, c->sync, (int)head, n4, (int)(n4 / nthreads),
                (int)(n4 % nthreads));
        else
            hist_lane_kernel<LANE_MAX_BINS><<<c->grid, LANE_THREADS, c->smem, stream>>>(
                x, c->n, c->bins, counts, c->sync, (int)head, n4, (int)(n4 / nthreads),
                (int)(n4 % nthreads));
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    CUDA_CHECK(cudaMemsetAsync(counts, 0, (size_t)c->bins * sizeof(int), stream));
    if (c->mode == MODE_WARP)
        hist_kernel<MODE_WARP><<<c->grid, THREADS, c->smem, stream>>>(x, c->n, c->bins, counts);
    else if (c->mode == MODE_BLOCK)
        hist_kernel<MODE_BLOCK><<<c->grid, THREADS, c->smem, stream>>>(x, c->n, c->bins, counts);
    else
        hist_kernel<MODE_GLOBAL><<<c->grid, THREADS, 0, stream>>>(x, c->n, c->bins, counts);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
