/* Expert for t1/scan: inclusive prefix sum of x[n] (i32) by a hand-written single-pass scan
 * with decoupled look-back (the scheme of Merrill and Garland, 2016), no library code: x is read
 * once and y written once, in one kernel launch per call.
 *
 * Tiles. A tile is SCAN_THREADS x SCAN_ITEMS = 256 x 40 = 10240 values (40 KiB; 32 values a
 * thread measured 2 % slower on the H200, fewer tiles meaning fewer look-backs). A persistent
 * grid (4 blocks of 256 threads per SM, 64 registers each) walks the tiles; each block keeps
 * one tile staged in shared memory. Warp w of the block owns the slice [1280 w, 1280 w + 1280)
 * of the tile as 10 rows of 128 values; in row j, lane l holds the four values at 128 j + 4 l
 * (one 16-byte vector). The block scan is register-only: a scan inside each int4, shuffle scans
 * of the 8 row sums across the warp, the row totals chained, then a scan of the 8 warp totals.
 *
 * Staging, one tile ahead. Warps 1..7 copy the block's next tile into shared memory with
 * cp.async (16 bytes a copy, L2 only, zero-filled past n, so the ragged last tile needs no
 * special case) while warp 0 runs the look-back of the current tile; as soon as the copy has
 * landed they add it up and publish its AGG. The aggregate of every tile is thus published at
 * memory speed, independently of how long its block's previous look-back takes, and the block
 * has a tile of loads in flight while it waits. Stores go from registers with 16-byte vector
 * stores (scalar for the ragged last tile). Buffers that are not 16-byte aligned use a variant
 * that stages with scalar loads and stores with scalar stores.
 *
 * Look-back. Every tile owns one 64-bit status word: high half = (epoch << 2 | flag), low half =
 * the value, written by one 64-bit st.relaxed.gpu store, so a reader can never see a flag with a
 * value it does not belong to; flag AGG carries the tile's own total, INC its inclusive prefix.
 * No other data passes between blocks, so relaxed (morally strong, single-copy atomic) 64-bit
 * loads and stores are all the ordering the look-back needs: no fence is required (the one
 * word written twice, AGG by thread 32 and later INC by thread 0 of one block, is ordered by
 * the __syncthreads between them). Warp 0 reads the 128 status words before its tile (four
 * relaxed loads per lane, 256 contiguous bytes per instruction) and stops at the nearest INC if
 * every word above it is valid; if all 128 are AGG it adds them and moves 128 further back; if
 * a word above the nearest INC is not valid yet it polls again. Tile 0 publishes INC at once.
 *
 * Scheduling. Tile ids come in order from an atomic counter, so every tile a block waits on is
 * held by a running block that waits only on smaller tiles: no deadlock, whatever order the
 * hardware starts blocks in. A block holds at most one claimed tile besides the one it is
 * scanning, and that tile only needs memory to get its AGG out. Every block makes exactly one
 * claim >= tiles (its last), so the claims are exactly 0 .. tiles + grid - 1, and the block
 * that gets the final one resets the counter to 0 for the next call (it is the last in the
 * counter's modification order).
 *
 * Per-call state. The status words are never cleared: each st_run passes a new epoch (1 ..
 * 2^30 - 1, cycling), and a word counts only when its epoch is this call's. Every call writes
 * every tile's word, so a stale word always carries an older epoch. st_run is the one launch:
 * no memset, no host synchronisation. Integer addition is associative modulo 2^32, so the
 * result is exact and the same whatever path the look-back takes. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define SCAN_THREADS 256                          /* threads per block */
#define SCAN_ITEMS 40                             /* values per thread, a multiple of 4 */
#define SCAN_MIN_BLOCKS 4                         /* blocks per SM the register budget allows */
#define SCAN_WARPS (SCAN_THREADS / 32)
#define SCAN_ROWS (SCAN_ITEMS / 4)                /* int4 rows per warp slice */
#define SCAN_WARP_ITEMS (32 * SCAN_ITEMS)
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)
#define SCAN_LB_GROUPS 4                          /* status words per lane per look-back poll */
#define SCAN_LB_WINDOW (32 * SCAN_LB_GROUPS)
#define SCAN_BACKOFF_NS 64                        /* pause between polls after the first retry */
#define SCAN_CHUNKS (SCAN_TILE / 4)               /* 16-byte chunks per tile */
#define SCAN_COPY_THREADS (SCAN_THREADS - 32)     /* warps 1 .. stage the next tile */
#define SCAN_COPY_ITERS ((SCAN_CHUNKS + SCAN_COPY_THREADS - 1) / SCAN_COPY_THREADS)

#define FLAG_AGG 1u
#define FLAG_INC 2u
#define EPOCH_MAX ((1u << 30) - 1u)
#define FULL_MASK 0xffffffffu

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "scan alt: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

static_assert(SCAN_ITEMS % 4 == 0, "items per thread must be a multiple of 4");
static_assert(SCAN_THREADS % 32 == 0 && SCAN_WARPS <= 32, "1 to 32 whole warps per block");
static_assert(SCAN_WARPS >= 2, "warp 0 looks back while warps 1 .. stage the next tile");
static_assert(SCAN_TILE * 4 <= 40 * 1024, "the staging buffer is static shared memory");

typedef unsigned long long u64;

/* ------------------------------------------------------------------------------------------ */
/* device helpers */

__device__ __forceinline__ u64 ld_status(const u64 *p) {
    u64 v;
    asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_status(u64 *p, u64 v) {
    asm volatile("st.relaxed.gpu.b64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ u64 pack_status(unsigned epoch, unsigned flag, unsigned value) {
    return ((u64)((epoch << 2) | flag) << 32) | (u64)value;
}

/* Warp 0 of tile `tile` (> 0): the sum of all values before the tile. Warp-uniform result. */
__device__ __forceinline__ unsigned look_back(const u64 *status, unsigned tile, unsigned epoch,
                                              int lane) {
    unsigned acc = 0;
    long long hi = tile;  /* the window is tiles [hi - SCAN_LB_WINDOW, hi) */
    int retries = 0;
    for (;;) {
        u64 w[SCAN_LB_GROUPS];
#pragma unroll
        for (int q = 0; q < SCAN_LB_GROUPS; q++) {
            const long long idx = hi - SCAN_LB_WINDOW + q * 32 + lane;
            /* before tile 0: an inclusive prefix of 0 (tile 0 itself is always INC, so these
             * positions are never summed; they only end the search) */
            w[q] = idx >= 0 ? ld_status(status + idx) : pack_status(epoch, FLAG_INC, 0u);
        }
        /* p_inc, p_inv: the highest window position (q * 32 + lane) holding an inclusive
         * prefix, and one not yet valid; -1 if none */
        unsigned val[SCAN_LB_GROUPS];
        int p_inc = -1, p_inv = -1;
#pragma unroll
        for (int q = 0; q < SCAN_LB_GROUPS; q++) {
            const unsigned h = (unsigned)(w[q] >> 32);
            const unsigned flag = (h >> 2) == epoch ? (h & 3u) : 0u;
            const unsigned inv = __ballot_sync(FULL_MASK, flag == 0u);
            const unsigned inc = __ballot_sync(FULL_MASK, flag == FLAG_INC);
            if (inv) p_inv = q * 32 + 31 - __clz((int)inv);
            if (inc) p_inc = q * 32 + 31 - __clz((int)inc);
            val[q] = (unsigned)w[q];
        }
        if (p_inc > p_inv) {
            /* the nearest inclusive prefix, with only aggregates (all valid) above it */
            unsigned part = 0;
#pragma unroll
            for (int q = 0; q < SCAN_LB_GROUPS; q++)
                if (q * 32 + lane >= p_inc) part += val[q];
            return acc + __reduce_add_sync(FULL_MASK, part);
        }
        if (p_inv < 0) {
            /* 128 aggregates and no inclusive prefix: take them all, look further back */
            unsigned part = 0;
#pragma unroll
            for (int q = 0; q < SCAN_LB_GROUPS; q++) part += val[q];
            acc += __reduce_add_sync(FULL_MASK, part);
            hi -= SCAN_LB_WINDOW;
            retries = 0;
            continue;
        }
        /* a tile above the nearest inclusive prefix has not published yet: poll again */
        if (retries++ > 0) __nanosleep(SCAN_BACKOFF_NS);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* kernel */

__device__ __forceinline__ void cp_async16(int4 *smem, const int *gmem, unsigned src_bytes) {
    /* 16 bytes global -> shared, L2 only; bytes past src_bytes are filled with zeros */
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const size_t g = __cvta_generic_to_global(gmem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 : : "r"(s), "l"(g), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;" : : : "memory");
}

/* Barrier 1: the copy warps (1 .. SCAN_WARPS-1) only; warp 0 never takes part. */
__device__ __forceinline__ void copy_warps_sync() {
    asm volatile("bar.sync 1, %0;" : : "r"(SCAN_COPY_THREADS) : "memory");
}

/* Copy thread ct (0 .. SCAN_COPY_THREADS-1) stages its chunks (16 bytes, 4 values) of tile t
 * into buf, zeros past n; chunk c of the tile is values 4c .. 4c+3. With VEC the copy is
 * asynchronous (complete after cp_async_wait_all); otherwise it is done when this returns. */
template <bool VEC>
__device__ __forceinline__ void stage_tile(int4 *buf, const int *x, long long n, unsigned t,
                                           int ct) {
    const long long tile_base = (long long)t * SCAN_TILE;
#pragma unroll
    for (int i = 0; i < SCAN_COPY_ITERS; i++) {
        const int c = ct + i * SCAN_COPY_THREADS;
        if (SCAN_CHUNKS % SCAN_COPY_THREADS == 0 || c < SCAN_CHUNKS) {
            const long long g = tile_base + 4 * c;
            const long long left = n - g;  /* values of this chunk that exist, if < 4 */
            if (VEC) {
                const unsigned bytes = left >= 4 ? 16u : left > 0 ? (unsigned)left * 4u : 0u;
                cp_async16(buf + c, bytes ? x + g : x, bytes);
            } else {
                int4 q;
                q.x = left > 0 ? x[g] : 0;
                q.y = left > 1 ? x[g + 1] : 0;
                q.z = left > 2 ? x[g + 2] : 0;
                q.w = left > 3 ? x[g + 3] : 0;
                buf[c] = q;
            }
        }
    }
}

/* The sum of the chunks copy thread ct staged (after its copies completed). */
__device__ __forceinline__ unsigned staged_sum(const int4 *buf, int ct) {
    unsigned sum = 0;
#pragma unroll
    for (int i = 0; i < SCAN_COPY_ITERS; i++) {
        const int c = ct + i * SCAN_COPY_THREADS;
        if (SCAN_CHUNKS % SCAN_COPY_THREADS == 0 || c < SCAN_CHUNKS) {
            const int4 q = buf[c];
            sum += (unsigned)q.x + (unsigned)q.y + (unsigned)q.z + (unsigned)q.w;
        }
    }
    return sum;
}

/* Copy warps only (all of them): stage tile t into buf and, once it has landed, publish its total
 * as its AGG, so that the tiles after it need not wait for this block to reach it. */
template <bool VEC>
__device__ __forceinline__ void stage_and_publish(int4 *buf, unsigned *part, const int *x,
                                                  long long n, u64 *status, unsigned epoch,
                                                  unsigned t, int ct) {
    const int lane = ct & 31, warp = 1 + (ct >> 5);
    stage_tile<VEC>(buf, x, n, t, ct);
    cp_async_wait_all();
    const unsigned sum = __reduce_add_sync(FULL_MASK, staged_sum(buf, ct));
    if (lane == 0) part[warp] = sum;
    copy_warps_sync();
    if (ct == 0) {
        unsigned a = 0;
#pragma unroll
        for (int w = 1; w < SCAN_WARPS; w++) a += part[w];
        /* for tile 0 the total is its inclusive prefix too */
        st_status(status + t, pack_status(epoch, t == 0 ? FLAG_INC : FLAG_AGG, a));
    }
}

template <bool VEC>
__global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)
scan_kernel(const int *__restrict__ x, int *__restrict__ y, long long n, unsigned tiles,
            u64 *__restrict__ status, unsigned *__restrict__ counter, unsigned epoch) {
    __shared__ int4 s_buf[SCAN_CHUNKS];      /* the staged tile (40 KiB) */
    __shared__ unsigned s_wtot[SCAN_WARPS];  /* warp totals */
    __shared__ unsigned s_woff[SCAN_WARPS];  /* values before each warp's slice */
    __shared__ unsigned s_part[SCAN_WARPS];  /* copy warps' partial sums of the next tile */
    __shared__ unsigned s_next;              /* the tile claimed next */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int ct = tid - 32;  /* copy-thread index in warps 1 .. */
    const unsigned last_claim = tiles + gridDim.x - 1u;

    /* Claims are made by thread 32 only: one at the start, then one per tile this block
     * prefetches, until one is >= tiles. */
    if (tid == 32) {
        const unsigned c = atomicAdd(counter, 1u);
        if (c == last_claim) atomicExch(counter, 0u);
        s_next = c;
    }
    __syncthreads();
    unsigned cur = s_next;
    if (cur >= tiles) return;
    unsigned claim = 0;  /* thread 32: the claim in flight */
    if (tid == 32) claim = atomicAdd(counter, 1u);
    if (warp > 0) stage_and_publish<VEC>(s_buf, s_part, x, n, status, epoch, cur, ct);
    __syncthreads();  /* the staged tile is visible to the whole block */

    for (;;) {
        /* cur is staged in s_buf. Thread (warp w, lane l) takes rows j = 0 .. SCAN_ROWS-1 of
         * its warp's slice: chunk w * 32 * SCAN_ROWS + 32 j + l, i.e. values
         * base + 128 j + 0..3 with base = tile_base + w * SCAN_WARP_ITEMS + 4 l. */
        unsigned v[SCAN_ROWS][4];
#pragma unroll
        for (int j = 0; j < SCAN_ROWS; j++) {
            const int4 q = s_buf[warp * 32 * SCAN_ROWS + 32 * j + lane];
            v[j][0] = (unsigned)q.x; v[j][1] = (unsigned)q.y;
            v[j][2] = (unsigned)q.z; v[j][3] = (unsigned)q.w;
        }

        /* scan inside each int4, then of the row sums across the warp */
        unsigned s[SCAN_ROWS];
#pragma unroll
        for (int j = 0; j < SCAN_ROWS; j++) {
            v[j][1] += v[j][0];
            v[j][2] += v[j][1];
            v[j][3] += v[j][2];
            s[j] = v[j][3];
        }
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
#pragma unroll
            for (int j = 0; j < SCAN_ROWS; j++) {
                const unsigned t = __shfl_up_sync(FULL_MASK, s[j], d);
                if (lane >= d) s[j] += t;
            }
        }
        /* chain the rows: row j starts after the totals of rows 0 .. j-1 */
        unsigned run = 0;
#pragma unroll
        for (int j = 0; j < SCAN_ROWS; j++) {
            const unsigned row_total = __shfl_sync(FULL_MASK, s[j], 31);
            const unsigned before = run + s[j] - v[j][3];
#pragma unroll
            for (int k = 0; k < 4; k++) v[j][k] += before;
            run += row_total;
        }
        if (lane == 0) s_wtot[warp] = run;
        if (tid == 32) {
            if (claim == last_claim) atomicExch(counter, 0u);  /* the last claim of the launch */
            s_next = claim;
        }
        __syncthreads();  /* 1: warp totals and the next tile known; s_buf free */
        const unsigned nxt = s_next;

        if (warp == 0) {
            /* the tile's scan and look-back */
            const unsigned wt = lane < SCAN_WARPS ? s_wtot[lane] : 0u;
            unsigned wi = wt;
#pragma unroll
            for (int d = 1; d < SCAN_WARPS; d <<= 1) {
                const unsigned t = __shfl_up_sync(FULL_MASK, wi, d);
                if (lane >= d) wi += t;
            }
            const unsigned aggregate = __shfl_sync(FULL_MASK, wi, SCAN_WARPS - 1);
            unsigned before = 0;
            /* cur's AGG (INC for tile 0) was published when it was staged */
            if (cur != 0) {
                before = look_back(status, cur, epoch, lane);
                if (lane == 0)
                    st_status(status + cur, pack_status(epoch, FLAG_INC, before + aggregate));
            }
            if (lane < SCAN_WARPS) s_woff[lane] = before + wi - wt;
        } else if (nxt < tiles) {
            /* meanwhile the copy warps stage the next tile and publish its AGG */
            stage_and_publish<VEC>(s_buf, s_part, x, n, status, epoch, nxt, ct);
        }
        __syncthreads();  /* 2: offsets ready; the next tile (if any) staged and visible */

        /* the tile after nxt; its value is wanted only just before the next sync 1 */
        if (tid == 32 && nxt < tiles) claim = atomicAdd(counter, 1u);
        const unsigned off = s_woff[warp];
        const long long tile_base = (long long)cur * SCAN_TILE;
        const long long base = tile_base + warp * SCAN_WARP_ITEMS + 4 * lane;
        if (VEC && n - tile_base >= SCAN_TILE) {
            int4 *yv = reinterpret_cast<int4 *>(y + base);
#pragma unroll
            for (int j = 0; j < SCAN_ROWS; j++) {
                int4 q;
                q.x = (int)(v[j][0] + off); q.y = (int)(v[j][1] + off);
                q.z = (int)(v[j][2] + off); q.w = (int)(v[j][3] + off);
                __stcs(yv + 32 * j, q);
            }
        } else {
            const long long rem = n - base;  /* values j, k exist while 128 j + k < rem */
            int *ys = y + base;
#pragma unroll
            for (int j = 0; j < SCAN_ROWS; j++)
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (128 * j + k < rem) ys[128 * j + k] = (int)(v[j][k] + off);
        }
        if (nxt >= tiles) break;
        cur = nxt;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

typedef struct scan_ctx {
    long long n;
    unsigned tiles;
    unsigned grid_vec, grid_scalar;  /* persistent grid size of each kernel variant */
    unsigned epoch;                  /* of the last call; 0 before the first */
    void *state;                     /* [0]: tile counter (u32, padded to 8 bytes); then status */
} scan_ctx;

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
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL &&
           ((uintptr_t)t->data & 3) == 0;
}

extern "C" void st_free(void *ctx) {
    scan_ctx *c = (scan_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->state);
    free(c);
}

static unsigned grid_for(const void *kernel, unsigned tiles, int sms) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, SCAN_THREADS, 0) !=
            cudaSuccess || per_sm < 1) {
        cudaGetLastError();
        per_sm = 1;  /* still correct: the scan never needs more than one resident block */
    }
    long long g = (long long)sms * per_sm;
    if (g > (long long)tiles) g = tiles;
    return (unsigned)(g < 1 ? 1 : g);
}

static int init_ctx(scan_ctx *c, cudaStream_t stream) {
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (sms < 1) sms = 1;
    /* the staging buffers of SCAN_MIN_BLOCKS blocks must fit next to each other on an SM */
    CUDA_CHECK(cudaFuncSetAttribute((const void *)scan_kernel<true>,
                                    cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    CUDA_CHECK(cudaFuncSetAttribute((const void *)scan_kernel<false>,
                                    cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    c->grid_vec = grid_for((const void *)scan_kernel<true>, c->tiles, sms);
    c->grid_scalar = grid_for((const void *)scan_kernel<false>, c->tiles, sms);
    const size_t bytes = sizeof(u64) * ((size_t)c->tiles + 1);
    CUDA_CHECK(cudaMalloc(&c->state, bytes));
    /* counter 0, every status word of epoch 0 (never a call's epoch) */
    CUDA_CHECK(cudaMemsetAsync(c->state, 0, bytes, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params;
    int64_t n;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || n < 1 || n > INT32_MAX) return 1;
    scan_ctx *c = (scan_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->tiles = (unsigned)((n + SCAN_TILE - 1) / SCAN_TILE);
    if (init_ctx(c, stream)) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    scan_ctx *c = (scan_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->n)) return 1;
    const int *x = (const int *)in[0].data;
    int *y = (int *)out[0].data;
    c->epoch = c->epoch >= EPOCH_MAX ? 1u : c->epoch + 1u;
    unsigned *counter = (unsigned *)c->state;
    u64 *status = (u64 *)c->state + 1;
    const bool vec = (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
    if (vec)
        scan_kernel<true><<<c->grid_vec, SCAN_THREADS, 0, stream>>>(x, y, c->n, c->tiles, status,
                                                                     counter, c->epoch);
    else
        scan_kernel<false><<<c->grid_scalar, SCAN_THREADS, 0, stream>>>(x, y, c->n, c->tiles,
                                                                         status, counter,
                                                                         c->epoch);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
