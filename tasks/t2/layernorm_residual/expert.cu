/* Expert for t2/layernorm_residual: h = x + residual and y = LayerNorm(h)·gamma + beta in one
 * kernel that reads x and residual once and writes h and y once, the least traffic the task
 * allows. Each row's h stays in registers (packed bf16, exactly the values stored to h) between
 * the two reductions, so the variance is an exact second pass around the mean at no memory cost.
 * Narrow rows get one warp each, wider rows one block; rows too wide for registers are swept
 * three times, re-reading x and residual (mostly from L2). Loads and stores are 16 bytes wide
 * when every row starts on a 16-byte boundary (C % 8 == 0 and aligned pointers, checked on
 * every call), element-wise otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "stitch/solution.h"

#define LN_EPS 1e-5f
#define WARP_ROWS_PER_BLOCK 4 /* warp kernel: 128-thread blocks */
#define MAX_VEC_UNITS 8       /* 16-byte chunks a thread keeps in registers (32 registers) */
#define MAX_SCALAR_UNITS 16   /* single elements a thread keeps in registers */

typedef __nv_bfloat16 bf16;

typedef struct {
    int T, C;
    const bf16 *gamma, *beta; /* owned by the harness, live until st_free */
} ln_ctx;

/* ------------------------------------------------------------------------------------------ */
/* reductions */

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/* Every thread gets the block total. `buf` must hold 32 floats and not be reused by the caller
 * until another barrier has passed: each call gets its own buffer. */
__device__ __forceinline__ float block_sum(float v, float *buf) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    v = warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? buf[lane] : 0.0f;
    return warp_sum(v);
}

/* ------------------------------------------------------------------------------------------ */
/* 8 bf16 in a uint4 */

/* memcpy between register values instead of pointer casts: no aliasing questions, and the
 * compiler turns it into plain register moves */
__device__ __forceinline__ void unpack8(uint4 u, float f[8]) {
    __nv_bfloat162 p[4];
    memcpy(p, &u, sizeof(u));
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 t = __bfloat1622float2(p[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

__device__ __forceinline__ uint4 pack8(const float f[8]) {
    __nv_bfloat162 p[4];
#pragma unroll
    for (int i = 0; i < 4; i++) p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    uint4 u;
    memcpy(&u, p, sizeof(u));
    return u;
}

/* ------------------------------------------------------------------------------------------ */
/* the fused row: a group of NT threads (a warp or the whole block) owns one row; thread `tid`
 * of the group holds units tid, tid + NT, ... (N of them at most). A unit is 8 elements (VEC,
 * 16-byte loads) or one element. `reduce` sums over the group. */

template <bool VEC, int N, typename Reduce>
__device__ __forceinline__ void ln_row(const bf16 *__restrict__ x, const bf16 *__restrict__ r,
                                       const bf16 *__restrict__ gamma,
                                       const bf16 *__restrict__ beta, bf16 *__restrict__ h,
                                       bf16 *__restrict__ y, int C, int tid, int NT,
                                       Reduce reduce) {
    if (VEC) {
        const int U = C / 8;
        const uint4 *x4 = (const uint4 *)x, *r4 = (const uint4 *)r;
        uint4 *h4 = (uint4 *)h;
        uint4 hv[N];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int u = tid + k * NT;
            if (u < U) {
                float a[8], b[8];
                unpack8(__ldcs(x4 + u), a);  /* streamed: read once, keep L2 for the outputs */
                unpack8(__ldcs(r4 + u), b);
#pragma unroll
                for (int i = 0; i < 8; i++) a[i] += b[i];
                hv[k] = pack8(a);
                h4[u] = hv[k];
                unpack8(hv[k], a); /* statistics over the rounded values */
#pragma unroll
                for (int i = 0; i < 8; i++) s += a[i];
            }
        }
        const float mean = reduce(s, 0) / (float)C;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            if (tid + k * NT < U) {
                float a[8];
                unpack8(hv[k], a);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const float d = a[i] - mean;
                    q += d * d;
                }
            }
        }
        const float rstd = rsqrtf(reduce(q, 1) / (float)C + LN_EPS);
        const uint4 *g4 = (const uint4 *)gamma, *b4 = (const uint4 *)beta;
        uint4 *y4 = (uint4 *)y;
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int u = tid + k * NT;
            if (u < U) {
                float a[8], g[8], bb[8];
                unpack8(hv[k], a);
                unpack8(__ldg(g4 + u), g);
                unpack8(__ldg(b4 + u), bb);
#pragma unroll
                for (int i = 0; i < 8; i++) a[i] = (a[i] - mean) * rstd * g[i] + bb[i];
                y4[u] = pack8(a);
            }
        }
    } else {
        float hv[N];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int c = tid + k * NT;
            if (c < C) {
                const bf16 hb = __float2bfloat16(__bfloat162float(x[c]) + __bfloat162float(r[c]));
                h[c] = hb;
                hv[k] = __bfloat162float(hb);
                s += hv[k];
            }
        }
        const float mean = reduce(s, 0) / (float)C;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            if (tid + k * NT < C) {
                const float d = hv[k] - mean;
                q += d * d;
            }
        }
        const float rstd = rsqrtf(reduce(q, 1) / (float)C + LN_EPS);
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int c = tid + k * NT;
            if (c < C)
                y[c] = __float2bfloat16((hv[k] - mean) * rstd * __bfloat162float(gamma[c]) +
                                        __bfloat162float(beta[c]));
        }
    }
}

struct WarpReduce {
    __device__ float operator()(float v, int) const { return warp_sum(v); }
};

struct BlockReduce {
    float *buf; /* two 32-float buffers, one per reduction */
    __device__ float operator()(float v, int which) const { return block_sum(v, buf + 32 * which); }
};

/* one warp per row, WARP_ROWS_PER_BLOCK rows per block */
template <bool VEC, int N>
__global__ void __launch_bounds__(32 * WARP_ROWS_PER_BLOCK)
ln_warp_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ r,
               const bf16 *__restrict__ gamma, const bf16 *__restrict__ beta,
               bf16 *__restrict__ h, bf16 *__restrict__ y, int T, int C) {
    const int row = blockIdx.x * WARP_ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= T) return; /* the whole warp leaves: no block-wide barrier below */
    const size_t off = (size_t)row * C;
    ln_row<VEC, N>(x + off, r + off, gamma, beta, h + off, y + off, C, threadIdx.x % 32, 32,
                   WarpReduce());
}

/* one block per row */
template <bool VEC, int N>
__global__ void __launch_bounds__(1024)
ln_block_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ r,
                const bf16 *__restrict__ gamma, const bf16 *__restrict__ beta,
                bf16 *__restrict__ h, bf16 *__restrict__ y, int C) {
    __shared__ float buf[64];
    const size_t off = (size_t)blockIdx.x * C;
    BlockReduce red = {buf};
    ln_row<VEC, N>(x + off, r + off, gamma, beta, h + off, y + off, C, threadIdx.x, blockDim.x,
                   red);
}

/* Rows too wide for registers: three sweeps, h recomputed from x and residual each time (the
 * same fp32 add and rounding, so the same values as the h that is stored). */
__global__ void __launch_bounds__(1024)
ln_wide_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ r,
               const bf16 *__restrict__ gamma, const bf16 *__restrict__ beta,
               bf16 *__restrict__ h, bf16 *__restrict__ y, int C) {
    __shared__ float buf[64];
    const size_t off = (size_t)blockIdx.x * C;
    const bf16 *xr = x + off, *rr = r + off;
    bf16 *hr = h + off, *yr = y + off;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const bf16 hb = __float2bfloat16(__bfloat162float(xr[c]) + __bfloat162float(rr[c]));
        hr[c] = hb;
        s += __bfloat162float(hb);
    }
    const float mean = block_sum(s, buf) / (float)C;
    float q = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float d =
            __bfloat162float(__float2bfloat16(__bfloat162float(xr[c]) + __bfloat162float(rr[c]))) - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf + 32) / (float)C + LN_EPS);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float v =
            __bfloat162float(__float2bfloat16(__bfloat162float(xr[c]) + __bfloat162float(rr[c])));
        yr[c] = __float2bfloat16((v - mean) * rstd * __bfloat162float(gamma[c]) +
                                 __bfloat162float(beta[c]));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* launch: pick the group (warp or block of NT threads) and the units per thread N */

static int pow2_at_least(int v) {
    int p = 1;
    while (p < v) p *= 2;
    return p;
}

template <bool VEC>
static cudaError_t launch_warp(int N, const bf16 *x, const bf16 *r, const ln_ctx *c, bf16 *h,
                               bf16 *y, cudaStream_t s) {
    const unsigned int grid = (unsigned int)((c->T + WARP_ROWS_PER_BLOCK - 1) / WARP_ROWS_PER_BLOCK);
    const int block = 32 * WARP_ROWS_PER_BLOCK;
#define LN_WARP(n) ln_warp_kernel<VEC, n><<<grid, block, 0, s>>>(x, r, c->gamma, c->beta, h, y, c->T, c->C)
    switch (N) {
    case 1: LN_WARP(1); break;
    case 2: LN_WARP(2); break;
    case 4: LN_WARP(4); break;
    default: LN_WARP(8); break;
    }
#undef LN_WARP
    return cudaGetLastError();
}

template <bool VEC>
static cudaError_t launch_block(int N, int NT, const bf16 *x, const bf16 *r, const ln_ctx *c,
                                bf16 *h, bf16 *y, cudaStream_t s) {
    const unsigned int grid = (unsigned int)c->T;
#define LN_BLOCK(n) ln_block_kernel<VEC, n><<<grid, NT, 0, s>>>(x, r, c->gamma, c->beta, h, y, c->C)
    switch (N) {
    case 1: LN_BLOCK(1); break;
    case 2: LN_BLOCK(2); break;
    case 4: LN_BLOCK(4); break;
    case 8: LN_BLOCK(8); break;
    default: LN_BLOCK(VEC ? MAX_VEC_UNITS : MAX_SCALAR_UNITS); break; /* never 16 chunks */
    }
#undef LN_BLOCK
    return cudaGetLastError();
}

/* VEC: the units are 16-byte chunks, N at most MAX_VEC_UNITS; otherwise single elements, N at
 * most MAX_SCALAR_UNITS. Up to 8 units per lane a warp owns the row (short rows: many rows per
 * SM); beyond, a block of 128..1024 threads with about 4 units each; beyond 1024 threads at the
 * most units, the three-sweep kernel. */
static cudaError_t launch(const ln_ctx *c, const bf16 *x, const bf16 *r, bf16 *h, bf16 *y,
                          bool vec, cudaStream_t s) {
    const int U = vec ? c->C / 8 : c->C;
    const int max_n = vec ? MAX_VEC_UNITS : MAX_SCALAR_UNITS;
    if (U <= 32 * 8) {
        const int N = pow2_at_least((U + 31) / 32);
        return vec ? launch_warp<true>(N, x, r, c, h, y, s) : launch_warp<false>(N, x, r, c, h, y, s);
    }
    if (U <= 1024 * max_n) {
        int NT = pow2_at_least((U + 3) / 4);
        NT = NT < 128 ? 128 : NT > 1024 ? 1024 : NT;
        const int N = pow2_at_least((U + NT - 1) / NT);
        return vec ? launch_block<true>(N, NT, x, r, c, h, y, s)
                   : launch_block<false>(N, NT, x, r, c, h, y, s);
    }
    ln_wide_kernel<<<(unsigned int)c->T, 1024, 0, s>>>(x, r, c->gamma, c->beta, h, y, c->C);
    return cudaGetLastError();
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "layernorm_residual expert: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static bool tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL && ((uintptr_t)t->data & 1) == 0;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    int64_t T, C;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "C", &C)) return 1;
    /* one row per block along grid x; int column indices */
    if (T <= 0 || C <= 0 || T > INT32_MAX || C > INT32_MAX / 2) {
        fprintf(stderr, "layernorm_residual expert: sizes out of range\n");
        return 1;
    }
    if (n_params != 2 || !tensor_ok(&params[0], 1, C, 0) || !tensor_ok(&params[1], 1, C, 0)) {
        fprintf(stderr, "layernorm_residual expert: expected params gamma, beta: bf16 [%lld]\n",
                (long long)C);
        return 1;
    }
    ln_ctx *c = (ln_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->T = (int)T;
    c->C = (int)C;
    c->gamma = (const bf16 *)params[0].data;
    c->beta = (const bf16 *)params[1].data;
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const ln_ctx *c = (const ln_ctx *)p;
    if (!c || n_in != 2 || n_out != 2) {
        fprintf(stderr, "layernorm_residual expert: expected 2 inputs and 2 outputs\n");
        return 1;
    }
    for (int i = 0; i < 2; i++)
        if (!tensor_ok(&in[i], 2, c->T, c->C) || !tensor_ok(&out[i], 2, c->T, c->C)) {
            fprintf(stderr, "layernorm_residual expert: tensors must be bf16 [%d, %d]\n", c->T, c->C);
            return 1;
        }
    const bf16 *x = (const bf16 *)in[0].data, *r = (const bf16 *)in[1].data;
    bf16 *h = (bf16 *)out[0].data, *y = (bf16 *)out[1].data;
    /* pointers may move between calls: the 16-byte path is decided on every call */
    const bool vec = c->C % 8 == 0 && aligned16(x) && aligned16(r) && aligned16(h) && aligned16(y) &&
                     aligned16(c->gamma) && aligned16(c->beta);
    const cudaError_t err = launch(c, x, r, h, y, vec, stream);
    if (err != cudaSuccess) {
        fprintf(stderr, "layernorm_residual expert: launch: %s\n", cudaGetErrorString(err));
        return 1;
    }
    return 0;
}

extern "C" void st_free(void *p) {
    free(p);
}
