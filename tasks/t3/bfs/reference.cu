/* Reference for t3/bfs: plain level-synchronous top-down BFS. Each level is one kernel over all n
 * vertices: a vertex on the current level writes level + 1 into every unvisited neighbour and
 * raises a flag; the host copies the flag back and stops after a level that changed nothing.
 * O(n * levels + edges) work and one round trip per level, obviously correct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "bfs reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int64_t n, nnz;
    int *d_changed; /* device flag: did this level discover anything */
    int *h_changed; /* pinned, so the copy back is a real async copy */
} bfs_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "bfs reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "bfs reference: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels

/* Outputs arrive poisoned: every level starts unvisited, except the source. The source lives in
 * device memory, so it is read here rather than copied to the host. */
__global__ void init_kernel(int *level, const int *source, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) level[v] = v == *source ? 0 : -1;
}

/* Writers of one level all store the same value (cur + 1) and readers only test for cur, so the
 * races between threads are harmless. */
__global__ void expand_kernel(const int *row_ptr, const int *col, int *level, int n, int cur,
                              int *changed) {
    int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n || level[u] != cur) return;
    for (int j = row_ptr[u]; j < row_ptr[u + 1]; j++) {
        int v = col[j];
        if (level[v] == -1) {
            level[v] = cur + 1;
            *changed = 1;
        }
    }
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    bfs_ctx *ctx = (bfs_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->d_changed);
    cudaFreeHost(ctx->h_changed);
    free(ctx);
}

static int init_ctx(bfs_ctx *ctx, const st_config *cfg, int32_t n_params) {
    int64_t deg;
    if (cfg_get(cfg, "n", &ctx->n) || cfg_get(cfg, "deg", &deg)) return 1;
    if (n_params != 0 || ctx->n < 1 || deg < 0 || ctx->n * deg > INT32_MAX) {
        fprintf(stderr, "bfs reference: bad sizes or params (n=%lld deg=%lld, %d params)\n",
                (long long)ctx->n, (long long)deg, n_params);
        return 1;
    }
    ctx->nnz = ctx->n * deg;
    CUDA_CHECK(cudaMalloc(&ctx->d_changed, sizeof(int)));
    CUDA_CHECK(cudaMallocHost(&ctx->h_changed, sizeof(int)));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    bfs_ctx *ctx = (bfs_ctx *)calloc(1, sizeof(bfs_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    bfs_ctx *ctx = (bfs_ctx *)p;
    if (n_in != 3 || n_out != 1) {
        fprintf(stderr, "bfs reference: expected 3 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_vec(&in[0], "row_ptr", ctx->n + 1) || check_vec(&in[1], "col_idx", ctx->nnz) ||
        check_vec(&in[2], "source", 1) || check_vec(&out[0], "level", ctx->n))
        return 1;
    const int *row_ptr = (const int *)in[0].data, *col = (const int *)in[1].data;
    const int *source = (const int *)in[2].data;
    int *level = (int *)out[0].data;
    const int n = (int)ctx->n, threads = 256, blocks = (n + threads - 1) / threads;

    init_kernel<<<blocks, threads, 0, stream>>>(level, source, n);
    CUDA_CHECK(cudaGetLastError());
    /* a level can add at most one to the depth, so n levels bound any search */
    for (int cur = 0; cur < n; cur++) {
        CUDA_CHECK(cudaMemsetAsync(ctx->d_changed, 0, sizeof(int), stream));
        expand_kernel<<<blocks, threads, 0, stream>>>(row_ptr, col, level, n, cur, ctx->d_changed);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(ctx->h_changed, ctx->d_changed, sizeof(int), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!*ctx->h_changed) break;
    }
    return 0;
}
