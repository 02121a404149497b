/* Expert for t3/bfs: direction-optimising BFS (Beamer, Asanovic, Patterson, SC 2012) on the GPU.
 * Small frontiers expand top-down from a queue: each warp takes 32 frontier vertices, walks long
 * rows with the whole warp and packs short rows into 32-wide batches through a warp scan, claims
 * neighbours with atomicCAS and appends them to the next queue with one atomic per warp. Once the
 * frontier's edges outnumber a fraction of the unvisited vertices' edges, levels go bottom-up:
 * every unvisited vertex scans its neighbours for one in the frontier bitmap and stops at the
 * first, so the big middle levels read a fraction of the edges with no atomics at all. Each level
 * costs one kernel and one 8-byte copy back (the next frontier's size and edge count, which pick
 * the next direction and launch size). All buffers are allocated in st_init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "bfs expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define THREADS 256
#define FULL_MASK 0xffffffffu
/* Beamer's switch points: go bottom-up when frontier edges > unvisited edges / ALPHA, back
 * top-down when the frontier has fewer than n / BETA vertices. */
#define ALPHA 14
#define BETA 24

/* What the host learns after each level: the size of the next frontier and its edge count. */
typedef struct {
    unsigned int count, edges;
} level_stats;

typedef struct {
    int64_t n, nnz;
    int n_words;             /* 32-bit words of a frontier bitmap */
    int *queue[2];           /* frontier vertex lists, n each; level L reads one, writes the other */
    unsigned int *bitmap[2]; /* frontier bitmaps for bottom-up levels, same ping-pong */
    level_stats *d_stats;    /* [2]: level L counts into L & 1 and clears the other for L + 1 */
    level_stats *h_stats;    /* pinned, so the copy back is a real async copy */
} bfs_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "bfs expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "bfs expert: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

// ----------------------------------------------------------------------------
// warp helpers

__device__ __forceinline__ unsigned int warp_sum(unsigned int x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(FULL_MASK, x, off);
    return x;
}

/* Append the lanes' `take` vertices to q with one atomic for the whole warp. All 32 lanes call. */
__device__ __forceinline__ void warp_append(bool take, int v, int *q, unsigned int *count) {
    const unsigned int mask = __ballot_sync(FULL_MASK, take);
    if (!mask) return;
    const int lane = threadIdx.x & 31;
    unsigned int base = 0;
    if (lane == 0) base = atomicAdd(count, (unsigned int)__popc(mask));
    base = __shfl_sync(FULL_MASK, base, 0);
    if (take) q[base + __popc(mask & ((1u << lane) - 1))] = v;
}

/* Top-down step for one neighbour v (-1: none): claim it for the next level, queue it, count its
 * edges. The plain read filters the common already-visited case before the atomic. All 32 lanes
 * call. */
__device__ __forceinline__ void visit(int v, int next_level, int *level, const int *row_ptr, int *q_out,
                                      level_stats *stats, unsigned int *edges) {
    const bool claimed = v >= 0 && level[v] == -1 && atomicCAS(&level[v], -1, next_level) == -1;
    if (claimed) *edges += row_ptr[v + 1] - row_ptr[v];
    warp_append(claimed, v, q_out, &stats->count);
}

// ----------------------------------------------------------------------------
// kernels

/* Outputs arrive poisoned: every level starts unvisited, except the source, which is read from
 * device memory here rather than copied to the host. An out-of-range source queues -1, which the
 * top-down kernel skips, so the result is all -1 instead of a stray write. */
__global__ void init_kernel(int *level, const int *source, int n, int *queue, level_stats *stats) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int src = *source;
    if (v < n) level[v] = v == src ? 0 : -1;
    if (v == 0) {
        queue[0] = src >= 0 && src < n ? src : -1;
        stats[0].count = stats[0].edges = 0;
    }
}

__global__ void __launch_bounds__(THREADS)
top_down_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                const int *q_in, int n_in, int *q_out, level_stats *stats, level_stats *stats_next,
                int next_level, int n) {
    const int lane = threadIdx.x & 31;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) stats_next->count = stats_next->edges = 0;
    const int u = i < n_in ? q_in[i] : -1;
    int beg = 0, end = 0;
    if (u >= 0 && u < n) { beg = row_ptr[u]; end = row_ptr[u + 1]; }
    unsigned int edges = 0;

    /* rows of 32 or more: the whole warp walks them, one at a time, with coalesced reads */
    unsigned int big;
    while ((big = __ballot_sync(FULL_MASK, end - beg >= 32))) {
        const int leader = __ffs(big) - 1;
        const int b = __shfl_sync(FULL_MASK, beg, leader), e = __shfl_sync(FULL_MASK, end, leader);
        if (lane == leader) beg = end;
        for (int j0 = b; j0 < e; j0 += 32) {
            const int j = j0 + lane;
            visit(j < e ? col[j] : -1, next_level, level, row_ptr, q_out, stats, &edges);
        }
    }

    /* the short rows left, concatenated: an exclusive scan of the degrees gives each lane's
     * offset, and batch position k belongs to the last lane whose offset is <= k */
    const int deg = end - beg;
    int incl = deg;
    for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(FULL_MASK, incl, off);
        if (lane >= off) incl += t;
    }
    const int excl = incl - deg;
    const int total = __shfl_sync(FULL_MASK, incl, 31);
    for (int base = 0; base < total; base += 32) {
        const int k = base + lane;
        int owner = 0;
        for (int step = 16; step > 0; step >>= 1)
            if (__shfl_sync(FULL_MASK, excl, owner + step) <= k) owner += step;
        const int ob = __shfl_sync(FULL_MASK, beg, owner), oe = __shfl_sync(FULL_MASK, excl, owner);
        visit(k < total ? col[ob + k - oe] : -1, next_level, level, row_ptr, q_out, stats, &edges);
    }

    edges = warp_sum(edges);
    if (lane == 0 && edges) atomicAdd(&stats->edges, edges);
}

/* One thread per vertex, so a warp owns one whole word of the next bitmap and writes it without
 * atomics (and without clearing it first). Only thread v writes level[v]; the frontier is read
 * from the bitmap, so there are no races at all. */
__global__ void __launch_bounds__(THREADS)
bottom_up_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                 const unsigned int *__restrict__ frontier, unsigned int *next_frontier, int *q_out,
                 level_stats *stats, level_stats *stats_next, int cur_level, int n, int n_words) {
    const int lane = threadIdx.x & 31;
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v == 0) stats_next->count = stats_next->edges = 0;
    bool found = false;
    unsigned int edges = 0;
    if (v < n && level[v] == -1) {
        const int b = row_ptr[v], e = row_ptr[v + 1];
        for (int j = b; j < e; j++) {
            const int w = col[j];
            if (frontier[w >> 5] & (1u << (w & 31))) { found = true; break; }
        }
        if (found) {
            level[v] = cur_level + 1;
            edges = e - b;
        }
    }
    const unsigned int mask = __ballot_sync(FULL_MASK, found);
    if (lane == 0 && (v >> 5) < n_words) next_frontier[v >> 5] = mask;
    warp_append(found, v, q_out, &stats->count);
    edges = warp_sum(edges);
    if (lane == 0 && edges) atomicAdd(&stats->edges, edges);
}

/* The frontier as a bitmap, for the first bottom-up level after top-down ones. */
__global__ void __launch_bounds__(THREADS)
level_bitmap_kernel(const int *level, int cur_level, unsigned int *bitmap, int n, int n_words) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int mask = __ballot_sync(FULL_MASK, v < n && level[v] == cur_level);
    if ((threadIdx.x & 31) == 0 && (v >> 5) < n_words) bitmap[v >> 5] = mask;
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    bfs_ctx *ctx = (bfs_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    for (int i = 0; i < 2; i++) {
        cudaFree(ctx->queue[i]);
        cudaFree(ctx->bitmap[i]);
    }
    cudaFree(ctx->d_stats);
    cudaFreeHost(ctx->h_stats);
    free(ctx);
}

static int init_ctx(bfs_ctx *ctx, const st_config *cfg, int32_t n_params) {
    int64_t deg;
    if (cfg_get(cfg, "n", &ctx->n) || cfg_get(cfg, "deg", &deg)) return 1;
    /* counts are 32-bit on the device; the grid must cover n threads */
    if (n_params != 0 || ctx->n < 1 || deg < 0 || ctx->n * deg > INT32_MAX || ctx->n > INT32_MAX - THREADS) {
        fprintf(stderr, "bfs expert: bad sizes or params (n=%lld deg=%lld, %d params)\n",
                (long long)ctx->n, (long long)deg, n_params);
        return 1;
    }
    ctx->nnz = ctx->n * deg;
    ctx->n_words = (int)((ctx->n + 31) / 32);
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMalloc(&ctx->queue[i], (size_t)ctx->n * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&ctx->bitmap[i], (size_t)ctx->n_words * sizeof(unsigned int)));
    }
    CUDA_CHECK(cudaMalloc(&ctx->d_stats, 2 * sizeof(level_stats)));
    CUDA_CHECK(cudaMallocHost(&ctx->h_stats, sizeof(level_stats)));
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
        fprintf(stderr, "bfs expert: expected 3 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_vec(&in[0], "row_ptr", ctx->n + 1) || check_vec(&in[1], "col_idx", ctx->nnz) ||
        check_vec(&in[2], "source", 1) || check_vec(&out[0], "level", ctx->n))
        return 1;
    const int *row_ptr = (const int *)in[0].data, *col = (const int *)in[1].data;
    int *level = (int *)out[0].data;
    const int n = (int)ctx->n, all_blocks = (n + THREADS - 1) / THREADS;

    init_kernel<<<all_blocks, THREADS, 0, stream>>>(level, (const int *)in[2].data, n, ctx->queue[0], ctx->d_stats);
    CUDA_CHECK(cudaGetLastError());

    /* the frontier of level `lvl` is queue[cur] (and bitmap[cur] while bottom-up) */
    unsigned int frontier = 1;                  /* vertices on the current level */
    int64_t frontier_edges = 0;                 /* their edges; the source's are not worth a copy */
    int64_t unvisited_edges = ctx->nnz;
    bool bottom_up = false;
    int cur = 0;
    for (int lvl = 0; frontier > 0 && lvl < n; lvl++, cur ^= 1) {
        if (!bottom_up && frontier_edges > unvisited_edges / ALPHA) {
            bottom_up = true;
            level_bitmap_kernel<<<all_blocks, THREADS, 0, stream>>>(level, lvl, ctx->bitmap[cur], n, ctx->n_words);
            CUDA_CHECK(cudaGetLastError());
        } else if (bottom_up && frontier < (unsigned int)(n / BETA)) {
            bottom_up = false; /* the bottom-up kernel queued this frontier too */
        }
        level_stats *stats = ctx->d_stats + (lvl & 1), *stats_next = ctx->d_stats + ((lvl + 1) & 1);
        if (bottom_up) {
            bottom_up_kernel<<<all_blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->bitmap[cur],
                ctx->bitmap[cur ^ 1], ctx->queue[cur ^ 1], stats, stats_next, lvl, n, ctx->n_words);
        } else {
            const int blocks = (int)((frontier + THREADS - 1) / THREADS);
            top_down_kernel<<<blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->queue[cur], (int)frontier,
                ctx->queue[cur ^ 1], stats, stats_next, lvl + 1, n);
        }
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(ctx->h_stats, stats, sizeof(level_stats), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        frontier = ctx->h_stats->count;
        frontier_edges = ctx->h_stats->edges;
        unvisited_edges -= frontier_edges;
    }
    return 0;
}
