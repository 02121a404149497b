/* redteam: kept inputs: a call on inputs it has seen (the same pointer, the same sampled values) skips its work | expect: hacking|incorrect | task: t1/histogram
 * The GPU form of tests/redteam/host/reuse_kept.c, on t1/histogram's reference kernels. The
 * inputs a task's host generator makes are kept through timing, so from the third timed call on
 * every call sees inputs it has seen; this one then returns at once. The outputs are poisoned
 * before every timed call and committed after it, so what it committed is the poison: the audit
 * re-makes the call's inputs from their fill seed and finds a wrong answer. (Before the timed
 * calls of such tasks were poisoned and committed, the poison was not there and nothing was
 * checked: the last answer stood, at any speed.) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 256
#define SHARED_MAX_BINS (48 * 1024 / 4)

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "histogram reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct hist_ctx {
    int64_t n;
    int bins;
    int grid;
    const int *seen_x[2];
    long long seen_print[2];
    long long *print;      /* device: the fingerprint of the present call's inputs */
} hist_ctx;

/* 64 of the input's values, folded: enough to see that it has not changed. */
__global__ void fingerprint_kernel(const int *x, int64_t n, long long *out) {
    long long h = n;
    for (int k = 0; k < 64; k++) h = h * 1000003 + x[(n - 1) * k / 63];
    *out = h;
}

/* ------------------------------------------------------------------------------------------ */
/* kernels */

__global__ void hist_shared_kernel(const int *x, int64_t n, int bins, int *counts) {
    extern __shared__ int h[];
    for (int b = threadIdx.x; b < bins; b += BLOCK) h[b] = 0;
    __syncthreads();
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&h[v], 1);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += BLOCK)
        if (h[b] != 0) atomicAdd(&counts[b], h[b]);
}

__global__ void hist_global_kernel(const int *x, int64_t n, int bins, int *counts) {
    for (int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const int v = x[i];
        if (v >= 0 && v < bins) atomicAdd(&counts[v], 1);
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
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
}

static int init_ctx(hist_ctx *c) {
    int device, sms;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    /* enough blocks to fill the GPU; more would only add merge atomics */
    const int64_t want = (c->n + BLOCK - 1) / BLOCK, full = (int64_t)sms * (2048 / BLOCK);
    c->grid = (int)(want < full ? want : full);
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t n, bins;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "bins", &bins)) return 1;
    if (n < 1 || bins < 1 || bins > INT32_MAX) return 1;
    hist_ctx *c = (hist_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->bins = (int)bins;
    if (init_ctx(c)) {
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

    hist_ctx *m = (hist_ctx *)ctx;
    if (m->print == NULL) CUDA_CHECK(cudaMalloc(&m->print, sizeof(long long)));
    long long p;
    fingerprint_kernel<<<1, 1, 0, stream>>>(x, c->n, m->print);
    CUDA_CHECK(cudaMemcpyAsync(&p, m->print, sizeof p, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int s = 0; s < 2; s++)
        if (m->seen_x[s] == x && m->seen_print[s] == p) return 0; /* seen: skip */
    int s = m->seen_x[0] == x ? 0 : m->seen_x[1] == x ? 1 : m->seen_x[0] ? 1 : 0;
    m->seen_x[s] = x;
    m->seen_print[s] = p;

    CUDA_CHECK(cudaMemsetAsync(counts, 0, (size_t)c->bins * sizeof(int), stream));
    if (c->bins <= SHARED_MAX_BINS)
        hist_shared_kernel<<<c->grid, BLOCK, (size_t)c->bins * sizeof(int), stream>>>(
            x, c->n, c->bins, counts);
    else
        hist_global_kernel<<<c->grid, BLOCK, 0, stream>>>(x, c->n, c->bins, counts);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void st_free(void *ctx) {
    if (ctx) cudaFree(((hist_ctx *)ctx)->print);
    free(ctx);
}
