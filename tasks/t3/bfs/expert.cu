/* Expert for t3/bfs: direction-optimising BFS (Beamer, Asanovic, Patterson, SC 2012) on the GPU,
 * the whole search in one persistent cooperative kernel: levels are separated by grid barriers,
 * and every thread takes the same direction decision from the same level counters, so st_run
 * makes one launch and no host round trip at all (a per-level copy back and sync used to cost
 * ~10 us a level and made the time depend on the host's scheduling).
 * Small frontiers expand top-down from queues. Ordinary vertices are dealt out a few per warp (as
 * few as it takes to give each warp about two 32-wide batches of edges); a warp walks rows of 32
 * or more with all lanes and packs shorter rows into 32-wide batches through a warp scan. Hubs
 * (rows of HUB_DEGREE or more) are cut into items of CHUNK edges, one warp each, so no warp walks
 * a long row alone. A warp has 4 batches of 32 edges in flight at once: their neighbour loads,
 * level reads, claims (atomicCAS) and degree reads each go out together, and one atomic per warp
 * appends the batch's claims to the queue.
 * Once the frontier's edges outnumber a fraction of the unvisited vertices' edges, levels go
 * bottom-up: every unvisited vertex scans its neighbours for one in the frontier bitmap and stops
 * at the first, so the big middle levels read a fraction of the edges, with no atomics on levels.
 * Each warp takes 32 vertices (a word of the bitmaps) with no block barrier between warps, and
 * reads the next word's levels and row bounds while it searches this one. Each lane first tests
 * its own vertex's neighbours LANE_K at a time for up to LANE_STEPS steps, the word's 32 rows
 * advancing together; the rows still searching after that are scanned from where their lane
 * stopped, G lanes a vertex (4 while most vertices are unvisited, 16 bytes a step). The switch
 * back to top-down builds the queues from the frontier's bitmap (n / 8 bytes), not the levels.
 * All buffers are allocated in st_init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

namespace cg = cooperative_groups;

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
/* 32-edge batches a warp has in flight in a top-down walk */
#ifndef TD_U
#define TD_U 4
#endif
/* The bottom-up's first pass: every vertex's own lane tests LANE_K neighbours a step, for up to
 * LANE_STEPS steps, before the rows still searching are scanned G lanes a vertex */
#define LANE_K 4
#define LANE_STEPS 4
/* Rows this long go to the hub queue as items of CHUNK edges (at most 8 warp-wide steps each). */
#define HUB_DEGREE 256
#define CHUNK 256
/* Lanes per vertex in the bottom-up search past the lane pass (LANE_K * LANE_STEPS neighbours)
 * while at least 1 / WIDE_FRACTION of the vertices are unvisited (one lane after that): most
 * vertices find a parent among their first few neighbours, and 4 lanes beat 8 (a 32-byte sector
 * a step) by 1.30x in the block-pass form and were no slower in the warp form (session 55,
 * NOTES.md). */
#define WIDE 4
#define WIDE_FRACTION 8
/* BFS_TRACE(phase, level, frontier) runs after each grid barrier, so tests/gpu/bfs_selftest.cu
 * can time the search phase by phase; it does nothing in the expert. */
#ifndef BFS_TRACE
#define BFS_TRACE(phase, lvl, frontier)
#endif
#define BFS_PHASE_INIT 0
#define BFS_PHASE_TO_BOTTOM_UP 1 /* the frontier written as a bitmap */
#define BFS_PHASE_TO_TOP_DOWN 2  /* the frontier written as queues */
#define BFS_PHASE_TOP_DOWN 3
#define BFS_PHASE_BOTTOM_UP_WIDE 4
#define BFS_PHASE_BOTTOM_UP 5

/* A level's counters: the next frontier's ordinary vertices, its hub items, and the edges of the
 * whole frontier. */
typedef struct {
    unsigned int count, items, edges;
} level_stats;

typedef struct {
    int v, chunk; /* edges row_ptr[v] + chunk * CHUNK onwards, at most CHUNK of them */
} hub_item;

/* Everything the kernel works on, passed by value. The queues, hub lists and bitmaps ping-pong
 * between levels; they are written inside the kernel, so they are read with ordinary coherent
 * loads, never through the read-only path (no __restrict__ const on them). */
typedef struct {
    const int *row_ptr, *col, *source;
    int *level;
    int *queue[2];           /* ordinary frontier vertices, n each */
    hub_item *hubs[2];       /* frontier hub items, max_items each */
    unsigned int *bitmap[2]; /* frontier bitmaps for bottom-up levels */
    level_stats *stats;      /* [4]: three rotating level slots and the switch slot */
    int n, n_words;
    long long nnz;
} bfs_args;

typedef struct {
    int64_t n, nnz;
    int n_words;       /* 32-bit words of a frontier bitmap */
    int64_t max_items; /* hub items a frontier can hold */
    int blocks;        /* the cooperative grid: what fits on the device at once, or fewer */
    bfs_args a;        /* buffers; st_run fills in the tensors */
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

/* The sum of x over this lane and the lanes below it. All 32 lanes call. */
__device__ __forceinline__ int warp_inclusive_sum(int x) {
    const int lane = threadIdx.x & 31;
    for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off) x += t;
    }
    return x;
}

/* k slots a lane taken from *count with one atomic for the whole warp (none when every k is 0);
 * returns this lane's first slot. All 32 lanes call. */
__device__ __forceinline__ unsigned int warp_reserve(int k, unsigned int *count) {
    const int incl = warp_inclusive_sum(k);
    const int total = __shfl_sync(FULL_MASK, incl, 31);
    if (total == 0) return 0;
    unsigned int base = 0;
    if ((threadIdx.x & 31) == 31) base = atomicAdd(count, (unsigned int)total);
    return __shfl_sync(FULL_MASK, base, 31) + (unsigned int)(incl - k);
}

/* Append each `hub` lane's row as ceil(deg / CHUNK) items, one atomic for the whole warp. All 32
 * lanes call. */
__device__ __forceinline__ void warp_append_hub(bool hub, int v, int deg, hub_item *items,
                                                unsigned int *count) {
    if (!__ballot_sync(FULL_MASK, hub)) return;
    const int k = hub ? (deg + CHUNK - 1) / CHUNK : 0;
    const unsigned int at = warp_reserve(k, count);
    for (int c = 0; c < k; c++) items[at + c] = {v, c};
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

/* Top-down for TD_U neighbours a lane (-1: none), the batch's loads and claims in flight together
 * instead of one 32-edge step's chain of memory round trips after another (neighbour, its level,
 * the claim, its degree). The plain read filters the common already-visited case before the
 * atomic; the claimed go to the queue by degree, one atomic per warp for the batch. All 32 lanes
 * call. */
__device__ __forceinline__ void visit_batch(const int (&v)[TD_U], int next_level, int *level,
                                            const int *row_ptr, int *q_out, hub_item *hubs_out,
                                            level_stats *out, unsigned int *edges) {
    bool claimed[TD_U];
    int deg[TD_U];
#pragma unroll
    for (int u = 0; u < TD_U; u++) claimed[u] = v[u] >= 0 && level[v[u]] == -1;
#pragma unroll
    for (int u = 0; u < TD_U; u++) claimed[u] = claimed[u] && atomicCAS(&level[v[u]], -1, next_level) == -1;
#pragma unroll
    for (int u = 0; u < TD_U; u++) deg[u] = claimed[u] ? row_ptr[v[u] + 1] - row_ptr[v[u]] : 0;
    int k = 0; /* this lane's short rows: a warp scan places them, one atomic takes the room */
#pragma unroll
    for (int u = 0; u < TD_U; u++) {
        *edges += deg[u];
        k += claimed[u] && deg[u] < HUB_DEGREE;
    }
    unsigned int at = warp_reserve(k, &out->count);
#pragma unroll
    for (int u = 0; u < TD_U; u++)
        if (claimed[u] && deg[u] < HUB_DEGREE) q_out[at++] = v[u];
#pragma unroll
    for (int u = 0; u < TD_U; u++)
        warp_append_hub(claimed[u] && deg[u] >= HUB_DEGREE, v[u], deg[u], hubs_out, &out->items);
}

/* Walk edges [b, e) with the whole warp, 32 * TD_U at a time. b and e are the same in every lane. */
__device__ __forceinline__ void warp_walk(int b, int e, const int *col, int next_level, int *level,
                                          const int *row_ptr, int *q_out, hub_item *hubs_out,
                                          level_stats *out, unsigned int *edges) {
    for (int j0 = b; j0 < e; j0 += 32 * TD_U) {
        int v[TD_U];
#pragma unroll
        for (int u = 0; u < TD_U; u++) {
            const int j = j0 + 32 * u + (int)(threadIdx.x & 31);
            v[u] = j < e ? col[j] : -1;
        }
        visit_batch(v, next_level, level, row_ptr, q_out, hubs_out, out, edges);
    }
}

__device__ __forceinline__ void clear_stats(level_stats *s) { s->count = s->items = s->edges = 0; }

/* x[i] for i in {0, 1} without indexing the kernel's parameter struct, which would copy it to the
 * stack */
template <typename T> __device__ __forceinline__ T pick(int i, T x0, T x1) { return i ? x1 : x0; }

// ----------------------------------------------------------------------------
// one level of each kind; every thread of the grid calls, and the caller's barrier ends it

/* Top-down: the queue is dealt out per_warp entries to a warp, grid-stride over the grid's warps,
 * then the hub items, one warp each, starting at the warps that got one queue task fewer. */
__device__ void top_down_level(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                               const int *q_in, const hub_item *hubs_in, int q_count, int n_items,
                               int *q_out, hub_item *hubs_out, level_stats *out, int next_level, int n,
                               int per_warp) {
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int n_warps = (int)((gridDim.x * blockDim.x) >> 5);
    const int tasks = (q_count + per_warp - 1) / per_warp;
    unsigned int edges = 0;

    for (int t = warp; t < tasks; t += n_warps) {
        const int i = t * per_warp + lane;
        const int u = lane < per_warp && i < q_count ? q_in[i] : -1;
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
        const int incl = warp_inclusive_sum(deg);
        const int excl = incl - deg;
        const int total = __shfl_sync(FULL_MASK, incl, 31);
        for (int base = 0; base < total; base += 32 * TD_U) {
            int v[TD_U];
#pragma unroll
            for (int u = 0; u < TD_U; u++) {
                const int k = base + 32 * u + lane;
                int owner = 0;
                for (int step = 16; step > 0; step >>= 1)
                    if (__shfl_sync(FULL_MASK, excl, owner + step) <= k) owner += step;
                const int ob = __shfl_sync(FULL_MASK, beg, owner), oe = __shfl_sync(FULL_MASK, excl, owner);
                v[u] = k < total ? col[ob + k - oe] : -1;
            }
            visit_batch(v, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
        }
    }

    for (int it = (warp + n_warps - tasks % n_warps) % n_warps; it < n_items; it += n_warps) {
        const hub_item h = hubs_in[it];
        const int b = row_ptr[h.v] + h.chunk * CHUNK, e = min(row_ptr[h.v + 1], b + CHUNK);
        warp_walk(b, e, col, next_level, level, row_ptr, q_out, hubs_out, out, &edges);
    }

    edges = warp_sum(edges);
    if (lane == 0 && edges) atomicAdd(&out->edges, edges);
}

/* Bottom-up by warps: a warp takes one 32-bit word of the bitmaps at a time (32 consecutive
 * vertices, a lane each), so it assembles the next frontier's word in a register and writes it
 * whole, and no block barrier holds one warp for another's slow row. Each unvisited vertex's
 * lane first tests its neighbours LANE_K at a time for up to LANE_STEPS steps (32 rows advancing
 * together); those still searching then scan G lanes a vertex, 32 / G vertices at a time, each
 * from where its lane stopped to the first neighbour in the frontier. Only a vertex's own lane
 * writes level[v], and the frontier is read from the bitmap, so there are no races. No queue is
 * written: one is built only on the way back to top-down. */
template <int G>
__device__ void bottom_up_level(const int *__restrict__ row_ptr, const int *__restrict__ col, int *level,
                                const unsigned int *frontier, unsigned int *next_frontier,
                                level_stats *out, int cur_level, int n, int n_words) {
    static_assert(32 % G == 0, "a warp holds whole groups");
    constexpr int PER_ROUND = 32 / G;
    const int lane = threadIdx.x & 31, grp = lane / G, sub = lane % G;
    const unsigned int group = (G == 32 ? FULL_MASK : (1u << G) - 1) << (grp * G);
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int n_warps = (int)((gridDim.x * blockDim.x) >> 5);
    unsigned int count = 0, items = 0, edges = 0;

    /* a word's level and row bounds are read a word ahead, so they are in flight while the warp
     * searches the word before (only a vertex's own lane writes its level, and the next word's
     * vertices are this warp's) */
    int ahead_level = -2, ahead_b = 0, ahead_e = 0;
    if (warp < n_words && warp * 32 + lane < n) {
        ahead_level = level[warp * 32 + lane];
        ahead_b = row_ptr[warp * 32 + lane];
        ahead_e = row_ptr[warp * 32 + lane + 1];
    }
    for (int word = warp; word < n_words; word += n_warps) {
        const int v = word * 32 + lane;
        const bool unvisited = v < n && ahead_level == -1;
        const int b = unvisited ? ahead_b : 0, e = unvisited ? ahead_e : 0;
        if (word + n_warps < n_words && v + 32 * n_warps < n) { /* no overflow: the word exists */
            const int v_next = v + 32 * n_warps;
            ahead_level = level[v_next];
            ahead_b = row_ptr[v_next];
            ahead_e = row_ptr[v_next + 1];
        }
        /* each lane its own vertex, LANE_K neighbours a step, for up to LANE_STEPS steps: the
         * warp's 32 rows advance together, LANE_K loads a lane in flight */
        bool found = false, searching = unvisited && b < e;
        int at = b;
#pragma unroll 1
        for (int step = 0; step < LANE_STEPS && __any_sync(FULL_MASK, searching); step++, at += LANE_K) {
            int w[LANE_K];
#pragma unroll
            for (int i = 0; i < LANE_K; i++) w[i] = searching && at + i < e ? col[at + i] : -1;
            bool hit = false;
#pragma unroll
            for (int i = 0; i < LANE_K; i++) hit |= w[i] >= 0 && (frontier[w[i] >> 5] >> (w[i] & 31) & 1u);
            if (searching && (hit || at + LANE_K >= e)) {
                found = hit;
                searching = false;
            }
        }
        /* the longer rows left: G lanes a vertex, from where the lane stopped */
        unsigned int todo = __ballot_sync(FULL_MASK, searching);
        while (todo) {
            /* group grp scans the row of todo's (grp + 1)-th lowest vertex, if there is one */
            const unsigned int owner = __fns(todo, 0, grp + 1);
            const bool active = owner < 32;
            const int ob = __shfl_sync(FULL_MASK, at, active ? owner : 0);
            const int oe = __shfl_sync(FULL_MASK, e, active ? owner : 0);
            bool scanning = active, hit_any = false;
            for (int j0 = ob; __any_sync(FULL_MASK, scanning); j0 += G) {
                const int j = j0 + sub;
                const bool in = scanning && j < oe;
                const int w = in ? col[j] : 0;
                const bool hit = in && (frontier[w >> 5] >> (w & 31) & 1u);
                const unsigned int hits = __ballot_sync(FULL_MASK, hit) & group;
                if (scanning && (hits || j0 + G >= oe)) {
                    hit_any = hits != 0;
                    scanning = false;
                }
            }
            /* each group's first lane holds the answer; the vertex's own lane takes it */
            const unsigned int answers = __ballot_sync(FULL_MASK, sub == 0 && hit_any);
            const int rank = (int)lanes_below(todo);
            const bool mine = (todo >> lane & 1u) && rank < PER_ROUND;
            if (mine) found = answers >> (rank * G) & 1u;
            todo &= ~__ballot_sync(FULL_MASK, mine);
        }
        const unsigned int word_bits = __ballot_sync(FULL_MASK, found);
        if (lane == 0) next_frontier[word] = word_bits;
        if (found) level[v] = cur_level + 1;
        const int deg = found ? e - b : 0;
        count += found && deg < HUB_DEGREE;
        items += deg >= HUB_DEGREE ? (deg + CHUNK - 1) / CHUNK : 0;
        edges += deg;
    }
    block_add_stats(count, items, edges, out);
}

/* The frontier as a bitmap, for the first bottom-up level after top-down ones: one warp a word. */
__device__ void level_bitmap(const int *level, int cur_level, unsigned int *bitmap, int n, int n_words) {
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int n_warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int word = warp; word < n_words; word += n_warps) {
        const int v = word * 32 + (threadIdx.x & 31);
        const unsigned int mask = __ballot_sync(FULL_MASK, v < n && level[v] == cur_level);
        if ((threadIdx.x & 31) == 0) bitmap[word] = mask;
    }
}

/* The frontier as queues, for the first top-down level after bottom-up ones, from the bitmap
 * the last bottom-up level wrote (n / 8 bytes) rather than the level array (4n): a thread a word,
 * the block's threads taking their next set bit together until none has one left. */
__device__ void bitmap_queue(const unsigned int *bitmap, const int *row_ptr, int *queue, hub_item *hubs,
                             level_stats *out, int n_words) {
    const int passes = (n_words + THREADS - 1) / THREADS;
    for (int pass = blockIdx.x; pass < passes; pass += gridDim.x) {
        const int word = pass * THREADS + threadIdx.x;
        unsigned int bits = word < n_words ? bitmap[word] : 0u;
        while (__syncthreads_or(bits != 0)) {
            const bool take = bits != 0;
            const int v = take ? word * 32 + __ffs(bits) - 1 : 0;
            bits &= bits - 1;
            const int deg = take ? row_ptr[v + 1] - row_ptr[v] : 0;
            block_append(take && deg < HUB_DEGREE, v, queue, &out->count);
            warp_append_hub(take && deg >= HUB_DEGREE, v, deg, hubs, &out->items);
        }
    }
}

// ----------------------------------------------------------------------------
// the search

/* Level L counts into slot L % 3 and clears slot (L + 1) % 3 for level L + 1. After the barrier
 * that ends level L every thread reads slot L % 3, and nobody clears it before the barrier that
 * ends level L + 1: no slot is cleared while it is read. Slot 3 receives the queues rebuilt at a
 * switch back to top-down; it is cleared at the switch to bottom-up that must come first. */
/* at most four blocks an SM: 64 registers and no spills, where ptxas chose 48 with 44 bytes of
 * spills and five blocks: 1.02-1.06x on seeds 1-3's eval graphs (self-test, H100, session 57) */
__global__ void __launch_bounds__(THREADS, 4) bfs_kernel(bfs_args a) {
    cg::grid_group grid = cg::this_grid();
    const int n = a.n;
    level_stats *slot = a.stats, *switch_slot = a.stats + 3;

    /* Outputs arrive poisoned: every level starts unvisited, except the source. The source
     * becomes level -1's output (a queue entry, or a hub's items); an out-of-range source queues
     * nothing and leaves all -1. */
    const int src = *a.source;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x)
        a.level[v] = v == src ? 0 : -1;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int i = 0; i < 4; i++) clear_stats(&slot[i]);
        if (src >= 0 && src < n) {
            const int deg = a.row_ptr[src + 1] - a.row_ptr[src];
            if (deg < HUB_DEGREE) {
                a.queue[0][0] = src;
                slot[2].count = 1;
            } else {
                for (int c = 0; c * CHUNK < deg; c++) a.hubs[0][c] = {src, c};
                slot[2].items = (deg + CHUNK - 1) / CHUNK;
            }
        }
    }
    grid.sync();
    BFS_TRACE(BFS_PHASE_INIT, -1, 1);

    /* Every thread's own copy of the search's state, updated from the same counters after each
     * barrier, so all threads take the same decisions. The source's edges are not counted. */
    int q_count = (int)slot[2].count, n_items = (int)slot[2].items;
    long long frontier = q_count + n_items, frontier_edges = 0;
    long long unvisited_edges = a.nnz, unvisited = n - 1;
    bool bottom_up = false;
    int cur = 0; /* the frontier of the current level is queue/hubs/bitmap[cur] */
    for (int lvl = 0; frontier > 0 && lvl < n; lvl++, cur ^= 1) {
        level_stats *out = slot + lvl % 3;
        if (!bottom_up && frontier_edges > unvisited_edges / ALPHA) {
            bottom_up = true;
            if (blockIdx.x == 0 && threadIdx.x == 0) clear_stats(switch_slot);
            level_bitmap(a.level, lvl, pick(cur, a.bitmap[0], a.bitmap[1]), n, a.n_words);
            grid.sync();
            BFS_TRACE(BFS_PHASE_TO_BOTTOM_UP, lvl, frontier);
        } else if (bottom_up && frontier < n / BETA) {
            bottom_up = false;
            bitmap_queue(pick(cur, a.bitmap[0], a.bitmap[1]), a.row_ptr, pick(cur, a.queue[0], a.queue[1]),
                         pick(cur, a.hubs[0], a.hubs[1]), switch_slot, a.n_words);
            grid.sync();
            BFS_TRACE(BFS_PHASE_TO_TOP_DOWN, lvl, frontier);
            q_count = (int)switch_slot->count;
            n_items = (int)switch_slot->items;
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) clear_stats(slot + (lvl + 1) % 3);
        const unsigned int *bitmap_in = pick(cur, a.bitmap[0], a.bitmap[1]);
        unsigned int *bitmap_out = pick(cur, a.bitmap[1], a.bitmap[0]);
        const bool wide = bottom_up && unvisited >= n / WIDE_FRACTION;
        if (wide) {
            bottom_up_level<WIDE>(a.row_ptr, a.col, a.level, bitmap_in, bitmap_out, out, lvl, n,
                                  a.n_words);
        } else if (bottom_up) {
            bottom_up_level<1>(a.row_ptr, a.col, a.level, bitmap_in, bitmap_out, out, lvl, n,
                               a.n_words);
        } else {
            /* about two 32-wide batches of edges per warp: enough lanes busy, short serial chains */
            const long long avg_degree = frontier_edges / frontier;
            int per_warp = 32;
            while (per_warp > 1 && per_warp * avg_degree > 64) per_warp /= 2;
            top_down_level(a.row_ptr, a.col, a.level, pick(cur, a.queue[0], a.queue[1]), pick(cur, a.hubs[0], a.hubs[1]),
                           q_count, n_items, pick(cur, a.queue[1], a.queue[0]), pick(cur, a.hubs[1], a.hubs[0]), out, lvl + 1, n, per_warp);
        }
        grid.sync();
        BFS_TRACE(wide ? BFS_PHASE_BOTTOM_UP_WIDE : bottom_up ? BFS_PHASE_BOTTOM_UP : BFS_PHASE_TOP_DOWN, lvl,
                  frontier);
        q_count = (int)out->count;
        n_items = (int)out->items;
        frontier = q_count + n_items;
        frontier_edges = out->edges;
        unvisited_edges -= frontier_edges;
        unvisited -= frontier;
    }
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    bfs_ctx *ctx = (bfs_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    for (int i = 0; i < 2; i++) {
        cudaFree(ctx->a.queue[i]);
        cudaFree(ctx->a.hubs[i]);
        cudaFree(ctx->a.bitmap[i]);
    }
    cudaFree(ctx->a.stats);
    free(ctx);
}

static int init_ctx(bfs_ctx *ctx, const st_config *cfg, int32_t n_params) {
    int64_t deg;
    if (cfg_get(cfg, "n", &ctx->n) || cfg_get(cfg, "deg", &deg)) return 1;
    /* counts are 32-bit on the device, and so is the largest index a pass computes */
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

    int dev, sms, coop, per_sm;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) {
        fprintf(stderr, "bfs expert: the device cannot launch cooperative kernels\n");
        return 1;
    }
    /* A cooperative grid must be resident all at once. More blocks than WIDE threads a vertex
     * would keep busy would only make every barrier slower. */
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bfs_kernel, THREADS, 0));
    if (per_sm < 1) {
        fprintf(stderr, "bfs expert: the kernel does not fit on an SM\n");
        return 1;
    }
    const int64_t useful = (ctx->n * WIDE + THREADS - 1) / THREADS;
    ctx->blocks = (int)(useful < (int64_t)per_sm * sms ? useful : (int64_t)per_sm * sms);

    for (int i = 0; i < 2; i++) {
        CUDA_CHECK(cudaMalloc(&ctx->a.queue[i], (size_t)ctx->n * sizeof(int)));
        CUDA_CHECK(cudaMalloc(&ctx->a.hubs[i], (size_t)ctx->max_items * sizeof(hub_item)));
        CUDA_CHECK(cudaMalloc(&ctx->a.bitmap[i], (size_t)ctx->n_words * sizeof(unsigned int)));
    }
    CUDA_CHECK(cudaMalloc(&ctx->a.stats, 4 * sizeof(level_stats)));
    ctx->a.n = (int)ctx->n;
    ctx->a.n_words = ctx->n_words;
    ctx->a.nnz = ctx->nnz;
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
    bfs_args a = ctx->a;
    a.row_ptr = (const int *)in[0].data;
    a.col = (const int *)in[1].data;
    a.source = (const int *)in[2].data;
    a.level = (int *)out[0].data;
    void *args[] = {(void *)&a};
    CUDA_CHECK(cudaLaunchCooperativeKernel((const void *)bfs_kernel, dim3(ctx->blocks), dim3(THREADS), args,
                                           0, stream));
    return 0;
}
