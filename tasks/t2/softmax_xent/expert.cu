/* Expert for t2/softmax_xent: softmax cross-entropy reading the logits once and writing nothing of
 * their size. Each block sweeps one row (or, when there are too few rows to fill the GPU, one chunk
 * of a row) with float4 loads over the 16-byte-aligned middle and scalar loads over the ragged
 * ends (V is odd, so every row starts at a different alignment), keeping a per-thread online
 * logsumexp pair (running max m, sum s of exp(x - m), rescaled when m grows). One block-wide merge
 * gives the row's pair; a whole-row block then writes loss = m + log(s) - x[target] directly, the
 * target's logit having been fetched at the start so its latency hides behind the sweep. Chunked
 * rows leave their pairs in a small workspace instead. A second kernel of one block merges chunk
 * pairs where there are any and sums the losses in double for the mean, in a fixed order, so the
 * result is deterministic. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define FINISH_THREADS 1024
#define MIN_CHUNK 2048      /* elements: below this a chunk is mostly launch and merge overhead */

typedef struct {
    int T, V;
    int chunks, chunk_len, threads;
    float2 *partial; /* [T * chunks] (m, s) pairs, only when chunks > 1 */
} xent_ctx;

// ----------------------------------------------------------------------------
// online logsumexp: s is the sum of exp(v - m) over the values seen so far

/* Folding in an empty part (-inf, 0) must change nothing: -inf - -inf would be NaN. */
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

/* The logits are finite, so the first value seen always raises m from -inf, and s * exp(-inf)
 * is 0 * 0. */
__device__ __forceinline__ void lse_add(float &m, float &s, float v) {
    if (v > m) {
        s = s * __expf(m - v) + 1.0f;
        m = v;
    } else {
        s += __expf(v - m);
    }
}

__device__ __forceinline__ void lse_add4(float &m, float &s, float4 v) {
    const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (mx > m) {
        s *= __expf(m - mx);
        m = mx;
    }
    s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
}

/* All threads end with the block's pair. */
template <int THREADS>
__device__ void block_lse_merge(float &m, float &s) {
    __shared__ float sm[THREADS / 32], ss[THREADS / 32];
    for (int o = 16; o > 0; o /= 2)
        lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = lane < THREADS / 32 ? sm[lane] : -INFINITY;
    s = lane < THREADS / 32 ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o /= 2)
        lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}

// ----------------------------------------------------------------------------
// kernels

/* Block (row, chunk) sweeps logits[row, c0 .. c1). With one chunk per row it writes the loss,
 * otherwise its (m, s) pair. */
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
xent_sweep_kernel(const float *__restrict__ logits, const int *__restrict__ targets, int V,
                  int chunk_len, int chunks, float *__restrict__ loss, float2 *__restrict__ partial) {
    const int row = blockIdx.x, chunk = blockIdx.y, t = threadIdx.x;
    const float *xr = logits + (size_t)row * V;
    float target_logit = 0.0f;
    if (chunks == 1 && t == 0) target_logit = xr[targets[row]]; /* in flight during the sweep */

    const int c0 = chunk * chunk_len, len = min(V - c0, chunk_len);
    const float *p = xr + c0;
    /* scalar head up to the first 16-byte boundary, float4 body, scalar tail */
    const int head = min((int)(((16u - ((unsigned)(uintptr_t)p & 15u)) & 15u) / 4u), len);
    const int n4 = (len - head) / 4;
    const float4 *p4 = (const float4 *)(p + head);

    float m = -INFINITY, s = 0.0f;
    if (t < head) lse_add(m, s, p[t]);
    int i = t;
    /* four independent loads in flight per thread before any of them is used */
    for (; i + 3 * THREADS < n4; i += 4 * THREADS) {
        const float4 a = p4[i], b = p4[i + THREADS], c = p4[i + 2 * THREADS], d = p4[i + 3 * THREADS];
        lse_add4(m, s, a);
        lse_add4(m, s, b);
        lse_add4(m, s, c);
        lse_add4(m, s, d);
    }
    for (; i < n4; i += THREADS) lse_add4(m, s, p4[i]);
    for (int j = head + 4 * n4 + t; j < len; j += THREADS) lse_add(m, s, p[j]);

    block_lse_merge<THREADS>(m, s);
    if (t != 0) return;
    if (chunks == 1)
        loss[row] = (m - target_logit) + logf(s);
    else
        partial[(size_t)row * chunks + chunk] = make_float2(m, s);
}

/* One block: merge chunk pairs into losses where rows were split, then the mean, summed in double
 * in a fixed order. */
__global__ void __launch_bounds__(FINISH_THREADS)
xent_finish_kernel(const float *__restrict__ logits, const int *__restrict__ targets,
                   const float2 *__restrict__ partial, int T, int V, int chunks,
                   float *__restrict__ loss, float *__restrict__ mean) {
    __shared__ double warp_sum[FINISH_THREADS / 32];
    double acc = 0.0;
    for (int r = threadIdx.x; r < T; r += FINISH_THREADS) {
        float l;
        if (chunks == 1) {
            l = loss[r];
        } else {
            float m = -INFINITY, s = 0.0f;
            for (int c = 0; c < chunks; c++) {
                const float2 q = partial[(size_t)r * chunks + c];
                lse_merge(m, s, q.x, q.y);
            }
            l = (m - logits[(size_t)r * V + targets[r]]) + logf(s);
            loss[r] = l;
        }
        acc += (double)l;
    }
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x % 32 == 0) warp_sum[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = warp_sum[threadIdx.x];
        for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) mean[0] = (float)(acc / T);
    }
}

// ----------------------------------------------------------------------------
// ABI

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "softmax_xent expert: size '%s' missing from the config\n", name);
    return 1;
}

/* 4-byte alignment is all the float4 path needs: the head is peeled at run time */
static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL && ((uintptr_t)t->data & 3) == 0;
    if (!ok) fprintf(stderr, "softmax_xent expert: %s: wrong dtype, shape or alignment\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    xent_ctx *c = (xent_ctx *)p;
    if (!c) return;
    cudaFree(c->partial);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t T, V;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "V", &V)) return 1;
    if (n_params != 0 || T < 1 || V < 1 || T > INT32_MAX || V > INT32_MAX) {
        fprintf(stderr, "softmax_xent expert: bad sizes T=%lld V=%lld\n", (long long)T, (long long)V);
        return 1;
    }
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
        sms = 132;
    xent_ctx *c = (xent_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->T = (int)T;
    c->V = (int)V;
    /* Split rows only when there are too few to give every SM about 8 blocks, and never into
     * chunks shorter than MIN_CHUNK. Chunk lengths are multiples of 4 and no chunk is empty. */
    int64_t want = ((int64_t)8 * sms + T - 1) / T, most = V / MIN_CHUNK;
    int64_t chunks = want < most ? want : most;
    if (chunks < 1) chunks = 1;
    if (chunks > 65535) chunks = 65535;
    int64_t len = (V + chunks - 1) / chunks;
    if (chunks > 1) len = (len + 3) / 4 * 4;
    c->chunk_len = (int)len;
    c->chunks = (int)((V + len - 1) / len);
    c->threads = len >= 4096 ? 256 : len >= 1024 ? 128 : 64;
    if (c->chunks > 1) {
        cudaError_t e = cudaMalloc(&c->partial, sizeof(float2) * (size_t)T * (size_t)c->chunks);
        if (e != cudaSuccess) {
            fprintf(stderr, "softmax_xent expert: cudaMalloc: %s\n", cudaGetErrorString(e));
            st_free(c);
            return 1;
        }
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const xent_ctx *c = (const xent_ctx *)p;
    if (!c || n_in != 2 || n_out != 2) return 1;
    if (check(&in[0], "logits", ST_F32, 2, c->T, c->V) || check(&in[1], "targets", ST_I32, 1, c->T, 0) ||
        check(&out[0], "loss", ST_F32, 1, c->T, 0) || check(&out[1], "mean", ST_F32, 1, 1, 0))
        return 1;
    const float *x = (const float *)in[0].data;
    const int *targets = (const int *)in[1].data;
    float *loss = (float *)out[0].data, *mean = (float *)out[1].data;

    const dim3 grid((unsigned)c->T, (unsigned)c->chunks);
    if (c->threads == 256)
        xent_sweep_kernel<256><<<grid, 256, 0, stream>>>(x, targets, c->V, c->chunk_len, c->chunks, loss, c->partial);
    else if (c->threads == 128)
        xent_sweep_kernel<128><<<grid, 128, 0, stream>>>(x, targets, c->V, c->chunk_len, c->chunks, loss, c->partial);
    else
        xent_sweep_kernel<64><<<grid, 64, 0, stream>>>(x, targets, c->V, c->chunk_len, c->chunks, loss, c->partial);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        xent_finish_kernel<<<1, FINISH_THREADS, 0, stream>>>(x, targets, c->partial, c->T, c->V,
                                                             c->chunks, loss, mean);
        e = cudaGetLastError();
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "softmax_xent expert: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
