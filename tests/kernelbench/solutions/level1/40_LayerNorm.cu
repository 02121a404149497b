/* KernelBench level1/40_LayerNorm: nn.LayerNorm((64, 256, 256)) on x [16, 64, 256, 256], fp32,
 * so each of only 16 rows holds 4,194,304 elements. PyTorch's row-wise layer norm gives a row one
 * block, so 16 blocks work on a 132-SM GPU. Here the statistics are split over 4096 blocks:
 * each thread keeps 64 elements in registers and takes their mean and centred sum of squares
 * exactly (two passes over registers, no E[x²]−E[x]² cancellation), blocks merge those with
 * Chan's pairwise formula in double (every merge joins equal counts), and one block per row
 * merges the 256 block partials into mean and 1/sqrt(var + eps) (biased variance, eps 1e-5, as
 * nn.LayerNorm). A last pass applies (x − mean)·rstd·weight + bias in PyTorch's order with
 * 16-byte vectors. Three kernels, x read twice, y written once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define TAG "kernelbench level1/40"
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, TAG ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

/* An f32 tensor of exactly these dims (unused trailing dims are left at 0), with data. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1 = 0,
                     int64_t d2 = 0, int64_t d3 = 0) {
    const int64_t want[4] = {d0, d1, d2, d3};
    int ok = t != NULL && t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) fprintf(stderr, TAG ": %s: not an f32 tensor of the shape this program fixes\n", what);
    return !ok;
}

enum { ROWS = 16, F = 64, D1 = 256, D2 = 256 };
#define ROW_LEN (F * D1 * D2)
#define THREADS 256
#define VEC_PER_THREAD 16                              /* 64 floats held in registers */
#define BLOCK_SPAN (THREADS * VEC_PER_THREAD * 4)     /* 16384 elements per stats block */
#define BLOCKS_PER_ROW (ROW_LEN / BLOCK_SPAN)          /* 256 */
#define EPS 1e-5

typedef struct { const float *w, *b; double2 *part; float2 *stats; } ln_ctx;

/* Chan's merge of two partials of equal count n each: (mean, M2) of the union of 2n elements. */
__device__ __forceinline__ double2 merge_equal(double2 a, double2 b, double n) {
    const double d = b.x - a.x;
    return make_double2(0.5 * (a.x + b.x), a.y + b.y + d * d * 0.5 * n);
}

/* Tree-merge THREADS partials of n elements each held one per thread; thread 0 gets the result. */
__device__ double2 block_merge(double2 v, double n) {
    __shared__ double2 warp_part[THREADS / 32];
    for (int off = 1; off < 32; off <<= 1, n *= 2) {
        double2 o;
        o.x = __shfl_xor_sync(0xffffffffu, v.x, off);
        o.y = __shfl_xor_sync(0xffffffffu, v.y, off);
        v = merge_equal(v, o, n);
    }
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        v = warp_part[0];
        /* a running merge: the counts differ now, so the general form of Chan's formula */
        for (int w = 1; w < THREADS / 32; w++) {
            const double na = n * w, nb = n, d = warp_part[w].x - v.x;
            v.x += d * nb / (na + nb);
            v.y += warp_part[w].y + d * d * na * nb / (na + nb);
        }
    }
    return v;
}

__global__ void __launch_bounds__(THREADS) block_stats(const float4 *__restrict__ x,
                                                       double2 *__restrict__ part) {
    const long base = ((long)blockIdx.y * ROW_LEN + (long)blockIdx.x * BLOCK_SPAN) / 4;
    float4 r[VEC_PER_THREAD];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC_PER_THREAD; i++) {
        r[i] = __ldg(&x[base + i * THREADS + threadIdx.x]); /* coalesced across the block */
        s += (r[i].x + r[i].y) + (r[i].z + r[i].w);
    }
    const float mean = s * (1.0f / (VEC_PER_THREAD * 4));
    float m2 = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC_PER_THREAD; i++) {
        const float a = r[i].x - mean, b = r[i].y - mean, c = r[i].z - mean, d = r[i].w - mean;
        m2 += (a * a + b * b) + (c * c + d * d);
    }
    const double2 v = block_merge(make_double2(mean, m2), VEC_PER_THREAD * 4);
    if (threadIdx.x == 0) part[blockIdx.y * BLOCKS_PER_ROW + blockIdx.x] = v;
}

__global__ void __launch_bounds__(THREADS) row_stats(const double2 *__restrict__ part,
                                                     float2 *__restrict__ stats) {
    const double2 v = block_merge(part[blockIdx.x * BLOCKS_PER_ROW + threadIdx.x], BLOCK_SPAN);
    if (threadIdx.x == 0) {
        const double var = v.y / (double)ROW_LEN;
        stats[blockIdx.x] = make_float2((float)v.x, (float)(1.0 / sqrt(var + EPS)));
    }
}

__global__ void __launch_bounds__(THREADS) normalize(const float4 *__restrict__ x,
                                                     const float4 *__restrict__ w,
                                                     const float4 *__restrict__ b,
                                                     const float2 *__restrict__ stats,
                                                     float4 *__restrict__ y) {
    const long n_vec = (long)ROWS * ROW_LEN / 4;
    for (long v = (long)blockIdx.x * blockDim.x + threadIdx.x; v < n_vec;
         v += (long)gridDim.x * blockDim.x) {
        const float2 st = stats[v / (ROW_LEN / 4)];
        const long k = v % (ROW_LEN / 4);
        const float4 a = __ldcs(&x[v]), g = __ldg(&w[k]), h = __ldg(&b[k]);
        float4 r;
        r.x = (a.x - st.x) * st.y * g.x + h.x;
        r.y = (a.y - st.x) * st.y * g.y + h.y;
        r.z = (a.z - st.x) * st.y * g.z + h.z;
        r.w = (a.w - st.x) * st.y * g.w + h.w;
        __stcs(&y[v], r);
    }
}

extern "C" void st_free(void *p) {
    ln_ctx *c = (ln_ctx *)p;
    if (!c) return;
    cudaFree(c->part); /* nothing to report to: st_free has no status */
    cudaFree(c->stats);
    free(c);
}

static const st_tensor *find_param(const st_tensor *p, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (p[i].name && strcmp(p[i].name, name) == 0) return &p[i];
    fprintf(stderr, TAG ": param '%s' missing\n", name);
    return NULL;
}

static int init_ctx(ln_ctx *c, const st_tensor *params, int32_t n_params) {
    const st_tensor *w = find_param(params, n_params, "ln.weight");
    const st_tensor *b = find_param(params, n_params, "ln.bias");
    if (check_f32(w, "ln.weight", 3, F, D1, D2) || check_f32(b, "ln.bias", 3, F, D1, D2)) return 1;
    c->w = (const float *)w->data;
    c->b = (const float *)b->data;
    CUDA_CHECK(cudaMalloc(&c->part, sizeof(double2) * ROWS * BLOCKS_PER_ROW));
    CUDA_CHECK(cudaMalloc(&c->stats, sizeof(float2) * ROWS));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg; (void)stream;
    *out_ctx = NULL;
    ln_ctx *c = (ln_ctx *)calloc(1, sizeof(ln_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    ln_ctx *c = (ln_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 4, ROWS, F, D1, D2) || check_f32(&out[0], "y0", 4, ROWS, F, D1, D2))
        return 1;
    const float4 *x = (const float4 *)in[0].data;
    block_stats<<<dim3(BLOCKS_PER_ROW, ROWS), THREADS, 0, stream>>>(x, c->part);
    CUDA_CHECK(cudaGetLastError());
    row_stats<<<ROWS, THREADS, 0, stream>>>(c->part, c->stats);
    CUDA_CHECK(cudaGetLastError());
    normalize<<<132 * 8, THREADS, 0, stream>>>(x, (const float4 *)c->w, (const float4 *)c->b,
                                               c->stats, (float4 *)out[0].data);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
