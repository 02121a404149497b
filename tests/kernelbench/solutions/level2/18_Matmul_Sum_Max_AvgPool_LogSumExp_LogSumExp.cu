/* KernelBench level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: x [1024, 8192] through
 * nn.Linear(8192, 8192), then a sum over the features, then max, mean, logsumexp and logsumexp,
 * each over a dimension of size 1. Those four are identities on a [1024, 1] tensor (the max and
 * mean of one value is the value; logsumexp of one value v is v + log(1) = v), so the program
 * computes y[m] = Σ_n (x[m]·W[n] + b[n]). The sum commutes with the linear map:
 * y[m] = x[m]·w + β with w[k] = Σ_n W[n][k] and β = Σ_n b[n], both fixed by the params. st_init
 * folds them once, in double, and st_run is one GEMV: one block per row, fp64 accumulation,
 * reading x once (33 MB) instead of a 137-GFLOP SGEMM that writes a 33 MB intermediate. Summing
 * in double makes this closer to the exact value than the reference's own fp32 rounding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define TAG "kernelbench level2/18"
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

enum { BATCH = 1024, IN = 8192, OUT = 8192, THREADS = 256 };

typedef struct { double *wsum, *bsum; } fold_ctx;

__device__ double block_sum(double v) {
    __shared__ double part[THREADS / 32];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < THREADS / 32 ? part[threadIdx.x] : 0.0;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    }
    return v; /* valid in thread 0 */
}

/* wsum[k] = Σ_n W[n][k]: threads run along k, so each row of W is read coalesced. */
__global__ void fold_columns(const float *__restrict__ W, double *__restrict__ wsum) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= IN) return;
    double s = 0.0;
    for (int n = 0; n < OUT; n++) s += (double)W[(long)n * IN + k];
    wsum[k] = s;
}

__global__ void __launch_bounds__(THREADS) fold_bias(const float *__restrict__ b,
                                                     double *__restrict__ bsum) {
    double s = 0.0;
    for (int n = threadIdx.x; n < OUT; n += THREADS) s += (double)b[n];
    s = block_sum(s);
    if (threadIdx.x == 0) *bsum = s;
}

__global__ void __launch_bounds__(THREADS) gemv(const float4 *__restrict__ x,
                                                const double *__restrict__ wsum,
                                                const double *__restrict__ bsum,
                                                float *__restrict__ y) {
    const float4 *row = x + (long)blockIdx.x * (IN / 4);
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < IN / 4 / THREADS; i++) {
        const int v = i * THREADS + threadIdx.x;
        const float4 a = __ldcs(&row[v]);
        const double *w = wsum + 4 * v;
        s += (double)a.x * w[0] + (double)a.y * w[1] + (double)a.z * w[2] + (double)a.w * w[3];
    }
    s = block_sum(s);
    if (threadIdx.x == 0) y[blockIdx.x] = (float)(s + *bsum);
}

extern "C" void st_free(void *p) {
    fold_ctx *c = (fold_ctx *)p;
    if (!c) return;
    cudaFree(c->wsum); /* st_free cannot report a failure */
    cudaFree(c->bsum);
    free(c);
}

static const st_tensor *find_param(const st_tensor *p, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (p[i].name && strcmp(p[i].name, name) == 0) return &p[i];
    fprintf(stderr, TAG ": param '%s' missing\n", name);
    return NULL;
}

static int init_ctx(fold_ctx *c, const st_tensor *params, int32_t n_params, cudaStream_t stream) {
    const st_tensor *W = find_param(params, n_params, "linear.weight");
    const st_tensor *b = find_param(params, n_params, "linear.bias");
    if (check_f32(W, "linear.weight", 2, OUT, IN) || check_f32(b, "linear.bias", 1, OUT)) return 1;
    CUDA_CHECK(cudaMalloc(&c->wsum, sizeof(double) * IN));
    CUDA_CHECK(cudaMalloc(&c->bsum, sizeof(double)));
    fold_columns<<<IN / THREADS, THREADS, 0, stream>>>((const float *)W->data, c->wsum);
    CUDA_CHECK(cudaGetLastError());
    fold_bias<<<1, THREADS, 0, stream>>>((const float *)b->data, c->bsum);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream)); /* report a fault here, not in the first run */
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg;
    *out_ctx = NULL;
    fold_ctx *c = (fold_ctx *)calloc(1, sizeof(fold_ctx));
    if (!c) return 1;
    if (init_ctx(c, params, n_params, stream)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    fold_ctx *c = (fold_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 2, BATCH, IN) || check_f32(&out[0], "y0", 2, BATCH, 1)) return 1;
    gemv<<<BATCH, THREADS, 0, stream>>>((const float4 *)in[0].data, c->wsum, c->bsum,
                                        (float *)out[0].data);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
