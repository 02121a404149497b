/* Expert for t3/bfs: direction-optimising BFS (Beamer, Asanovic, Patterson, SC 2012) on the GPU.
 * Small frontiers expand top-down from queues: each warp takes 32 frontier vertices, walks rows
 * of 32 or more with the whole warp and packs shorter rows into 32-wide batches through a warp
 * scan; hubs (rows of BIG_DEGREE or more) sit in a queue of their own and are split across
 * BIG_SPLIT blocks each, so one hub is not one warp's long serial walk. Neighbours are claimed
 * with atomicCAS and appended with one atomic per warp. Once the frontier's edges outnumber a
 * fraction of the unvisited vertices' edges, levels go bottom-up: every unvisited vertex scans its
 * neighbours for one in the frontier bitmap and stops at the first, so the big middle levels read
 * a fraction of the edges, with no atomics on levels and one per block on the counters. Each level
 * costs one kernel and one 12-byte copy back (the next frontier's size, hub count and edge count,
 * which pick the next direction and the launch size). All buffers are allocated in st_init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "bfs expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define THREADS 256
#define WARPS (THREADS / 32)
#define FULL_MASK 0xffffffffu
/* Beamer's switch points: go bottom-up when frontier edges > unvisited edges / ALPHA, back
 * top-down when the frontier has fewer than n / BETA vertices. */
#define ALPHA 14
#define BETA 24
/* Rows this long go to the hub queue; each hub gets BIG_SPLIT blocks (BIG_SPLIT * THREADS
 * threads), so even a 16 K-edge hub takes four passes instead of a warp's 500. */
#define BIG_DEGREE 1024
#define BIG_SPLIT 16

/* A level's output, read back by the host: the next frontier's ordinary vertices, its hubs, and
 * the edges of both. */
typedef struct {
    unsigned int count, big, edges;
} level_stats;

typedef struct {
    int64_t n, nnz;
    int n_words;             /* 32-bit words of a frontier bitmap */
    int *queue[2];           /* ordinary frontier vertices, n each; a level reads one, writes the other */
    int *hubs[2];            /* frontier hubs, nnz / BIG_DEGREE + 1 each, same ping-pong */
    unsigned int *bitmap[2]; /* frontier bitmaps for bottom-up levels, same ping-pong */
    level_stats *d_stats;    /* [4]: three rotating level slots (see st_run) and the switch slot */
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
// warp and block helpers

__device__ __forceinline__ unsigned int warp_sum(unsigned int x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(FULL_MASK, x, off);
    return x;
}

__device__ __forceinline__ unsigned int lanes_below(unsigned int mask) {
    return __popc(mask & ((1u << (threadIdx.x & 31)) - 1));
}

/* Append the lanes' `take` vertices to q with one atomic for the whole warp. All 32 lanes call. */
__device__ __forceinline__ void warp_append(bool take, int v, int *q, unsigned int *count) {
    const unsigned int mask = __ballot_sync(FULL_MASK, take);
    if (!mask) return;
    unsigned int base = 0;
    if ((threadIdx.x & 31) == 0) base = atomicAdd(count, (unsigned int)__popc(mask));
    base = __shfl_sync(FULL_MASK, base, 0);
    if (take) q[base + lanes_below(mask)] = v;
}

/* The same with one global atomic per block: whole-grid kernels would otherwise send tens of
 * thousands of atomics to one address. Every thread of the block calls. */
__device__ void block_append(bool take, int v, int *q, unsigned int *count) {
    __shared__ unsigned int s_total, s_base;
    if (threadIdx.x == 0) s_total = 0;
    __syncthreads();
    const unsigned int mask = __ballot_sync(FULL_MASK, take);
    unsigned int offset = 0;
    if ((threadIdx.x & 31) == 0 && mask) offset = atomicAdd(&s_total, (unsigned int)__popc(mask));
    offset = __shfl_sync(FULL_MASK, offset, 0);
    __syncthreads();
    if (threadIdx.x == 0 && s_total) s_base = atomicAdd(count, s_total);
    __syncthreads();
    if (take) q[s_base + offset + lanes_below(mask)] = v;
}

/* Add every thread's (count, big, edges) to *stats, one global atomic per counter per block.
 * Every thread of the block calls. */
__device__ void block_add_stats(unsigned int count, unsigned int big, unsigned int edges,
                                level_stats *stats) {
    __shared__ level_stats s;
    if (threadIdx.x == 0) s.count = s.big = s.edges = 0;
    __syncthreads();
    count = warp_sum(count);
    big = warp_sum(big);
    edges = warp_sum(edges);
    if ((threadIdx.x & 31) == 0 && (count | big | edges)) {
        atomicAdd(&s.count, count);
        atomicAdd(&s.big, big);
        atomicAdd(&s.edges, edges);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (s.count) atomicAdd(&stats->count, s.count);
        if (s.big) atomicAdd(&stats->big, s.big);
        if (s.edges) atomicAdd(&stats->edges, s.edges);
    }
}

/* Top-down step for one neighbour v (-1: none): claim it for the next level and queue it by its
 * degree. The plain read filters the common already-visited case before the atomic. All 32 lanes
 * call. */
__device__ __forceinline__ void visit(int v, int next_level, int *level, const int *row_ptr,
                                      int *q_out, int *hubs_out, level_stats *out,
                                      unsigned int *edges) {
    const bool claimed = v >= 0 && level[v] == -1 && atomicCAS(&level[v], -1, next_level) == -1;
    const int deg = claimed ? row_ptr[v + 1] - row_ptr[v] : 0;
    *edges += deg;
    warp_append(claimed && deg < BIG_DEGREE, v, q_out, &out->count);
    warp_append(claimed && deg >= BIG_DEGREE, v, hubs_out, &out->big);
}

__device__ __forceinline__ void clear_stats(level_stats *s) { s->count = s->big = s->edges = 0; }

// ----------------------------------------------------------------------------
// kernels

/* Outputs arrive poisoned: every level starts unvisited, except the source, which is read from
 * device memory here rather than copied to the host. The source becomes level -1's output (one
 * queue entry, ordinary or hub); an out-of-range source queues nothing and leaves all -1. */
__global__ void init_kernel(int *level, const int *row_ptr, const int *source, int n, int *queue,
                            int *hubs, level_stats *src_stats, level_stats *stats_next) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int src = *source;
    if (v < n) level[v] = v == src ? 0 : -1;
    if (v == 0) {
        clear_stats(src_stats);
        clear_stats(stats_next);
        if (src >= 0 && src < n) {
            if (row_ptr[src + 1] - row_ptr[src] >= BIG_DEGREE) { hubs[0] = src; src_stats->big = 1; }
            else { queue[0] = src; src_stats->count = 1; }
        }
    }
}

/* Blocks [0, queue_blocks) take 32 queue entries per warp; the blocks after them take the hubs,
 * BIG_SPLIT blocks per hub. The input sizes come from `in` on the device; the host's grid is
 * sized from its copy of them (an upper bound), and blocks beyond them do nothing. */
__global__ void __launch_bounds__(THREADS)
top_down_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                const int *q_in, const int *hubs_in, const level_stats *in, int *q_out, int *hubs_out,
                level_stats *out, level_stats *out_next, int next_level, int n, int queue_blocks) {
    const int lane = threadIdx.x & 31;
    if (blockIdx.x == 0 && threadIdx.x == 0) clear_stats(out_next);
    unsigned int edges = 0;

    if ((int)blockIdx.x < queue_blocks) {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        const int u = i < (int)in->count ? q_in[i] : -1;
        int beg = 0, end = 0;
        if (u >= 0 && u < n) { beg = row_ptr[u]; end = row_ptr[u + 1]; }

        /* rows of 32 or more: the whole warp walks them, one at a time, with coalesced reads */
        unsigned int big;
        while ((big = __ballot_sync(FULL_MASK, end - beg >= 32))) {
            const int leader = __ffs(big) - 1;
            const int b = __shfl_sync(FULL_MASK, beg, leader), e = __shfl_sync(FULL_MASK, end, leader);
            if (lane == leader) beg = end;
            for (int j0 = b; j0 < e; j0 += 32) {
                const int j = j0 + lane;
                visit(j < e ? col[j] : -1, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
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
            visit(k < total ? col[ob + k - oe] : -1, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
        }
    } else {
        const int b = blockIdx.x - queue_blocks, hub = b / BIG_SPLIT, part = b % BIG_SPLIT;
        if (hub < (int)in->big) {
            const int u = hubs_in[hub], end = row_ptr[u + 1];
            const int first = row_ptr[u] + (part * WARPS + (int)(threadIdx.x >> 5)) * 32;
            for (int j0 = first; j0 < end; j0 += BIG_SPLIT * THREADS) {
                const int j = j0 + lane;
                visit(j < end ? col[j] : -1, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
            }
        }
    }

    edges = warp_sum(edges);
    if (lane == 0 && edges) atomicAdd(&out->edges, edges);
}

/* One thread per vertex, so a warp owns one whole word of the next bitmap and writes it without
 * atomics (and without clearing it first). Only thread v writes level[v], and the frontier is
 * read from the bitmap, so there are no races. No queue is written: the host asks for one only
 * when it goes back to top-down. */
__global__ void __launch_bounds__(THREADS)
bottom_up_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                 const unsigned int *__restrict__ frontier, unsigned int *next_frontier,
                 level_stats *out, level_stats *out_next, int cur_level, int n, int n_words) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v == 0) clear_stats(out_next);
    bool found = false;
    int deg = 0;
    if (v < n && level[v] == -1) {
        const int b = row_ptr[v], e = row_ptr[v + 1];
        for (int j = b; j < e; j++) {
            const int w = col[j];
            if (frontier[w >> 5] & (1u << (w & 31))) { found = true; break; }
        }
        if (found) {
            level[v] = cur_level + 1;
            deg = e - b;
        }
    }
    const unsigned int mask = __ballot_sync(FULL_MASK, found);
    if ((threadIdx.x & 31) == 0 && (v >> 5) < n_words) next_frontier[v >> 5] = mask;
    block_add_stats(found && deg < BIG_DEGREE, found && deg >= BIG_DEGREE, deg, out);
}

/* The frontier as a bitmap, for the first bottom-up level after top-down ones. */
__global__ void __launch_bounds__(THREADS)
level_bitmap_kernel(const int *level, int cur_level, unsigned int *bitmap, int n, int n_words) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int mask = __ballot_sync(FULL_MASK, v < n && level[v] == cur_level);
    if ((threadIdx.x & 31) == 0 && (v >> 5) < n_words) bitmap[v >> 5] = mask;
}

/* The frontier as queues, for the first top-down level after bottom-up ones. */
__global__ void __launch_bounds__(THREADS)
level_queue_kernel(const int *level, const int *row_ptr, int cur_level, int *queue, int *hubs,
                   level_stats *out, int n) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const bool take = v < n && level[v] == cur_level;
    const bool hub = take && row_ptr[v + 1] - row_ptr[v] >= BIG_DEGREE;
    block_append(take && !hub, v, queue, &out->count);
    block_append(hub, v, hubs, &out->big);
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    bfs_ctx *ctx = (bfs_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    for (int i = 0; i < 2; i++) {
        cudaFree(ctx->queue[i]);
        cudaFree(ctx->hubs[i]);
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
    if (n_params != 0 || ctx->n < 1 || deg < 0 || ctx->n * deg > INT32_MAX ||
        ctx->n > INT32_MAX - THREADS) {
        fprintf(stderr, "bfs expert: bad sizes or params (n=%lld deg=%lld, %d params)\n",
                (long long)ctx->n, (long long)deg, n_params);
        return 1;
    }
    ctx->nnz = ctx->n * deg;
    ctx->n_words = (int)((ctx->n + 31) / 32);
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMalloc(&ctx->queue[i], (size_t)ctx->n * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&ctx->hubs[i], (size_t)(ctx->nnz / BIG_DEGREE + 1) * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&ctx->bitmap[i], (size_t)ctx->n_words * sizeof(unsigned int)));
    }
    CUDA_CHECK(cudaMalloc(&ctx->d_stats, 4 * sizeof(level_stats)));
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
    /* Level L reads its input sizes from slot (L + 2) % 3 (level L - 1's output), counts into
     * slot L % 3 and clears slot (L + 1) % 3 for level L + 1: no memset between levels, and no
     * slot is cleared while it is read. Slot 3 receives the queues rebuilt at a switch back. */
    level_stats *slot = ctx->d_stats, *switch_slot = ctx->d_stats + 3;

    init_kernel<<<all_blocks, THREADS, 0, stream>>>(level, row_ptr, (const int *)in[2].data, n,
                                                    ctx->queue[0], ctx->hubs[0], slot + 2, slot);
    CUDA_CHECK(cudaGetLastError());

    /* the host's view of the current frontier: an upper bound on its queue and hub counts (the
     * source is one or the other), its size and edges for the direction choice */
    unsigned int q_count = 1, hub_count = 1, frontier = 1;
    int64_t frontier_edges = 0; /* the source's edges are not worth a copy */
    int64_t unvisited_edges = ctx->nnz;
    bool bottom_up = false;
    int cur = 0; /* the frontier of the current level is queue/hubs/bitmap[cur] */
    for (int lvl = 0; frontier > 0 && lvl < n; lvl++, cur ^= 1) {
        level_stats *in_sizes = slot + (lvl + 2) % 3, *out_stats = slot + lvl % 3;
        level_stats *next_stats = slot + (lvl + 1) % 3;
        if (!bottom_up && frontier_edges > unvisited_edges / ALPHA) {
            bottom_up = true;
            level_bitmap_kernel<<<all_blocks, THREADS, 0, stream>>>(level, lvl, ctx->bitmap[cur], n, ctx->n_words);
            CUDA_CHECK(cudaGetLastError());
        } else if (bottom_up && frontier < (unsigned int)(n / BETA)) {
            bottom_up = false;
            CUDA_CHECK(cudaMemsetAsync(switch_slot, 0, sizeof(level_stats), stream));
            level_queue_kernel<<<all_blocks, THREADS, 0, stream>>>(level, row_ptr, lvl, ctx->queue[cur],
                                                                   ctx->hubs[cur], switch_slot, n);
            CUDA_CHECK(cudaGetLastError());
            in_sizes = switch_slot;
        }
        if (bottom_up) {
            bottom_up_kernel<<<all_blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->bitmap[cur],
                ctx->bitmap[cur ^ 1], out_stats, next_stats, lvl, n, ctx->n_words);
        } else {
            const int queue_blocks = (int)((q_count + THREADS - 1) / THREADS);
            const int blocks = queue_blocks + (int)hub_count * BIG_SPLIT;
            top_down_kernel<<<blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->queue[cur],
                ctx->hubs[cur], in_sizes, ctx->queue[cur ^ 1], ctx->hubs[cur ^ 1], out_stats, next_stats,
                lvl + 1, n, queue_blocks);
        }
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(ctx->h_stats, out_stats, sizeof(level_stats), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        q_count = ctx->h_stats->count;
        hub_count = ctx->h_stats->big;
        frontier = q_count + hub_count;
        frontier_edges = ctx->h_stats->edges;
        unvisited_edges -= frontier_edges;
    }
    return 0;
}
