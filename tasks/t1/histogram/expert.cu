/* Expert for t1/histogram: counts[b] = #{i : x[i] == b} over x[n] (i32), values outside
 * [0, bins) ignored, in one pass over x. A persistent grid strides over the 16-byte-aligned body of
 * x with four int4 loads per thread per step (scalar loads for the ragged head and tail). Counts
 * go to privatised histograms in shared memory: with few bins, one copy per warp, so that on
 * skewed data only the lanes of one warp ever contend for a counter and the 8 warps of a block
 * never do; with more bins, one copy per block; beyond shared memory, global atomics (where the
 * skew is spread over so many bins that contention is rare). Each block then adds its non-empty
 * bins to the zeroed output, one global atomic per bin. Integer counts: any order is exact. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256
#define WARPS (THREADS / 32)
#define WARP_COPIES_MAX_BINS 2048     /* 8 copies of 2048 counters: 64 KiB of shared memory */
#define BLOCK_COPY_MAX_BINS 24576     /* 96 KiB: still two blocks per SM */

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "histogram expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

enum { MODE_WARP, MODE_BLOCK, MODE_GLOBAL };

typedef struct hist_ctx {
    int64_t n;
    int bins;
    int mode;
    int grid;
    size_t smem;  /* dynamic shared memory of the kernel */
} hist_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

/* One unsigned compare covers both ends of the range, negatives included. */
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
    /* a scalar head up to the first 16-byte boundary (at most 3 values), an int4 body, a tail */
    const int64_t head = min(n, (int64_t)(((16u - ((uintptr_t)x & 15u)) & 15u) >> 2));
    const int64_t n4 = (n - head) >> 2;
    const int4 *x4 = reinterpret_cast<const int4 *>(x + head);

    int64_t q = tid;
    for (; q + 3 * nthreads < n4; q += 4 * nthreads) {
        /* all four loads issue before the first atomic waits on them */
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

template <int MODE>
static int configure(hist_ctx *c, int sms) {
    int per_sm = 0;
    if (c->smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(hist_kernel<MODE>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)c->smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hist_kernel<MODE>, THREADS,
                                                             c->smem));
    if (per_sm < 1) return 1;
    /* one resident wave, but no block without at least one int4 per thread: every extra block
     * costs a merge of all bins */
    const int64_t useful = (c->n + 4 * THREADS - 1) / (4 * THREADS);
    const int64_t grid = (int64_t)sms * per_sm;
    c->grid = (int)(grid < useful ? grid : useful);
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
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
    if (bins <= WARP_COPIES_MAX_BINS) {
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
        free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const hist_ctx *c = (const hist_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->bins)) return 1;
    const int *x = (const int *)in[0].data;
    int *counts = (int *)out[0].data;

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

extern "C" void st_free(void *ctx) {
    free(ctx);
}
