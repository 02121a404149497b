/* Reference for t3/kmeans: I iterations of Lloyd's algorithm as an eager framework runs them:
 * squared distances through the matrix product (|x|^2 + |c|^2 - 2 x.c, the product by cuBLAS
 * SGEMM into a full [n, k] matrix, as torch.cdist does), an argmin kernel (one warp per point, ties
 * to the lowest index), a scatter-add of every coordinate into double sums with atomics, a count,
 * and a division. Each step is its own kernel and the distance matrix makes a round trip through
 * memory every iteration. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "kmeans reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "kmeans reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, \
            (int)s_); return 1; } } while (0)

typedef struct {
    int n, d, k, iters;
    cublasHandle_t blas;
    float *dots;      /* [n, k] x.c */
    float *xnorm;     /* [n] */
    float *cnorm;     /* [k] */
    float *cent[2];   /* [k, d] ping-pong */
    double *sum;      /* [k, d] */
    int *count;       /* [k] */
} km_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "kmeans reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, st_dtype dt, int64_t rows, int64_t cols) {
    int ok = t->dtype == dt && t->data && t->shape[0] == rows &&
             (cols ? t->ndim == 2 && t->shape[1] == cols : t->ndim == 1);
    if (!ok) fprintf(stderr, "kmeans reference: %s: wrong dtype or shape\n", t->name);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels

__global__ void sqnorm_kernel(const float *a, float *out, int rows, int d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float s = 0.0f;
    for (int j = 0; j < d; j++) s += a[(size_t)i * d + j] * a[(size_t)i * d + j];
    out[i] = s;
}

/* one warp per point; each lane scans centroids lane, lane + 32, ... then the warp merges, ties to
 * the lower index */
__global__ void argmin_kernel(const float *dots, const float *xnorm, const float *cnorm, int *label,
                              int n, int k) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (i >= n) return;
    float best = INFINITY;
    int arg = k;
    for (int c = lane; c < k; c += 32) {
        const float dist = xnorm[i] + cnorm[c] - 2.0f * dots[(size_t)i * k + c];
        if (dist < best) {
            best = dist;
            arg = c;
        }
    }
    for (int o = 16; o > 0; o /= 2) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
        if (ob < best || (ob == best && oa < arg)) {
            best = ob;
            arg = oa;
        }
    }
    /* a point whose distances are all NaN would keep k: fall back to 0 rather than write out of range */
    if (lane == 0) label[i] = arg < k ? arg : 0;
}

__global__ void scatter_kernel(const float *pts, const int *label, double *sum, int *count, int n, int d) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)n * d) return;
    const int i = (int)(e / d), j = (int)(e % d), c = label[i];
    atomicAdd(&sum[(size_t)c * d + j], (double)pts[e]);
    if (j == 0) atomicAdd(&count[c], 1);
}

__global__ void divide_kernel(const float *cur, const double *sum, const int *count, float *next, int k, int d) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= k * d) return;
    const int c = e / d;
    next[e] = count[c] > 0 ? (float)(sum[e] / (double)count[c]) : cur[e];
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    km_ctx *c = (km_ctx *)p;
    if (!c) return;
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->dots);
    cudaFree(c->xnorm);
    cudaFree(c->cnorm);
    cudaFree(c->cent[0]);
    cudaFree(c->cent[1]);
    cudaFree(c->sum);
    cudaFree(c->count);
    free(c);
}

static int init_ctx(km_ctx *c) {
    CUBLAS_CHECK(cublasCreate(&c->blas));
    /* plain fp32 products: no TF32 */
    CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    CUDA_CHECK(cudaMalloc(&c->dots, sizeof(float) * (size_t)c->n * c->k));
    CUDA_CHECK(cudaMalloc(&c->xnorm, sizeof(float) * (size_t)c->n));
    CUDA_CHECK(cudaMalloc(&c->cnorm, sizeof(float) * (size_t)c->k));
    CUDA_CHECK(cudaMalloc(&c->cent[0], sizeof(float) * (size_t)c->k * c->d));
    CUDA_CHECK(cudaMalloc(&c->cent[1], sizeof(float) * (size_t)c->k * c->d));
    CUDA_CHECK(cudaMalloc(&c->sum, sizeof(double) * (size_t)c->k * c->d));
    CUDA_CHECK(cudaMalloc(&c->count, sizeof(int) * (size_t)c->k));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, d, k, iters;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "d", &d) || cfg_get(cfg, "k", &k) || cfg_get(cfg, "I", &iters))
        return 1;
    if (n_params != 0 || n < 1 || d < 1 || k < 1 || iters < 1 || n * d > INT32_MAX || k * d > INT32_MAX ||
        n * 32 > INT32_MAX || iters > INT32_MAX) {
        fprintf(stderr, "kmeans reference: bad sizes\n");
        return 1;
    }
    km_ctx *c = (km_ctx *)calloc(1, sizeof(km_ctx));
    if (!c) return 1;
    c->n = (int)n;
    c->d = (int)d;
    c->k = (int)k;
    c->iters = (int)iters;
    if (init_ctx(c)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    km_ctx *c = (km_ctx *)p;
    const int n = c->n, d = c->d, k = c->k;
    if (n_in != 2 || n_out != 3 || check(&in[0], ST_F32, n, d) || check(&in[1], ST_F32, k, d) ||
        check(&out[0], ST_I32, n, 0) || check(&out[1], ST_F32, k, d) || check(&out[2], ST_F32, k, d))
        return 1;
    const float *pts = (const float *)in[0].data;
    int *label = (int *)out[0].data;
    const size_t cbytes = sizeof(float) * (size_t)k * d;
    CUBLAS_CHECK(cublasSetStream(c->blas, stream));
    CUDA_CHECK(cudaMemcpyAsync(c->cent[0], in[1].data, cbytes, cudaMemcpyDeviceToDevice, stream));
    sqnorm_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(pts, c->xnorm, n, d);
    CUDA_CHECK(cudaGetLastError());
    int cur = 0;
    for (int it = 0; it < c->iters; it++) {
        const float *cent = c->cent[cur];
        sqnorm_kernel<<<(k + THREADS - 1) / THREADS, THREADS, 0, stream>>>(cent, c->cnorm, k, d);
        CUDA_CHECK(cudaGetLastError());
        /* row-major dots[n, k] = pts[n, d] . cent[k, d]^T is column-major dots^T[k, n] = cent^T' pts' */
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, n, d, &one, cent, d, pts, d, &zero,
                                 c->dots, k));
        argmin_kernel<<<(int)(((size_t)n * 32 + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
            c->dots, c->xnorm, c->cnorm, label, n, k);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(c->sum, 0, sizeof(double) * (size_t)k * d, stream));
        CUDA_CHECK(cudaMemsetAsync(c->count, 0, sizeof(int) * (size_t)k, stream));
        scatter_kernel<<<(int)(((size_t)n * d + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
            pts, label, c->sum, c->count, n, d);
        CUDA_CHECK(cudaGetLastError());
        divide_kernel<<<(k * d + THREADS - 1) / THREADS, THREADS, 0, stream>>>(cent, c->sum, c->count,
                                                                            c->cent[cur ^ 1], k, d);
        CUDA_CHECK(cudaGetLastError());
        cur ^= 1;
    }
    CUDA_CHECK(cudaMemcpyAsync(out[1].data, c->cent[cur], cbytes, cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(out[2].data, c->cent[cur ^ 1], cbytes, cudaMemcpyDeviceToDevice, stream));
    return 0;
}
