/* Reference for t2/softmax_xent: softmax cross-entropy as an eager framework runs it, log_softmax
 * followed by nll_loss and a mean. Five plain kernels: row max, row sum of exp(x - max), the full
 * [T, V] matrix of log-probabilities x - max - log(sum) written to a workspace, the loss gathered
 * from it at each row's target, and one block summing the losses (in double) for the mean. The
 * log-probabilities, not the probabilities, are materialised: a probability as small as e^-146
 * (a target near the bottom of a row) underflows float32 and -log of it would be infinite. The
 * logits are read three times and a matrix as large as them is written and read back. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "softmax_xent reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define BLOCK 256

typedef struct {
    int T, V;
    float *row_max, *row_sum; /* [T] */
    float *logp;              /* [T, V] */
} xent_ctx;

// ----------------------------------------------------------------------------
// kernels

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float buf[BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            float other = buf[threadIdx.x + stride];
            buf[threadIdx.x] = is_max ? fmaxf(buf[threadIdx.x], other) : buf[threadIdx.x] + other;
        }
        __syncthreads();
    }
    return buf[0];
}

__global__ void row_max_kernel(const float *x, float *row_max, int V) {
    const float *xr = x + (size_t)blockIdx.x * V;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += BLOCK) m = fmaxf(m, xr[j]);
    m = block_reduce(m, true);
    if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void row_sum_kernel(const float *x, const float *row_max, float *row_sum, int V) {
    const float *xr = x + (size_t)blockIdx.x * V;
    const float m = row_max[blockIdx.x];
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += BLOCK) s += expf(xr[j] - m);
    s = block_reduce(s, false);
    if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

__global__ void log_softmax_kernel(const float *x, const float *row_max, const float *row_sum,
                                   float *logp, int V) {
    const float *xr = x + (size_t)blockIdx.x * V;
    float *lr = logp + (size_t)blockIdx.x * V;
    const float m = row_max[blockIdx.x], log_sum = logf(row_sum[blockIdx.x]);
    for (int j = threadIdx.x; j < V; j += BLOCK) lr[j] = (xr[j] - m) - log_sum;
}

__global__ void nll_kernel(const float *logp, const int *targets, float *loss, int T, int V) {
    const int t = blockIdx.x * BLOCK + threadIdx.x;
    if (t < T) loss[t] = -logp[(size_t)t * V + targets[t]];
}

__global__ void mean_kernel(const float *loss, float *mean, int T) {
    __shared__ double buf[BLOCK];
    double s = 0.0;
    for (int t = threadIdx.x; t < T; t += BLOCK) s += loss[t];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) mean[0] = (float)(buf[0] / T);
}

// ----------------------------------------------------------------------------
// ABI

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "softmax_xent reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok) fprintf(stderr, "softmax_xent reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    xent_ctx *c = (xent_ctx *)p;
    if (!c) return;
    cudaFree(c->row_max);
    cudaFree(c->row_sum);
    cudaFree(c->logp);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t T, V;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "V", &V)) return 1;
    if (n_params != 0 || T < 1 || V < 1 || T > INT32_MAX || V > INT32_MAX) {
        fprintf(stderr, "softmax_xent reference: bad sizes T=%lld V=%lld\n", (long long)T, (long long)V);
        return 1;
    }
    xent_ctx *c = (xent_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->T = (int)T;
    c->V = (int)V;
    cudaError_t e = cudaMalloc(&c->row_max, sizeof(float) * (size_t)T);
    if (e == cudaSuccess) e = cudaMalloc(&c->row_sum, sizeof(float) * (size_t)T);
    if (e == cudaSuccess) e = cudaMalloc(&c->logp, sizeof(float) * (size_t)T * (size_t)V);
    if (e != cudaSuccess) {
        fprintf(stderr, "softmax_xent reference: cudaMalloc: %s\n", cudaGetErrorString(e));
        st_free(c);
        return 1;
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

    row_max_kernel<<<c->T, BLOCK, 0, stream>>>(x, c->row_max, c->V);
    CUDA_CHECK(cudaGetLastError());
    row_sum_kernel<<<c->T, BLOCK, 0, stream>>>(x, c->row_max, c->row_sum, c->V);
    CUDA_CHECK(cudaGetLastError());
    log_softmax_kernel<<<c->T, BLOCK, 0, stream>>>(x, c->row_max, c->row_sum, c->logp, c->V);
    CUDA_CHECK(cudaGetLastError());
    nll_kernel<<<(c->T + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(c->logp, targets, loss, c->T, c->V);
    CUDA_CHECK(cudaGetLastError());
    mean_kernel<<<1, BLOCK, 0, stream>>>(loss, mean, c->T);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
