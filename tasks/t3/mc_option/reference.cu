/* Reference for t3/mc_option: Monte-Carlo prices of European calls under geometric Brownian motion,
 * as a plain port runs it: one thread per path draws its normal from cuRAND's Philox generator
 * (device API, its own subsequence per path), writes the payoff to a [n_opt, paths] array, and a
 * second kernel averages each option's payoffs in double (one block per option) and discounts. */
#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define SEED 0x5eed0f0b7105ull
#define THREADS 256

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mc_option reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int n;
    long long paths;
    float *pay; /* [n, paths] */
} mc_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mc_option reference: size '%s' missing from the config\n", name);
    return 1;
}

__global__ void payoff_kernel(const float *s0, const float *k, const float *r, const float *sigma, const float *t,
                              float *pay, long long paths, long long total) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int o = (int)(idx / paths);
    curandStatePhilox4_32_10_t state;
    curand_init(SEED, (unsigned long long)idx, 0, &state);
    const float z = curand_normal(&state);
    const float st = s0[o] * expf((r[o] - 0.5f * sigma[o] * sigma[o]) * t[o] + sigma[o] * sqrtf(t[o]) * z);
    pay[idx] = fmaxf(st - k[o], 0.0f);
}

__global__ void mean_kernel(const float *pay, const float *r, const float *t, float *price, long long paths) {
    __shared__ double buf[THREADS];
    const int o = blockIdx.x;
    double s = 0.0;
    for (long long i = threadIdx.x; i < paths; i += THREADS) s += pay[(long long)o * paths + i];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) price[o] = (float)(exp(-(double)r[o] * t[o]) * buf[0] / (double)paths);
}

extern "C" void st_free(void *p) {
    mc_ctx *c = (mc_ctx *)p;
    if (!c) return;
    cudaFree(c->pay);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, paths;
    if (cfg_get(cfg, "n_opt", &n) || cfg_get(cfg, "paths", &paths)) return 1;
    if (n_params != 0 || n < 1 || paths < 1 || n > INT32_MAX || n * paths > (int64_t)INT32_MAX * THREADS) {
        fprintf(stderr, "mc_option reference: bad sizes\n");
        return 1;
    }
    mc_ctx *c = (mc_ctx *)calloc(1, sizeof(mc_ctx));
    if (!c) return 1;
    c->n = (int)n;
    c->paths = paths;
    if (cudaMalloc(&c->pay, sizeof(float) * (size_t)n * (size_t)paths) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const mc_ctx *c = (const mc_ctx *)p;
    if (n_in != 5 || n_out != 1) return 1;
    for (int i = 0; i < 5; i++)
        if (in[i].dtype != ST_F32 || in[i].ndim != 1 || in[i].shape[0] != c->n || !in[i].data) return 1;
    if (out[0].dtype != ST_F32 || out[0].ndim != 1 || out[0].shape[0] != c->n || !out[0].data) return 1;
    const float *s0 = (const float *)in[0].data, *k = (const float *)in[1].data, *r = (const float *)in[2].data,
                *sigma = (const float *)in[3].data, *t = (const float *)in[4].data;
    const long long total = (long long)c->n * c->paths;
    payoff_kernel<<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0, stream>>>(s0, k, r, sigma, t, c->pay,
                                                                                     c->paths, total);
    CUDA_CHECK(cudaGetLastError());
    mean_kernel<<<c->n, THREADS, 0, stream>>>(c->pay, r, t, (float *)out[0].data, c->paths);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
