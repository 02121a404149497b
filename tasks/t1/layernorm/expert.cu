/* Expert for t1/layernorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the rows of
 * x[rows, cols] (f32) in one kernel that reads x from DRAM once and writes y once. A row of up to
 * 32K values lives in registers (a warp per row up to 1K columns, a block per row beyond), so the
 * variance is the exact two-pass one, the sum of squared deviations from the mean, at no extra
 * traffic: two tree sums over registers. Wider rows are swept twice, the statistics as sums of
 * values shifted by the row's first value (which keeps the variance free of cancellation), the
 * second sweep mostly from L2. float4 loads and stores where every row and vector is 16-byte
 * aligned (cols a multiple of 4), coalesced scalar accesses otherwise. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define EPS 1e-5f
#define FULL_MASK 0xffffffffu
#define WARP_ROWS_PER_BLOCK 4
#define WARP_MAX_COLS 1024        /* 32 lanes x 32 values */
#define BLOCK_MAX_COLS 32768      /* 1024 threads x 32 values */
#define STREAM_THREADS 1024

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "layernorm expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

enum { KIND_WARP, KIND_BLOCK, KIND_STREAM };

typedef struct ln_ctx {
    int rows, cols;
    const float *gamma, *beta;  /* the harness's, live until st_free */
    int kind;
    int threads;                /* block size of the block-per-row kernels */
    int m;                      /* register slots (float4s) per thread */
} ln_ctx;

/* ------------------------------------------------------------------------------------------ */
/* reductions: every lane of a warp ends with the same bits (a + b == b + a at each butterfly
 * step), so all threads of a row agree on mean and rstd */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* `red` has a slot per warp; the leading barrier keeps the readers of a previous call ahead of
 * this call's writers. */
__device__ __forceinline__ float block_sum(float v, float *red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0f;
    return warp_sum(v);
}

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* WARP: a warp per row, WARP_ROWS_PER_BLOCK rows per block; otherwise a block per row. G threads
 * share a row and each keeps 4*M of its values in v[]. VEC: slot s is element
 * 4*(lane + G*(s/4)) + s%4 (float4 accesses); otherwise element lane + G*s. Either way each
 * warp-wide access is contiguous. Slots past the row's end hold 0 and are masked. */
template <int M, bool VEC, bool WARP>
__global__ void __launch_bounds__(1024)
ln_reg_kernel(const float *__restrict__ x, const float *__restrict__ gamma,
              const float *__restrict__ beta, float *__restrict__ y, int rows, int cols) {
    __shared__ float red[32];
    const int lane = WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
    const int G = WARP ? 32 : (int)blockDim.x;
    const int row = WARP ? (int)(blockIdx.x * WARP_ROWS_PER_BLOCK + (threadIdx.x >> 5))
                         : (int)blockIdx.x;
    if (WARP && row >= rows) return;  /* whole warps only; the warp kernel has no barrier */
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;

    /* slots below nv hold elements of the row: one compare per slot, no per-slot state */
    const int nv = VEC ? ((cols >> 2) - lane + G - 1) / G : (cols - lane + G - 1) / G;
    float v[4 * M];
    if (VEC) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr) + lane;
#pragma unroll
        for (int m = 0; m < M; m++) {
            float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (m < nv) t = x4[G * m];
            v[4 * m] = t.x;
            v[4 * m + 1] = t.y;
            v[4 * m + 2] = t.z;
            v[4 * m + 3] = t.w;
        }
    } else {
        const float *xl = xr + lane;
#pragma unroll
        for (int s = 0; s < 4 * M; s++) v[s] = s < nv ? xl[G * s] : 0.0f;
    }

    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < 4 * M; s++) sum += v[s];
    const float mean = (WARP ? warp_sum(sum) : block_sum(sum, red)) / (float)cols;

    float sq = 0.0f;
#pragma unroll
    for (int s = 0; s < 4 * M; s++) {
        const float d = v[s] - mean;
        if ((VEC ? s / 4 : s) < nv) sq += d * d;
    }
    const float var = (WARP ? warp_sum(sq) : block_sum(sq, red)) / (float)cols;
    const float rstd = rsqrtf(var + EPS);

    if (VEC) {
        const float4 *g4 = reinterpret_cast<const float4 *>(gamma) + lane;
        const float4 *b4 = reinterpret_cast<const float4 *>(beta) + lane;
        float4 *y4 = reinterpret_cast<float4 *>(yr) + lane;
#pragma unroll
        for (int m = 0; m < M; m++) {
            if (m < nv) {
                const float4 g = g4[G * m], b = b4[G * m];
                float4 o;
                o.x = (v[4 * m] - mean) * rstd * g.x + b.x;
                o.y = (v[4 * m + 1] - mean) * rstd * g.y + b.y;
                o.z = (v[4 * m + 2] - mean) * rstd * g.z + b.z;
                o.w = (v[4 * m + 3] - mean) * rstd * g.w + b.w;
                y4[G * m] = o;
            }
        }
    } else {
        const float *gl = gamma + lane, *bl = beta + lane;
        float *yl = yr + lane;
#pragma unroll
        for (int s = 0; s < 4 * M; s++)
            if (s < nv) yl[G * s] = (v[s] - mean) * rstd * gl[G * s] + bl[G * s];
    }
}

/* Rows too wide for registers: a block per row, two sweeps. The statistics are sums of d = x - x0
 * (x0 the row's first value): var = E[d^2] - E[d]^2 then loses nothing to cancellation because
 * |E[d]| is of the order of the spread, not of the mean. */
template <bool VEC>
__global__ void __launch_bounds__(STREAM_THREADS)
ln_stream_kernel(const float *__restrict__ x, const float *__restrict__ gamma,
                 const float *__restrict__ beta, float *__restrict__ y, int cols) {
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    const int t = threadIdx.x, nt = blockDim.x;
    const float shift = xr[0];

    float s = 0.0f, ss = 0.0f;
    if (VEC) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int q = t; q < n4; q += nt) {
            const float4 a = x4[q];
            const float d0 = a.x - shift, d1 = a.y - shift, d2 = a.z - shift, d3 = a.w - shift;
            s += (d0 + d1) + (d2 + d3);
            ss += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
        }
    } else {
#pragma unroll 4
        for (int j = t; j < cols; j += nt) {
            const float d = xr[j] - shift;
            s += d;
            ss += d * d;
        }
    }
    s = block_sum(s, red);
    ss = block_sum(ss, red);
    const float md = s / (float)cols;
    const float var = fmaxf(ss / (float)cols - md * md, 0.0f);
    const float mean = shift + md;
    const float rstd = rsqrtf(var + EPS);

    if (VEC) {
        const float4 *x4 = reinterpret_cast<const float4 *>(xr);
        const float4 *g4 = reinterpret_cast<const float4 *>(gamma);
        const float4 *b4 = reinterpret_cast<const float4 *>(beta);
        float4 *y4 = reinterpret_cast<float4 *>(yr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int q = t; q < n4; q += nt) {
            const float4 a = x4[q], g = g4[q], b = b4[q];
            float4 o;
            o.x = (a.x - mean) * rstd * g.x + b.x;
            o.y = (a.y - mean) * rstd * g.y + b.y;
            o.z = (a.z - mean) * rstd * g.z + b.z;
            o.w = (a.w - mean) * rstd * g.w + b.w;
            y4[q] = o;
        }
    } else {
#pragma unroll 4
        for (int j = t; j < cols; j += nt) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
}

/* ------------------------------------------------------------------------------------------ */
/* launch */

template <bool VEC, bool WARP>
static cudaError_t launch_reg(const ln_ctx *c, const float *x, float *y, cudaStream_t stream) {
    const int grid = WARP ? (c->rows + WARP_ROWS_PER_BLOCK - 1) / WARP_ROWS_PER_BLOCK : c->rows;
    const int block = WARP ? 32 * WARP_ROWS_PER_BLOCK : c->threads;
    switch (c->m) {
    case 1:
        ln_reg_kernel<1, VEC, WARP><<<grid, block, 0, stream>>>(x, c->gamma, c->beta, y, c->rows,
                                                                c->cols);
        break;
    case 2:
        ln_reg_kernel<2, VEC, WARP><<<grid, block, 0, stream>>>(x, c->gamma, c->beta, y, c->rows,
                                                                c->cols);
        break;
    case 4:
        ln_reg_kernel<4, VEC, WARP><<<grid, block, 0, stream>>>(x, c->gamma, c->beta, y, c->rows,
                                                                c->cols);
        break;
    default:
        ln_reg_kernel<8, VEC, WARP><<<grid, block, 0, stream>>>(x, c->gamma, c->beta, y, c->rows,
                                                                c->cols);
        break;
    }
    return cudaGetLastError();
}

static cudaError_t launch(const ln_ctx *c, const float *x, float *y, bool vec,
                          cudaStream_t stream) {
    if (c->kind == KIND_WARP)
        return vec ? launch_reg<true, true>(c, x, y, stream) : launch_reg<false, true>(c, x, y, stream);
    if (c->kind == KIND_BLOCK)
        return vec ? launch_reg<true, false>(c, x, y, stream)
                   : launch_reg<false, false>(c, x, y, stream);
    if (vec)
        ln_stream_kernel<true><<<c->rows, STREAM_THREADS, 0, stream>>>(x, c->gamma, c->beta, y,
                                                                       c->cols);
    else
        ln_stream_kernel<false><<<c->rows, STREAM_THREADS, 0, stream>>>(x, c->gamma, c->beta, y,
                                                                        c->cols);
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

static bool tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL && ((uintptr_t)t->data & 3) == 0;
}

static bool aligned16(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}

/* The fewest slots of {1, 2, 4, 8} float4s per thread that cover `cols` with `threads` threads. */
static int slots_for(int cols, int threads) {
    int m = 1;
    while (m < 8 && 4 * m * threads < cols) m *= 2;
    return m;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 2) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    /* one block (or warp) per row along the grid's x dimension */
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX / 4) return 1;
    if (!tensor_ok(&params[0], 1, cols, 0) || !tensor_ok(&params[1], 1, cols, 0)) return 1;

    ln_ctx *c = (ln_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = (int)rows;
    c->cols = (int)cols;
    c->gamma = (const float *)params[0].data;
    c->beta = (const float *)params[1].data;
    if (cols <= WARP_MAX_COLS) {
        c->kind = KIND_WARP;
        c->threads = 32;
    } else if (cols <= BLOCK_MAX_COLS) {
        /* enough threads that no thread holds more than 32 values, and no more: short blocks
         * keep more rows in flight per SM */
        c->kind = KIND_BLOCK;
        c->threads = cols <= 4096 ? 128 : cols <= 8192 ? 256 : cols <= 16384 ? 512 : 1024;
    } else {
        c->kind = KIND_STREAM;
        c->threads = STREAM_THREADS;
    }
    c->m = slots_for(c->cols, c->threads);
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const ln_ctx *c = (const ln_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], 2, c->rows, c->cols) || !tensor_ok(&out[0], 2, c->rows, c->cols))
        return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;
    /* the pointers may move between calls, so the float4 path is decided per call */
    const bool vec = c->cols % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(c->gamma) &&
                     aligned16(c->beta);
    CUDA_CHECK(launch(c, x, y, vec, stream));
    return 0;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
