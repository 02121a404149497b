/* Expert for t3/bfs: direction-optimising BFS (Beamer, Asanovic, Patterson, SC 2012) on the GPU.
 * Small frontiers expand top-down from queues. Ordinary vertices are dealt out a few per warp (as
 * few as it takes to give each warp about two 32-wide batches of edges); a warp walks rows of 32
 * or more with all lanes and packs shorter rows into 32-wide batches through a warp scan. Hubs
 * (rows of HUB_DEGREE or more) are cut into items of CHUNK edges, one warp each, so no warp walks
 * a long row alone. Neighbours are claimed with atomicCAS and appended with one atomic per warp.
 * Once the frontier's edges outnumber a fraction of the unvisited vertices' edges, levels go
 * bottom-up: every unvisited vertex scans its neighbours for one in the frontier bitmap and stops
 * at the first, so the big middle levels read a fraction of the edges, with no atomics on levels.
 * While most vertices are unvisited, 8 lanes scan each row together, one 32-byte sector per step.
 * Each level costs one kernel and one 12-byte copy back (the next frontier's size, hub items and
 * edges, which pick the direction and the launch size). All buffers are allocated in st_init. */
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
/* Rows this long go to the hub queue as items of CHUNK edges (at most 8 warp-wide steps each). */
#define HUB_DEGREE 256
#define CHUNK 256
/* Hub items are taken grid-stride by at most this many blocks. */
#define MAX_HUB_BLOCKS 1024
/* Lanes per vertex in bottom-up levels while at least 1 / WIDE_FRACTION of the vertices are
 * unvisited: 8 consecutive int32 neighbours are one 32-byte sector. */
#define WIDE 8
#define WIDE_FRACTION 8

/* A level's output, read back by the host: the next frontier's ordinary vertices, its hub items,
 * and the edges of the whole frontier. */
typedef struct {
    unsigned int count, items, edges;
} level_stats;

typedef struct {
    int v, chunk; /* edges row_ptr[v] + chunk * CHUNK onwards, at most CHUNK of them */
} hub_item;

typedef struct {
    int64_t n, nnz;
    int n_words;             /* 32-bit words of a frontier bitmap */
    int64_t max_items;       /* hub items a frontier can hold */
    int *queue[2];           /* ordinary frontier vertices, n each; a level reads one, writes the other */
    hub_item *hubs[2];       /* frontier hub items, max_items each, same ping-pong */
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

/* Append each `hub` lane's row as ceil(deg / CHUNK) items, one atomic for the whole warp. All 32
 * lanes call. */
__device__ __forceinline__ void warp_append_hub(bool hub, int v, int deg, hub_item *items,
                                                unsigned int *count) {
    if (!__ballot_sync(FULL_MASK, hub)) return;
    const int lane = threadIdx.x & 31, k = hub ? (deg + CHUNK - 1) / CHUNK : 0;
    int incl = k;
    for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(FULL_MASK, incl, off);
        if (lane >= off) incl += t;
    }
    unsigned int base = 0;
    if (lane == 31) base = atomicAdd(count, (unsigned int)incl);
    base = __shfl_sync(FULL_MASK, base, 31);
    for (int c = 0; c < k; c++) items[base + incl - k + c] = {v, c};
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

/* Add every thread's (count, items, edges) to *stats, one global atomic per counter per block.
 * Every thread of the block calls. */
__device__ void block_add_stats(unsigned int count, unsigned int items, unsigned int edges,
                                level_stats *stats) {
    __shared__ level_stats s;
    if (threadIdx.x == 0) s.count = s.items = s.edges = 0;
    __syncthreads();
    count = warp_sum(count);
    items = warp_sum(items);
    edges = warp_sum(edges);
    if ((threadIdx.x & 31) == 0 && (count | items | edges)) {
        atomicAdd(&s.count, count);
        atomicAdd(&s.items, items);
        atomicAdd(&s.edges, edges);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (s.count) atomicAdd(&stats->count, s.count);
        if (s.items) atomicAdd(&stats->items, s.items);
        if (s.edges) atomicAdd(&stats->edges, s.edges);
    }
}

/* Top-down step for one neighbour v (-1: none): claim it for the next level and queue it by its
 * degree. The plain read filters the common already-visited case before the atomic. All 32 lanes
 * call. */
__device__ __forceinline__ void visit(int v, int next_level, int *level, const int *row_ptr,
                                      int *q_out, hub_item *hubs_out, level_stats *out,
                                      unsigned int *edges) {
    const bool claimed = v >= 0 && level[v] == -1 && atomicCAS(&level[v], -1, next_level) == -1;
    const int deg = claimed ? row_ptr[v + 1] - row_ptr[v] : 0;
    *edges += deg;
    warp_append(claimed && deg < HUB_DEGREE, v, q_out, &out->count);
    warp_append_hub(claimed && deg >= HUB_DEGREE, v, deg, hubs_out, &out->items);
}

/* Walk edges [b, e) with the whole warp, 32 at a time. b and e are the same in every lane. */
__device__ __forceinline__ void warp_walk(int b, int e, const int *col, int next_level, int *level,
                                          const int *row_ptr, int *q_out, hub_item *hubs_out,
                                          level_stats *out, unsigned int *edges) {
    for (int j0 = b; j0 < e; j0 += 32) {
        const int j = j0 + (int)(threadIdx.x & 31);
        visit(j < e ? col[j] : -1, next_level, level, row_ptr, q_out, hubs_out, out, edges);
    }
}

__device__ __forceinline__ void clear_stats(level_stats *s) { s->count = s->items = s->edges = 0; }

// ----------------------------------------------------------------------------
// kernels

/* Outputs arrive poisoned: every level starts unvisited, except the source, which is read from
 * device memory here rather than copied to the host. The source becomes level -1's output (a
 * queue entry, or a hub's items); an out-of-range source queues nothing and leaves all -1. */
__global__ void init_kernel(int *level, const int *row_ptr, const int *source, int n, int *queue,
                            hub_item *hubs, level_stats *src_stats, level_stats *stats_next) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int src = *source;
    if (v < n) level[v] = v == src ? 0 : -1;
    if (v == 0) {
        clear_stats(src_stats);
        clear_stats(stats_next);
        if (src >= 0 && src < n) {
            const int deg = row_ptr[src + 1] - row_ptr[src];
            if (deg < HUB_DEGREE) {
                queue[0] = src;
                src_stats->count = 1;
            } else {
                for (int c = 0; c * CHUNK < deg; c++) hubs[c] = {src, c};
                src_stats->items = (deg + CHUNK - 1) / CHUNK;
            }
        }
    }
}

/* Blocks [0, queue_blocks) deal out the queue, per_warp entries to a warp; the blocks after them
 * take the hub items grid-stride, one warp per item. The input sizes come from `in` on the
 * device; the host sizes the grid from its copy of them (an upper bound), and warps beyond them
 * find nothing to do. */
__global__ void __launch_bounds__(THREADS)
top_down_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                const int *q_in, const hub_item *hubs_in, const level_stats *in, int *q_out,
                hub_item *hubs_out, level_stats *out, level_stats *out_next, int next_level, int n,
                int queue_blocks, int per_warp) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (blockIdx.x == 0 && threadIdx.x == 0) clear_stats(out_next);
    unsigned int edges = 0;

    if ((int)blockIdx.x < queue_blocks) {
        const int i = (blockIdx.x * WARPS + warp) * per_warp + lane;
        const int u = lane < per_warp && i < (int)in->count ? q_in[i] : -1;
        int beg = 0, end = 0;
        if (u >= 0 && u < n) { beg = row_ptr[u]; end = row_ptr[u + 1]; }

        /* rows of 32 or more (below HUB_DEGREE): the whole warp walks them, one at a time */
        unsigned int long_rows;
        while ((long_rows = __ballot_sync(FULL_MASK, end - beg >= 32))) {
            const int leader = __ffs(long_rows) - 1;
            const int b = __shfl_sync(FULL_MASK, beg, leader), e = __shfl_sync(FULL_MASK, end, leader);
            if (lane == leader) beg = end;
            warp_walk(b, e, col, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
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
        const int first = (blockIdx.x - queue_blocks) * WARPS + warp;
        const int stride = (gridDim.x - queue_blocks) * WARPS;
        for (int it = first; it < (int)in->items; it += stride) {
            const hub_item h = hubs_in[it];
            const int b = row_ptr[h.v] + h.chunk * CHUNK, e = min(row_ptr[h.v + 1], b + CHUNK);
            warp_walk(b, e, col, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
        }
    }

    edges = warp_sum(edges);
    if (lane == 0 && edges) atomicAdd(&out->edges, edges);
}

/* G lanes per vertex: each step the group tests G consecutive neighbours against the frontier
 * bitmap and stops at the first hit. Only the group's first lane writes level[v], and the
 * frontier is read from the bitmap, so there are no races. A block covers THREADS / G vertices,
 * whole words of the next bitmap, which it assembles in shared memory and writes without atomics
 * (and without clearing it first). No queue is written: the host asks for one only when it goes
 * back to top-down. */
template <int G>
__global__ void __launch_bounds__(THREADS)
bottom_up_kernel(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                 const unsigned int *__restrict__ frontier, unsigned int *next_frontier,
                 level_stats *out, level_stats *out_next, int cur_level, int n, int n_words) {
    constexpr int PER_BLOCK = THREADS / G, WORDS = PER_BLOCK / 32;
    static_assert(PER_BLOCK % 32 == 0, "a block must cover whole bitmap words");
    __shared__ unsigned int s_words[WORDS];
    const int lane = threadIdx.x & 31, sub = threadIdx.x % G, slot = threadIdx.x / G;
    const int v = blockIdx.x * PER_BLOCK + slot;
    const unsigned int group = (G == 32 ? FULL_MASK : (1u << G) - 1) << (lane / G * G);
    if (blockIdx.x == 0 && threadIdx.x == 0) clear_stats(out_next);
    if (threadIdx.x < WORDS) s_words[threadIdx.x] = 0;

    bool searching = v < n && level[v] == -1, found = false;
    int b = 0, e = 0;
    if (searching) { b = row_ptr[v]; e = row_ptr[v + 1]; }
    for (int j0 = b; __any_sync(FULL_MASK, searching); j0 += G) {
        const int j = j0 + sub;
        int w = 0;
        if (searching && j < e) w = col[j];
        const bool hit = searching && j < e && (frontier[w >> 5] >> (w & 31) & 1u);
        const unsigned int hits = __ballot_sync(FULL_MASK, hit) & group;
        if (searching && (hits || j0 + G >= e)) {
            found = hits != 0;
            searching = false;
        }
    }
    __syncthreads();
    const bool first = sub == 0 && found;
    if (first) {
        level[v] = cur_level + 1;
        atomicOr(&s_words[slot >> 5], 1u << (slot & 31));
    }
    __syncthreads();
    const int word = blockIdx.x * WORDS + threadIdx.x;
    if (threadIdx.x < WORDS && word < n_words) next_frontier[word] = s_words[threadIdx.x];
    const int deg = first ? e - b : 0;
    block_add_stats(first && deg < HUB_DEGREE, deg >= HUB_DEGREE ? (deg + CHUNK - 1) / CHUNK : 0, deg, out);
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
level_queue_kernel(const int *level, const int *row_ptr, int cur_level, int *queue, hub_item *hubs,
                   level_stats *out, int n) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const bool take = v < n && level[v] == cur_level;
    const int deg = take ? row_ptr[v + 1] - row_ptr[v] : 0;
    block_append(take && deg < HUB_DEGREE, v, queue, &out->count);
    warp_append_hub(take && deg >= HUB_DEGREE, v, deg, hubs, &out->items);
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
    /* a hub of degree d >= HUB_DEGREE makes ceil(d / CHUNK) <= d / CHUNK + 1 items */
    ctx->max_items = ctx->nnz / CHUNK + ctx->nnz / HUB_DEGREE + 1;
    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMalloc(&ctx->queue[i], (size_t)ctx->n * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&ctx->hubs[i], (size_t)ctx->max_items * sizeof(hub_item)));
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

    /* The host's view of the current frontier: its queue and hub-item counts, its size and edges
     * for the direction. Level 0's counts are guesses: the source is one queue entry or a few hub
     * items, and eight blocks of warps take those (grid-stride, if there are more). */
    unsigned int q_count = 1, hub_items = 8 * WARPS, frontier = 1;
    int64_t frontier_edges = 0; /* the source's edges are not worth a copy */
    int64_t unvisited_edges = ctx->nnz, unvisited = ctx->n - 1;
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
        if (bottom_up && unvisited >= ctx->n / WIDE_FRACTION) {
            const int blocks = (int)((ctx->n + THREADS / WIDE - 1) / (THREADS / WIDE));
            bottom_up_kernel<WIDE><<<blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->bitmap[cur],
                ctx->bitmap[cur ^ 1], out_stats, next_stats, lvl, n, ctx->n_words);
        } else if (bottom_up) {
            bottom_up_kernel<1><<<all_blocks, THREADS, 0, stream>>>(row_ptr, col, level, ctx->bitmap[cur],
                ctx->bitmap[cur ^ 1], out_stats, next_stats, lvl, n, ctx->n_words);
        } else {
            /* about two 32-wide batches of edges per warp: enough lanes busy, short serial chains */
            const int64_t avg_degree = frontier_edges / frontier;
            int per_warp = 32;
            while (per_warp > 1 && per_warp * avg_degree > 64) per_warp /= 2;
            const int queue_blocks = (int)((q_count + per_warp * WARPS - 1) / (per_warp * WARPS));
            int hub_blocks = (int)((hub_items + WARPS - 1) / WARPS);
            if (hub_blocks > MAX_HUB_BLOCKS) hub_blocks = MAX_HUB_BLOCKS;
            top_down_kernel<<<queue_blocks + hub_blocks, THREADS, 0, stream>>>(row_ptr, col, level,
                ctx->queue[cur], ctx->hubs[cur], in_sizes, ctx->queue[cur ^ 1], ctx->hubs[cur ^ 1],
                out_stats, next_stats, lvl + 1, n, queue_blocks, per_warp);
        }
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemcpyAsync(ctx->h_stats, out_stats, sizeof(level_stats), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        q_count = ctx->h_stats->count;
        hub_items = ctx->h_stats->items;
        frontier = q_count + hub_items;
        frontier_edges = ctx->h_stats->edges;
        unvisited_edges -= frontier_edges;
        unvisited -= frontier;
    }
    return 0;
}
