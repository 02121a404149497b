/* Reference for t3/cg: textbook conjugate gradients from x = 0, as a plain port runs it: separate
 * kernels for the sparse product (one thread per CSR row), each dot product (a block reduction
 * into a double accumulated with atomicAdd) and each vector update, with alpha and beta computed on
 * the host, so every iteration copies two scalars back and synchronises twice. Float vectors,
 * dot products in double; stop when the recurrence residual ||r|| <= 1e-6 ||b||. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TOL 1e-6
#define MAX_ITER 20000
#define THREADS 256

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "cg reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int n, nnz;
    float *r, *p, *ap; /* [n] each */
    double *d_dot;     /* device accumulator of a dot product */
    double *h_dot;     /* pinned copy */
} cg_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "cg reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, st_dtype dt, int64_t len) {
    int ok = t->dtype == dt && t->ndim == 1 && t->shape[0] == len && t->data;
    if (!ok) fprintf(stderr, "cg reference: %s: wrong dtype or shape\n", t->name);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels

__global__ void init_kernel(const float *b, float *x, float *r, float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] = 0.0f;
    r[i] = b[i];
    p[i] = b[i];
}

__global__ void spmv_kernel(const int *row_ptr, const int *col, const float *val, const float *v,
                            float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int k = row_ptr[i]; k < row_ptr[i + 1]; k++) s += val[k] * v[col[k]];
    out[i] = s;
}

__global__ void dot_kernel(const float *a, const float *b, int n, double *out) {
    __shared__ double buf[THREADS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? (double)a[i] * b[i] : 0.0;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}

/* y += alpha * x */
__global__ void axpy_kernel(float *y, const float *x, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += alpha * x[i];
}

/* p = r + beta * p */
__global__ void xpay_kernel(float *p, const float *r, float beta, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = r[i] + beta * p[i];
}

// ----------------------------------------------------------------------------

static int dot(const cg_ctx *c, const float *a, const float *b, cudaStream_t stream, double *out) {
    CUDA_CHECK(cudaMemsetAsync(c->d_dot, 0, sizeof(double), stream));
    dot_kernel<<<(c->n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(a, b, c->n, c->d_dot);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(c->h_dot, c->d_dot, sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    *out = *c->h_dot;
    return 0;
}

extern "C" void st_free(void *p) {
    cg_ctx *c = (cg_ctx *)p;
    if (!c) return;
    cudaFree(c->r);
    cudaFree(c->p);
    cudaFree(c->ap);
    cudaFree(c->d_dot);
    cudaFreeHost(c->h_dot);
    free(c);
}

static int init_ctx(cg_ctx *c) {
    const size_t bytes = sizeof(float) * (size_t)c->n;
    CUDA_CHECK(cudaMalloc(&c->r, bytes));
    CUDA_CHECK(cudaMalloc(&c->p, bytes));
    CUDA_CHECK(cudaMalloc(&c->ap, bytes));
    CUDA_CHECK(cudaMalloc(&c->d_dot, sizeof(double)));
    CUDA_CHECK(cudaMallocHost(&c->h_dot, sizeof(double)));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t nx, ny, nz;
    if (cfg_get(cfg, "nx", &nx) || cfg_get(cfg, "ny", &ny) || cfg_get(cfg, "nz", &nz)) return 1;
    if (n_params != 0 || nx < 1 || ny < 1 || nz < 1 || nx * ny * nz > INT32_MAX / 8) {
        fprintf(stderr, "cg reference: bad sizes\n");
        return 1;
    }
    cg_ctx *c = (cg_ctx *)calloc(1, sizeof(cg_ctx));
    if (!c) return 1;
    const int64_t n = nx * ny * nz;
    c->n = (int)n;
    c->nnz = (int)(7 * n - 2 * (nx * ny + ny * nz + nx * nz) + 2 * (n / 8));
    if (init_ctx(c)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const cg_ctx *c = (const cg_ctx *)ctx;
    const int n = c->n;
    if (n_in != 4 || n_out != 1 || check(&in[0], ST_I32, n + 1) || check(&in[1], ST_I32, c->nnz) ||
        check(&in[2], ST_F32, c->nnz) || check(&in[3], ST_F32, n) || check(&out[0], ST_F32, n))
        return 1;
    const int *row_ptr = (const int *)in[0].data, *col = (const int *)in[1].data;
    const float *val = (const float *)in[2].data, *b = (const float *)in[3].data;
    float *x = (float *)out[0].data;
    const int blocks = (n + THREADS - 1) / THREADS;

    init_kernel<<<blocks, THREADS, 0, stream>>>(b, x, c->r, c->p, n);
    CUDA_CHECK(cudaGetLastError());
    double rr, pap;
    if (dot(c, c->r, c->r, stream, &rr)) return 1;
    const double stop = TOL * TOL * rr;
    for (int it = 0; it < MAX_ITER && rr > stop; it++) {
        spmv_kernel<<<blocks, THREADS, 0, stream>>>(row_ptr, col, val, c->p, c->ap, n);
        CUDA_CHECK(cudaGetLastError());
        if (dot(c, c->p, c->ap, stream, &pap)) return 1;
        const float alpha = (float)(rr / pap);
        axpy_kernel<<<blocks, THREADS, 0, stream>>>(x, c->p, alpha, n);
        CUDA_CHECK(cudaGetLastError());
        axpy_kernel<<<blocks, THREADS, 0, stream>>>(c->r, c->ap, -alpha, n);
        CUDA_CHECK(cudaGetLastError());
        double rr_new;
        if (dot(c, c->r, c->r, stream, &rr_new)) return 1;
        const float beta = (float)(rr_new / rr);
        rr = rr_new;
        xpay_kernel<<<blocks, THREADS, 0, stream>>>(c->p, c->r, beta, n);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
