/* Expert for t4/flash_attention: causal attention forward, bf16 [B, H, T, 128] in and out,
 * fused (the T x T scores never leave the chip). Two kernels, picked at st_init:
 * - on an sm_90 device with a build for sm_90a, a FlashAttention-3-style kernel (the "Hopper
 *   path" below): TMA loads into an mbarrier ring, wgmma with operands in 128-byte-swizzled
 *   shared memory, two consumer warpgroups taking turns, P·V from registers, a persistent grid
 *   over head groups. By default (HP_PRODUCER_WG 1) it has FA3's shape: 384 threads, a producer
 *   warpgroup that gives its registers back (setmaxnreg 24) and two consumer warpgroups at 240;
 *   -DHP_PRODUCER_WG=0 builds the 8-warp variant whose loads are issued by one consumer thread.
 * - everywhere else (sm_80, and sm_100a, where the sm_90a wgmma does not exist), and on sm_90 if
 *   the Hopper path cannot be set up, the FlashAttention-2-style mma.sync kernel that was this
 *   task's first expert, unchanged. Misaligned tensors (never seen with cudaMalloc) go through
 *   aligned copies into either kernel.
 * Both keep the softmax online in fp32 with base-2 exponentials and the 1/sqrt(D) folded in,
 * round P to bf16 for P·V, skip key tiles past the diagonal, mask only the diagonal tile, and
 * issue the heaviest query blocks first.
 * Measured on an H200 (tests/gpu/wgmma_selftest.cu's bench, eval size B 4 H 16 T 4096, every
 * self-test case passing): 0.4609 ms (597 TFLOP/s) for the default build, 0.9636 ms for the
 * 8-warp build, 1.018 ms for the mma.sync kernel; PyTorch SDPA with cuDNN takes 0.511 ms. */
#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes through the runtime */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define HEAD_DIM 128
#define BLOCK_Q 64   /* queries a block */
#define BLOCK_K 64   /* keys a tile */
#define THREADS 128  /* 4 warps x 16 query rows */
#define TILE_ELEMS (64 * HEAD_DIM)
#define SMEM_BYTES (5 * TILE_ELEMS * 2)  /* Q, two K buffers, two V buffers: 80 KiB */

typedef struct attn_ctx {
    int64_t B, H, T;
    /* 16-byte-aligned copies for the (never seen in practice) case of misaligned pointers */
    __nv_bfloat16 *q, *k, *v, *o;
    int use_hp;    /* the sm_90a kernel (set in st_init) */
    struct hp_state *hp;
} attn_ctx;

/* ------------------------------------------------------------------------------------------ */
/* shared-memory layout and PTX wrappers */

/* Element (r, c) of a 64 x 128 bf16 tile, c a multiple of 8: rows are 16 chunks of 16 bytes and
 * chunk c/8 is stored at position (c/8) ^ (r % 8), so 8 consecutive rows of one logical chunk
 * (an ldmatrix 8x8 matrix, or a cp.async burst) fall in 8 different bank groups. */
__device__ __forceinline__ int swz(int r, int c) {
    return r * HEAD_DIM + ((c >> 3) ^ (r & 7)) * 8;
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared; src_bytes = 0 writes zeros (rows past T) */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);  /* lo in the low half: lower column */
    uint32_t u;
    memcpy(&u, &b, sizeof(u));
    return u;
}

/* Rows row0 .. row0+63 of one head's [T, 128] matrix into a swizzled tile; rows >= T are zero
 * so that masked keys meet finite V values (0 * garbage could be NaN). 8 chunks a thread. */
__device__ __forceinline__ void load_tile(__nv_bfloat16 *tile, const __nv_bfloat16 *src,
                                          int row0, int T) {
#pragma unroll
    for (int it = 0; it < TILE_ELEMS / 8 / THREADS; it++) {
        const int id = threadIdx.x + it * THREADS;
        const int r = id / 16, c = (id % 16) * 8;
        const bool in = row0 + r < T;
        const __nv_bfloat16 *g = in ? src + (size_t)(row0 + r) * HEAD_DIM + c : src;
        cp_async16(tile + swz(r, c), g, in ? 16 : 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* kernel */

__global__ void __launch_bounds__(THREADS, 2)
flash_attn_fwd_kernel(const __nv_bfloat16 *__restrict__ Q, const __nv_bfloat16 *__restrict__ K,
                      const __nv_bfloat16 *__restrict__ V, __nv_bfloat16 *__restrict__ O,
                      int T, int BH, int n_qblocks, float scale_log2) {
    extern __shared__ __align__(128) unsigned char smem[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)smem;
    __nv_bfloat16 *Ks = Qs + TILE_ELEMS;      /* two buffers */
    __nv_bfloat16 *Vs = Ks + 2 * TILE_ELEMS;  /* two buffers */

    /* block b: query block n_qblocks-1 - b/BH of head b%BH, so the longest rows start first */
    const int qb = n_qblocks - 1 - (int)(blockIdx.x / BH);
    const int head = (int)(blockIdx.x % BH);
    const int q0 = qb * BLOCK_Q;
    const int n_tiles = qb + 1;  /* keys 0 .. q0+63: BLOCK_K == BLOCK_Q */
    const size_t head_off = (size_t)head * T * HEAD_DIM;
    const __nv_bfloat16 *q = Q + head_off, *k = K + head_off, *v = V + head_off;

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, tq = lane % 4;  /* mma fragment coordinates */

    /* commit groups, in order: {Q, K0}, {V0}, then {K n+1}, {V n+1} in iteration n */
    load_tile(Qs, q, q0, T);
    load_tile(Ks, k, 0, T);
    cp_async_commit();
    load_tile(Vs, v, 0, T);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    /* this warp's 16 query rows as A fragments, all of D: 8 k16 steps */
    uint32_t qf[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; kk++)
        ldmatrix_x4(qf[kk], Qs + swz(warp * 16 + lane % 16, kk * 16 + (lane / 16) * 8));

    float o[16][4];
#pragma unroll
    for (int t = 0; t < 16; t++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[t][e] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY};  /* rows g and g+8, in log2 units */
    float l_run[2] = {0.0f, 0.0f};             /* this thread's share of the row sums */

    for (int n = 0; n < n_tiles; n++) {
        if (n > 0) {
            cp_async_wait<1>();  /* K n has landed (V n may still be in flight) */
            __syncthreads();     /* ... for every thread; and buffers n-1 are free again */
        }
        if (n + 1 < n_tiles) load_tile(Ks + ((n + 1) & 1) * TILE_ELEMS, k, (n + 1) * BLOCK_K, T);
        cp_async_commit();
        if (n + 1 < n_tiles) load_tile(Vs + ((n + 1) & 1) * TILE_ELEMS, v, (n + 1) * BLOCK_K, T);
        cp_async_commit();

        /* S = Q·K^T: 16 x 64 a warp, 8 n8 tiles */
        const __nv_bfloat16 *Kb = Ks + (n & 1) * TILE_ELEMS;
        float s[8][4];
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[t][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
#pragma unroll
            for (int p = 0; p < 4; p++) {
                /* matrices: keys 0-7 d 0-7, keys 0-7 d 8-15, keys 8-15 d 0-7, keys 8-15 d 8-15 */
                uint32_t r[4];
                ldmatrix_x4(r, Kb + swz(p * 16 + lane % 8 + (lane / 16) * 8,
                                        kk * 16 + ((lane / 8) % 2) * 8));
                mma_bf16_16816(s[2 * p], qf[kk], r[0], r[1]);
                mma_bf16_16816(s[2 * p + 1], qf[kk], r[2], r[3]);
            }
        }

        /* causal mask, diagonal tile only: key > query gets -inf (keys >= T are all > query) */
        if (n == qb) {
            const int qrow = q0 + warp * 16 + g;
#pragma unroll
            for (int t = 0; t < 8; t++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = n * BLOCK_K + t * 8 + 2 * tq + (e & 1);
                    if (key > qrow + (e / 2) * 8) s[t][e] = -INFINITY;
                }
        }

        /* online softmax; a row is spread over the 4 threads of a quad */
        float alpha[2], m_use[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float mx = -INFINITY;
#pragma unroll
            for (int t = 0; t < 8; t++) mx = fmaxf(mx, fmaxf(s[t][2 * h], s[t][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[h], mx * scale_log2);
            /* a row with nothing unmasked yet keeps everything at 0 instead of NaN */
            m_use[h] = m_new == -INFINITY ? 0.0f : m_new;
            alpha[h] = exp2f(m_run[h] - m_use[h]);
            m_run[h] = m_new;
        }
        float rowsum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int t = 0; t < 8; t++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[t][e] = exp2f(fmaf(s[t][e], scale_log2, -m_use[e / 2]));
                rowsum[e / 2] += s[t][e];
            }
#pragma unroll
        for (int h = 0; h < 2; h++) l_run[h] = l_run[h] * alpha[h] + rowsum[h];
#pragma unroll
        for (int t = 0; t < 16; t++) {
            o[t][0] *= alpha[0];
            o[t][1] *= alpha[0];
            o[t][2] *= alpha[1];
            o[t][3] *= alpha[1];
        }

        /* P as A fragments: k16 step kk is key tiles 2kk (cols 0-7) and 2kk+1 (cols 8-15) */
        uint32_t pf[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            pf[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            pf[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            pf[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pf[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }

        cp_async_wait<2>();  /* V n has landed (K n+1 and V n+1 may still be in flight) */
        __syncthreads();

        /* O += P·V: V tile is [key][d], read transposed into B fragments */
        const __nv_bfloat16 *Vb = Vs + (n & 1) * TILE_ELEMS;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int dp = 0; dp < 8; dp++) {
                /* matrices: keys 0-7 d 0-7, keys 8-15 d 0-7, keys 0-7 d 8-15, keys 8-15 d 8-15 */
                uint32_t r[4];
                ldmatrix_x4_trans(r, Vb + swz(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8,
                                              dp * 16 + (lane / 16) * 8));
                mma_bf16_16816(o[2 * dp], pf[kk], r[0], r[1]);
                mma_bf16_16816(o[2 * dp + 1], pf[kk], r[2], r[3]);
            }
        }
    }
    cp_async_wait<0>();  /* nothing useful is pending, but leave no copy in flight */

    /* finish the rows: full sums across the quad, divide, round to bf16 */
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[h] = 1.0f / l;
    }
    /* Stage the warp's 16 x 128 output in its own rows of the Q tile (only this warp ever read
     * them), then write whole 16-byte chunks of rows < T. */
    const int wrow = warp * 16;
#pragma unroll
    for (int t = 0; t < 16; t++) {
        const int c = t * 8, within = 2 * tq;
        *(uint32_t *)(Qs + swz(wrow + g, c) + within) = pack_bf16(o[t][0] * inv[0], o[t][1] * inv[0]);
        *(uint32_t *)(Qs + swz(wrow + g + 8, c) + within) = pack_bf16(o[t][2] * inv[1], o[t][3] * inv[1]);
    }
    __syncwarp();
    __nv_bfloat16 *out = O + head_off;
#pragma unroll
    for (int it = 0; it < 16 * 16 / 32; it++) {
        const int id = lane + it * 32;
        const int r = id / 16, c = (id % 16) * 8;
        const int row = q0 + wrow + r;
        if (row < T)
            *(uint4 *)(out + (size_t)row * HEAD_DIM + c) = *(const uint4 *)(Qs + swz(wrow + r, c));
    }
}

/* ==== Hopper (sm_90a) path: begins here; t2/attention_causal/expert.cu has the same wgmma,
 * softmax, layout and scheduling code but another load issuer (a producer warp: 288 threads fit
 * at D = 64) and waits for V_{n-1} after the ping-pong turn, not before it ==== */
/* FlashAttention-3-style forward for sm_90a. The work items are (query block of HP_BM = 128
 * rows, head) pairs, in groups of a few heads, heaviest first within a group; a persistent grid
 * of one block an SM takes them greedily from a global counter (hp_fetch). A block has two
 * consumer warpgroups of 64 query rows each and, by default (HP_PRODUCER_WG 1), a producer
 * warpgroup, one thread of which (hp_producer) issues the TMA loads; with HP_PRODUCER_WG 0 the
 * block has only the 8 consumer warps and one of their threads (hp_issuer) issues the loads.
 * The loads (cp.async.bulk.tensor) bring the Q tile (double-buffered across work items) and
 * 128-key K and V tiles into a HP_STAGES-deep ring guarded by mbarriers (full: TMA bytes landed;
 * empty: all 8 consumer warps are done with the buffer), running ahead into the next work item
 * while the consumers finish the current one. Tiles are stored as the TMA writes them with
 * CU_TENSOR_MAP_SWIZZLE_128B: 64-column (128-byte) panels of 128 rows, which is exactly
 * wgmma's canonical SW128 layout: K-major for Q and K (operands of S = Q·K^T) and N-major for V
 * (the B operand of O += P·V). S comes from an SS wgmma m64n128k16 (D/16 k16 steps); P is
 * rounded to bf16 straight from S's accumulator registers, which for 16-bit types already are
 * wgmma's A-register fragment, and O += P·V is an RS wgmma. Within a warpgroup the P·V of tile
 * n-1 is issued right behind S of tile n, so the softmax of tile n runs while the tensor cores
 * still work on P·V (FA3's intra-warpgroup overlap); across the two warpgroups a pair of named
 * barriers makes them take turns issuing (FA3's ping-pong), so one warpgroup's softmax hides
 * behind the other's matmuls. Registers: S (64), P (32) and O (D/2) a consumer thread at once.
 * HP_PRODUCER_WG 1: 384 threads, 168 registers each at launch (3 warps a scheduler), then
 * setmaxnreg moves them: the producer warpgroup drops to 24, the consumers rise to 240.
 * HP_PRODUCER_WG 0: 256 threads, no setmaxnreg (2 warps a scheduler may hold 255 registers a
 * thread). On an H200 the producer build ran 2.1x faster (0.461 against 0.964 ms at eval): the
 * folded issuer sits on warpgroup 1's critical path. O is stored from registers.
 * Debug switches: -DHP_PINGPONG=0 drops the named-barrier turn-taking; -DHP_SERIAL=1 waits for
 * every S product right after it is issued; -DHP_PERSISTENT=0 launches one block a work item;
 * -DHP_STAGES=3 deepens the K/V ring; -DHP_DISABLE=1 forces the sm_80 kernel everywhere;
 * -DHP_SCHED=0 replaces the global work counter by a static snake order over all heads;
 * -DHP_QBUFS=1 keeps one Q tile (the next item's Q then waits for the last S product);
 * -DHP_WATCHDOG=0 or 22: a stuck barrier wait spins forever, or traps after 2^22 polls (22 is
 * the 8-warp build's default; with the producer warpgroup it costs spills, see HP_WATCHDOG);
 * -DHP_PRODUCER_WG=0 builds the 8-warp variant, where -DHP_ISSUER=0 lets warpgroup 0's first
 * thread issue the loads instead of warpgroup 1's. Layout alternatives for bisecting on a GPU
 * (wgmma_selftest.cu names them): -DHP_NMAJOR_LBO=1024
 * -DHP_NMAJOR_SBO=16384 swaps the two offsets of V's descriptor; -DHP_PFRAG_ALT=1 swaps the
 * middle two registers of P's A fragments. */
#ifndef HP_PINGPONG
#define HP_PINGPONG 1
#endif
#ifndef HP_SERIAL
#define HP_SERIAL 0
#endif
#ifndef HP_DISABLE
#define HP_DISABLE 0
#endif
#ifndef HP_NMAJOR_LBO
#define HP_NMAJOR_LBO HP_PANEL /* N-major: byte distance between 64-column panels of V */
#endif
#ifndef HP_NMAJOR_SBO
#define HP_NMAJOR_SBO 1024     /* N-major: byte distance between 8-key atoms of V */
#endif
#ifndef HP_PFRAG_ALT
#define HP_PFRAG_ALT 0
#endif
#ifndef HP_PRODUCER_WG
/* 1: a producer warpgroup issues the loads (384 threads, setmaxnreg 24/240), FA3's shape and the
 * faster one on the H200; 0: 8 warps, one consumer thread issuing the loads (hp_issuer) */
#define HP_PRODUCER_WG 1
#endif
#ifndef HP_WATCHDOG
/* log2 of the polls before a stuck mbarrier wait traps; 0: never. Off with HP_PRODUCER_WG: a
 * trap anywhere in the kernel makes ptxas 13.0 give up setmaxnreg's per-warpgroup register
 * budgets (the whole kernel then gets the launch's 168 and spills). So in the default build a
 * protocol bug hangs the kernel until whoever launched it gives up on it. */
#define HP_WATCHDOG (HP_PRODUCER_WG ? 0 : 22)
#endif
#ifndef HP_SCHED
#define HP_SCHED 1 /* 1: work items from a global counter, grouped by heads; 0: static snake */
#endif
#ifndef HP_GROUP_BYTES
#define HP_GROUP_BYTES (8 << 20) /* K + V bytes of a group of heads (HP_SCHED 1) */
#endif
#ifndef HP_PERSISTENT
#define HP_PERSISTENT 1 /* 0: one block a work item (the hardware schedules them) */
#endif
#ifndef HP_QBUFS
#define HP_QBUFS -1 /* Q tiles in flight: -1 = 2 where shared memory allows, else 1 */
#endif
#ifndef HP_STAGES
#define HP_STAGES 2
#endif
#define HP_BM 128        /* queries a block: two consumer warpgroups of 64 rows */
#define HP_BN 128        /* keys a tile */
#if HP_PRODUCER_WG
#define HP_THREADS 384   /* two consumer warpgroups and a producer warpgroup */
#else
#define HP_THREADS 256   /* two consumer warpgroups; one of their threads issues the loads */
#endif
#define HP_PANEL 16384   /* one 128-row x 128-byte swizzle panel */

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HP_DEVICE 1 /* wgmma, TMA and mbarrier transactions exist (sm_90a only; not sm_100a) */
#else
#define HP_DEVICE 0
#endif

/* Shared-memory map of a block (byte offsets from a 1024-aligned base: SW128 tiles need it). */
template <int D>
struct hp_cfg {
    static constexpr int PANELS = D / 64;               /* 128-byte panels a row */
    static constexpr int TILE = HP_BN * D * 2;          /* one 128-row tile (Q, K or V) */
    static constexpr int QBUFS = HP_QBUFS < 0 ? (D == 128 && HP_STAGES > 2 ? 1 : 2) : HP_QBUFS;
    static constexpr int OFF_K = QBUFS * TILE;          /* Q tiles first */
    static constexpr int OFF_V = OFF_K + HP_STAGES * TILE;
    static constexpr int OFF_BAR = OFF_V + HP_STAGES * TILE;
    static constexpr int N_BAR = 2 * QBUFS + 4 * HP_STAGES; /* see hp_bars */
    static constexpr int SMEM = OFF_BAR + 8 * N_BAR + 1024; /* + slack to align the base */
    static_assert(SMEM <= 227 * 1024, "shared memory: fewer stages or Q buffers");
    static_assert(D == 64 || D == 128, "head dimension");
};

/* What a kernel needs besides the tensor maps. */
struct hp_params {
    __nv_bfloat16 *O;
    int *sched;      /* HP_SCHED 1: {next work item, blocks done}, zero between launches */
    int T, BH, n_qblocks;
    int hpg;         /* heads a group (see hp_decode) */
    float scale_log2;
};

#if HP_DEVICE
__device__ __forceinline__ uint32_t hp_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarriers (PTX ISA 9.7.13.15) ---- */
/* A block's barriers. full_*: the issuer's arrive.expect_tx plus the TMA bytes (count 1);
 * empty_*: one arrival from each of the 8 consumer warps once it is done with the buffer. */
template <int QB>
struct hp_bars {
    uint32_t b;
    __device__ uint32_t full_q(int i) const { return b + 8 * i; }
    __device__ uint32_t full_k(int s) const { return b + 8 * (QB + s); }
    __device__ uint32_t full_v(int s) const { return b + 8 * (QB + HP_STAGES + s); }
    __device__ uint32_t empty_k(int s) const { return b + 8 * (QB + 2 * HP_STAGES + s); }
    __device__ uint32_t empty_v(int s) const { return b + 8 * (QB + 3 * HP_STAGES + s); }
    __device__ uint32_t empty_q(int i) const { return b + 8 * (QB + 4 * HP_STAGES + i); }
};
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* The issuer's arrival, announcing how many bytes the TMA copies will complete_tx. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Spin until the phase with the given parity has completed. With HP_WATCHDOG a wait that
 * never ends (a TMA byte count or a parity gone wrong) traps after 2^HP_WATCHDOG polls (at least
 * ~0.1 s; every legitimate wait is microseconds) instead of hanging the GPU. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
#if HP_WATCHDOG
    uint32_t polls = 0;
#endif
    do {
#if HP_WATCHDOG
        if (++polls >> HP_WATCHDOG) __trap();
#endif
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

/* ---- TMA (PTX ISA 9.7.9.27, cp.async.bulk.tensor): one 3-D box {64 columns, 128 rows, 1 head}
 * into a 16 KiB panel; rows past T are zero-filled by the tensor map's bounds. ---- */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, int c0, int c1,
                                            int c2, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
/* A whole 128-row tile: D/64 panels, PANEL bytes apart. */
template <int D>
__device__ __forceinline__ void hp_load_tile(uint32_t dst, const CUtensorMap *map, int row0, int bh,
                                             uint32_t bar) {
    mbar_expect_tx(bar, hp_cfg<D>::TILE);
#pragma unroll
    for (int p = 0; p < hp_cfg<D>::PANELS; p++)
        tma_load_3d(dst + p * HP_PANEL, map, p * 64, row0, bh, bar);
}

/* ---- wgmma (PTX ISA 9.7.15) ---- */
/* Matrix descriptor (9.7.15.5.1, "Matrix Descriptor Format"): bits 0-13 start address >> 4,
 * 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset >> 4, 49-51 base
 * offset (0: every 8-row atom starts 1024-aligned), 62-63 swizzle (1 = 128-byte). */
__device__ __forceinline__ uint64_t hp_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
/* K-major SW128 operand (Q rows or K rows, D contiguous), k16 step kk: the step is 32 bytes
 * inside a 128-byte panel row (the hardware applies the XOR swizzle to the final address, so
 * advancing the start address is right), and the next panel after 4 steps. SBO = 1024: the next
 * 8-row atom; LBO is unused for swizzled K-major layouts (canonical value 1, i.e. 16 bytes). */
__device__ __forceinline__ uint64_t hp_desc_kmajor(uint32_t tile, int kk) {
    return hp_desc(tile + (kk >> 2) * HP_PANEL + (kk & 3) * 32, 16, 1024);
}
/* N-major SW128 operand: the V tile [key][d] is B (K = keys, N = d). k16 step kk is keys
 * 16kk..16kk+15, i.e. two 8-row atoms from row 16kk (2048 bytes a step). SBO = 1024: next 8
 * keys; LBO = PANEL: the next 64 values of d (the second panel, used when N = 128). This is
 * the canonical MN-major SW128 form ((8,n),(8,k)) : ((1,LBO),(8,SBO)) in 16-byte units. */
__device__ __forceinline__ uint64_t hp_desc_nmajor(uint32_t tile, int kk) {
    return hp_desc(tile + kk * 2048, HP_NMAJOR_LBO, HP_NMAJOR_SBO);
}
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving reads or writes of accumulator registers across the
 * asynchronous wgmma's issue/wait points. */
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs_u(uint32_t (&r)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(r[i][j])::"memory");
}

/* ---- named barriers for the warpgroups' turn-taking and epilogue (ids 1-4; 0 is
 * __syncthreads) ---- */
__device__ __forceinline__ void nbar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void nbar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
/* D (+)= A·B, m64n128k16, A and B from shared memory (descriptors), fp32 D. */
__device__ __forceinline__ void wgmma_ss_n128(float d[64], uint64_t da, uint64_t db,
                                              int acc) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
          "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(acc));
}

/* D += A·B, m64n128k16, A from registers (4 x bf16x2 a thread), B from shared memory
 * through its descriptor, N-major (imm-trans-b = 1), fp32 D. */
__device__ __forceinline__ void wgmma_rs_n128(float d[64], const uint32_t a[4], uint64_t db,
                                             int acc) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
          "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* D += A·B, m64n64k16, A from registers (4 x bf16x2 a thread), B from shared memory
 * through its descriptor, N-major (imm-trans-b = 1), fp32 D. */
__device__ __forceinline__ void wgmma_rs_n64(float d[32], const uint32_t a[4], uint64_t db,
                                             int acc) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* ---- the two products of one warpgroup ---- */
/* s = Q_w · K^T for the warpgroup's 64 query rows (Q tile rows from qw) and 128 keys. */
template <int D>
__device__ __forceinline__ void hp_mma_qk(float (&s)[64], uint32_t qw, uint32_t k_tile) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        wgmma_ss_n128(s, hp_desc_kmajor(qw, kk), hp_desc_kmajor(k_tile, kk), kk > 0);
}
/* o += P · V over 128 keys: 8 k16 steps, P from registers. */
template <int D>
__device__ __forceinline__ void hp_mma_pv(float (&o)[D / 2], const uint32_t (&p)[8][4],
                                          uint32_t v_tile) {
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        if constexpr (D == 128)
            wgmma_rs_n128(o, p[kk], hp_desc_nmajor(v_tile, kk), 1);
        else
            wgmma_rs_n64(o, p[kk], hp_desc_nmajor(v_tile, kk), 1);
    }
}

/* Accumulator layout (PTX ISA 9.7.15.5.4, wgmma D fragments): register 4c + 2i + j of a thread
 * holds row 16*warp + lane/4 + 8i, column 8c + 2*(lane%4) + j. The A-register fragment of an
 * m64k16 bf16 product (9.7.15.5.3) holds, in its 4 registers, (row r, cols 2t..2t+1),
 * (row r+8, same), (row r, cols 8+2t..), (row r+8, cols 8+2t..): so k16 step kk of P is made of
 * 8-column groups 2kk and 2kk+1 of S, with no data crossing threads. */
__device__ __forceinline__ uint32_t hp_pack(float lo, float hi) {
    __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);  /* lo in the low half: the lower column */
    uint32_t u;
    memcpy(&u, &b, sizeof(u));
    return u;
}
__device__ __forceinline__ void hp_s_to_p(const float (&s)[64], uint32_t (&p)[8][4]) {
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        p[kk][0] = hp_pack(s[8 * kk + 0], s[8 * kk + 1]);
        p[kk][HP_PFRAG_ALT ? 2 : 1] = hp_pack(s[8 * kk + 2], s[8 * kk + 3]);
        p[kk][HP_PFRAG_ALT ? 1 : 2] = hp_pack(s[8 * kk + 4], s[8 * kk + 5]);
        p[kk][3] = hp_pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
}

/* 2^x with ftz: one MUFU.EX2 (exp2f's non-ftz form adds a denormal range fix-up around it);
 * results below 2^-126 are probabilities far under bf16's resolution of the row sum anyway. */
__device__ __forceinline__ float hp_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Online softmax of one 64 x 128 score tile, in place: s becomes exp2(s*scale - m) (fp32), the
 * running max m_run (log2 units) and this thread's share of the row sums l_run are updated, and
 * alpha is the factor the previous O must be scaled by. row is this thread's first query row
 * (the second is row + 8); on the diagonal tile keys after the row get -inf, which also masks
 * the zero-filled keys past a ragged T (they are after every query). */
__device__ __forceinline__ void hp_softmax(float (&s)[64], float (&m_run)[2], float (&l_run)[2],
                                           float (&alpha)[2], float scale_log2, bool diag, int row,
                                           int key0) {
    const int tq = threadIdx.x % 4;
    if (diag) {
#pragma unroll
        for (int r = 0; r < 64; r++) {
            const int key = key0 + 8 * (r / 4) + 2 * tq + (r & 1);
            if (key > row + 8 * ((r / 2) & 1)) s[r] = -INFINITY;
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < 16; c++) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * i], s[4 * c + 2 * i + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[i], mx * scale_log2);
        /* a row with nothing unmasked yet keeps everything at 0 instead of NaN */
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        alpha[i] = hp_exp2(m_run[i] - m_use);
        m_run[i] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 16; c++) {
#pragma unroll
            for (int j = 0; j < 2; j++) {
                float &x = s[4 * c + 2 * i + j];
                x = hp_exp2(fmaf(x, scale_log2, -m_use));
                sum += x;
            }
        }
        l_run[i] = l_run[i] * alpha[i] + sum;
    }
}

template <int D>
__device__ __forceinline__ void hp_rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int r = 0; r < D / 2; r++) o[r] *= alpha[(r / 2) & 1];
}

/* Work item -> (query block, head). Items come in groups of hpg heads (the last group may be
 * smaller), each group heaviest query block first, so the blocks running at any time share the
 * K and V of a few heads in L2 (the host sizes hpg to keep two groups' K and V near 16 MiB). */
__device__ __forceinline__ void hp_decode(int item, const hp_params &pr, int &qb, int &bh) {
    const int per_group = pr.hpg * pr.n_qblocks;
    const int g = item / per_group, within = item - g * per_group;
    const int gsz = min(pr.hpg, pr.BH - g * pr.hpg);
    qb = pr.n_qblocks - 1 - within / gsz;
    bh = g * pr.hpg + within % gsz;
}

/* The block's next work item (>= n_items: none left). HP_SCHED 1: a global counter, so the
 * blocks take items greedily in order (heaviest first within each group of heads) and finish
 * together. HP_SCHED 0: a static snake order over all heads (round r left to right when even,
 * right to left when odd; the host then makes one group of all heads). */
__device__ __forceinline__ int hp_fetch(const hp_params &pr, int r, int n_items) {
    if (HP_SCHED) return atomicAdd(pr.sched, 1);
    const long long item = (long long)r * gridDim.x +
                           ((r & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
    return item < n_items ? (int)item : n_items;
}

/* Called once a block has seen the end: the last block to see it leaves the counters zeroed for
 * the next launch (no block fetches after its end). */
__device__ __forceinline__ void hp_sched_done(const hp_params &pr) {
    if (HP_SCHED && atomicAdd(pr.sched + 1, 1) == (int)gridDim.x - 1) {
        atomicExch(pr.sched, 0);
        atomicExch(pr.sched + 1, 0);
    }
}

/* ---- the load issuer ----
 * HP_PRODUCER_WG 1 (default): thread 256, the first of the producer warpgroup, runs hp_pump in a
 * loop (hp_producer) and nothing else. HP_PRODUCER_WG 0 (8 warps, 255 registers a thread): one
 * consumer thread, HP_ISSUER (thread 0 of warpgroup 1, which issues second in the ping-pong
 * and so is normally the last to free a ring buffer), issues all TMA loads of the block in the
 * consumers' order: per work item the item number into its Q buffer's slot and Q, then K_0, K_1,
 * V_0, K_2, V_1, ..., V_last (P·V lags S by a tile, so no wait for a V buffer holds back a K
 * load needed earlier); tile x (counted over the block's life) goes to stage x % HP_STAGES.
 * It never blocks on a buffer: hp_pump issues while the next load's buffer has been released by
 * all 8 consumer warps (empty barrier, parity of the use) and returns at the first that has not.
 * It pumps while its warpgroup waits for a tile (hp_wait) and after releasing a K tile. Its only
 * other blocking wait is the ping-pong turn, which it enters having waited for every tile the
 * other warpgroup needs to give the turn back (K_n and V_{n-1} are waited for before the turn),
 * so nothing it waits for depends on a load it has not issued. hp_issuer is the pump's state: in
 * every thread's registers, live only in the issuer's. */
#ifndef HP_ISSUER
/* the issuing thread: lane 0 of a consumer warp (0 also works); -1: none (HP_PRODUCER_WG) */
#define HP_ISSUER (HP_PRODUCER_WG ? -1 : 128)
#endif
struct hp_issuer {
    int on;      /* this thread issues, and the end is not announced yet */
    int claim;   /* the item claimed for the next Q load (>= n_items: none left) */
    int bh, nt;  /* the item being loaded: head, key tiles */
    int step;    /* its next load: 0 Q, 1 .. 2nt K/V (hp_pump), 2nt + 1: claim the next item */
    uint32_t x;  /* K/V tiles of earlier items */
    uint32_t qi; /* earlier items */
};
/* What the loads address: the 1024-aligned shared base, the Q buffers' item slots, the maps. */
struct hp_io {
    uint32_t base;
    volatile int *slot;
    const CUtensorMap *tq, *tk, *tv;
};

/* mbarrier probe: has the phase with this parity completed? WAIT: try_wait, which may suspend
 * the thread for a while first (for a producer with nothing else to do); else test_wait, which
 * returns at once. */
template <bool WAIT = false>
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
    uint32_t done;
    if constexpr (WAIT)
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    else
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    return done != 0;
}

/* The Q step of hp_pump: the claimed item into its Q buffer's slot (published by the arrive,
 * a release, to the consumers' acquiring wait) and its Q, or the end, once the consumers are
 * done with the buffer's previous item. false: the buffer is still in use. */
template <int D, bool WAIT>
__device__ __forceinline__ bool hp_issue_q(hp_issuer &is, const hp_io &io, const hp_params &pr) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {io.base + C::OFF_BAR};
    const int qs = is.qi % C::QBUFS, quse = is.qi / C::QBUFS;
    if (quse > 0 && !mbar_test<WAIT>(bars.empty_q(qs), (quse - 1) & 1)) return false;
    io.slot[qs] = is.claim;
    if (is.claim >= pr.n_qblocks * pr.BH) {
        mbar_arrive(bars.full_q(qs)); /* completes without bytes: the consumers read the end */
        is.on = 0;
        hp_sched_done(pr);
        return true;
    }
    int qb;
    hp_decode(is.claim, pr, qb, is.bh);
    is.nt = qb + 1; /* keys 0 .. q0 + 127: HP_BN == HP_BM */
    hp_load_tile<D>(io.base + qs * C::TILE, io.tq, qb * HP_BM, is.bh, bars.full_q(qs));
    is.step = 1;
    return true;
}

/* Issue loads in order until the next one's buffer is still in use. After an item's last load
 * it claims the next item and returns, so the claim's atomic completes while the consumers work
 * (the claim is used by the next pump's Q step). Step s of an item of nt tiles: 1 is K_0, 2m
 * (0 < m < nt) K_m, 2m + 1 V_{m-1}, 2nt V_{nt-1}. */
template <int D, bool WAIT = false>
__device__ __forceinline__ void hp_pump(hp_issuer &is, const hp_io &io, const hp_params &pr) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {io.base + C::OFF_BAR};
    while (is.on) {
        if (is.step == 0) {
            if (!hp_issue_q<D, WAIT>(is, io, pr)) return;
            continue;
        }
        if (is.step > 2 * is.nt) {
            is.claim = hp_fetch(pr, (int)is.qi + 1, pr.n_qblocks * pr.BH);
            is.x += is.nt;
            is.qi++;
            is.step = 0;
            return;
        }
        const bool k = is.step == 1 || (is.step % 2 == 0 && is.step < 2 * is.nt);
        const int n = k ? is.step / 2 : is.step == 2 * is.nt ? is.nt - 1 : is.step / 2 - 1;
        const uint32_t xt = is.x + n;
        const int st = xt % HP_STAGES, use = xt / HP_STAGES;
        if (use > 0 && !mbar_test<WAIT>(k ? bars.empty_k(st) : bars.empty_v(st), (use - 1) & 1))
            return;
        hp_load_tile<D>(io.base + (k ? C::OFF_K : C::OFF_V) + st * C::TILE, k ? io.tk : io.tv,
                        n * HP_BN, is.bh, k ? bars.full_k(st) : bars.full_v(st));
        is.step++;
    }
}

/* HP_PRODUCER_WG: the issuer as a thread of its own (FA3's producer), pumping until the end is
 * announced; try_wait lets it sleep on a busy buffer instead of spinning. */
template <int D>
__device__ __forceinline__ void hp_producer(const hp_io &io, const hp_params &pr) {
    hp_issuer is = {1, hp_fetch(pr, 0, pr.n_qblocks * pr.BH), 0, 0, 0, 0u, 0u};
    while (is.on) hp_pump<D, true>(is, io, pr);
}

/* A consumer thread's wait for two barrier phases (a tile, Q or the end; pass the same one twice
 * for one). The issuer pumps while it waits, so it never waits for a load it has not issued. */
template <int D>
__device__ __forceinline__ void hp_wait2(hp_issuer &is, const hp_io &io, const hp_params &pr,
                                         uint32_t bar0, uint32_t par0, uint32_t bar1,
                                         uint32_t par1) {
    if (!is.on) {
        mbar_wait(bar0, par0);
        mbar_wait(bar1, par1);
        return;
    }
#if HP_WATCHDOG
    uint32_t polls = 0;
#endif
    for (;;) {
        hp_pump<D>(is, io, pr);
        if (mbar_test(bar0, par0) && mbar_test(bar1, par1)) return;
#if HP_WATCHDOG
        if (++polls >> HP_WATCHDOG) __trap();
#endif
    }
}
template <int D>
__device__ __forceinline__ void hp_wait(hp_issuer &is, const hp_io &io, const hp_params &pr,
                                        uint32_t bar, uint32_t parity) {
    hp_wait2<D>(is, io, pr, bar, parity, bar, parity);
}

/* O / l rounded to bf16 and stored straight from the accumulators: a warp's store covers 16
 * bytes of each of 8 rows, and the next 8-column group fills the other half of those 32-byte
 * sectors in L2, so DRAM sees whole sectors; rows >= T are not written. (No shared-memory
 * staging: the Q tile is already being refilled for the next work item.) */
template <int D>
__device__ __forceinline__ void hp_epilogue(const float (&o)[D / 2], const float (&l_run)[2],
                                            __nv_bfloat16 *out, int row, int T) {
    const int tq = threadIdx.x % 4;
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float l = l_run[i];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[i] = 1.0f / l;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (row + 8 * i >= T) continue;
        __nv_bfloat16 *dst = out + (size_t)(row + 8 * i) * D + 2 * tq;
#pragma unroll
        for (int c = 0; c < D / 8; c++)
            *(uint32_t *)(dst + 8 * c) =
                hp_pack(o[4 * c + 2 * i] * inv[i], o[4 * c + 2 * i + 1] * inv[i]);
    }
}

/* One work item for one consumer warpgroup (wg 0 or 1: query rows q0 + 64wg ..); x counts the
 * block's K/V tiles so far (stage and phase), qi its work items (Q's buffer and phase).
 * Iteration n issues S_n = Q·K_n^T and then P_{n-1}·V_{n-1}, hands the issue turn to the other
 * warpgroup, and runs the softmax of S_n while P·V is still on the tensor cores; P_n is made once
 * P·V_{n-1} is done with P_{n-1}. Both K_n and V_{n-1} are waited for before the turn (the
 * issuer's deadlock rule, see hp_issuer). Tile 0 is peeled so that every wgmma issue and wait in
 * the loop is unconditional: ptxas must see that each accumulator is waited for before it is
 * touched, or it serialises all wgmmas. */
template <int D>
__device__ __forceinline__ void hp_consumer_item(hp_issuer &is, const hp_io &io,
                                                 const hp_params &pr, int wg, int qb, int bh,
                                                 uint32_t x, uint32_t qi) {
    typedef hp_cfg<D> C;
    const uint32_t base = io.base;
    const hp_bars<C::QBUFS> bars = {base + C::OFF_BAR};
    const int n_tiles = qb + 1; /* keys 0 .. q0 + 127: HP_BN == HP_BM */
    const int t = threadIdx.x % 128, lane = t % 32;
    const int qs = qi % C::QBUFS;
    const uint32_t qw = base + qs * C::TILE + wg * 64 * 128;
    const int row = qb * HP_BM + wg * 64 + (t / 32) * 16 + lane / 4;
    float o[D / 2], s[64], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}, alpha[2];
    uint32_t p[8][4];
#pragma unroll
    for (int r = 0; r < D / 2; r++) o[r] = 0.0f;
#pragma unroll
    for (int r = 0; r < 64; r++) s[r] = 0.0f;

    /* tile 0: S only */
    hp_wait<D>(is, io, pr, bars.full_k(x % HP_STAGES), (x / HP_STAGES) & 1);
    if (HP_PINGPONG) nbar_sync(1 + wg, 256);
    wgmma_fence();
    hp_mma_qk<D>(s, qw, base + C::OFF_K + (x % HP_STAGES) * C::TILE);
    wgmma_commit();
    if (HP_PINGPONG) nbar_arrive(2 - wg, 256); /* the other warpgroup's turn */
    wgmma_wait<0>();
    fence_regs(s);
    if (lane == 0) {
        mbar_arrive(bars.empty_k(x % HP_STAGES));
        if (n_tiles == 1) mbar_arrive(bars.empty_q(qs)); /* the last S of this item: Q is free */
    }
    hp_softmax(s, m_run, l_run, alpha, pr.scale_log2, n_tiles == 1, row, 0);
    hp_s_to_p(s, p);
    for (int n = 1; n < n_tiles; n++) {
        const uint32_t xn = x + n, xp = xn - 1;
        const int st = xn % HP_STAGES, pst = xp % HP_STAGES;
        /* K_n and V_{n-1} landed */
        hp_wait2<D>(is, io, pr, bars.full_k(st), (xn / HP_STAGES) & 1, bars.full_v(pst),
                    (xp / HP_STAGES) & 1);
        if (HP_PINGPONG) nbar_sync(1 + wg, 256); /* our turn to issue */
        wgmma_fence();
        hp_mma_qk<D>(s, qw, base + C::OFF_K + st * C::TILE);
        wgmma_commit();
        if (HP_SERIAL) { wgmma_wait<0>(); fence_regs(s); }
        hp_rescale<D>(o, alpha); /* alpha_{n-1} O_{n-2}, before P_{n-1}·V_{n-1} is added */
        wgmma_fence();
        hp_mma_pv<D>(o, p, base + C::OFF_V + pst * C::TILE);
        wgmma_commit();
        if (HP_PINGPONG) nbar_arrive(2 - wg, 256);
        wgmma_wait<1>(); /* S_n done (groups retire in order) */
        fence_regs(s);
        if (lane == 0) {
            mbar_arrive(bars.empty_k(st));
            if (n == n_tiles - 1) mbar_arrive(bars.empty_q(qs));
            if (is.on) hp_pump<D>(is, io, pr); /* K_{n+STAGES} may go now */
        }
        hp_softmax(s, m_run, l_run, alpha, pr.scale_log2, n == n_tiles - 1, row, n * HP_BN);
        wgmma_wait<0>(); /* P_{n-1}·V_{n-1} done: P and V_{n-1} may be reused */
        fence_regs(o);
        fence_regs_u(p);
        if (lane == 0) mbar_arrive(bars.empty_v(pst));
        hp_s_to_p(s, p);
    }
    const uint32_t xl = x + n_tiles - 1;
    hp_rescale<D>(o, alpha);
    hp_wait<D>(is, io, pr, bars.full_v(xl % HP_STAGES), (xl / HP_STAGES) & 1);
    wgmma_fence();
    hp_mma_pv<D>(o, p, base + C::OFF_V + (xl % HP_STAGES) * C::TILE);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs_u(p);
    if (lane == 0) mbar_arrive(bars.empty_v(xl % HP_STAGES));
    hp_epilogue<D>(o, l_run, pr.O + (size_t)bh * pr.T * D, row, pr.T);
}

/* A consumer warpgroup's life: the work items announced in the Q buffers' slots, until one says
 * none is left. Turns: warpgroup 1 gives warpgroup 0 the first one, and each warpgroup hands one
 * to the other per tile, so warpgroup 0 ends with one turn unclaimed, which it takes at the end
 * (no named barrier is left with arrivals pending). */
template <int D>
__device__ __forceinline__ void hp_consumer(const hp_io &io, const hp_params &pr) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {io.base + C::OFF_BAR};
    const int n_items = pr.n_qblocks * pr.BH;
    /* warp-uniform as far as ptxas can tell (threadIdx.x / 128 alone makes it assume divergence,
     * and wgmma in a divergent path is serialised) */
    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
    hp_issuer is = {0, 0, 0, 0, 0, 0u, 0u};
    if ((int)threadIdx.x == HP_ISSUER) {
        is.on = 1;
        is.claim = hp_fetch(pr, 0, n_items);
    }
    if (HP_PINGPONG && wg == 1) nbar_arrive(1, 256); /* warpgroup 0 issues first */
    uint32_t x = 0;
    for (int qi = 0;; qi++) {
        const int qs = qi % C::QBUFS;
        hp_wait<D>(is, io, pr, bars.full_q(qs), (qi / C::QBUFS) & 1); /* Q landed, or the end */
        const int item = io.slot[qs];
        if (item >= n_items) break;
        int qb, bh;
        hp_decode(item, pr, qb, bh);
        hp_consumer_item<D>(is, io, pr, wg, qb, bh, x, (uint32_t)qi);
        x += qb + 1;
    }
    if (HP_PINGPONG && wg == 0) nbar_sync(1, 256);
}
#endif /* HP_DEVICE */

/* Persistent: gridDim.x blocks (at most one an SM) take work items until none is left.
 * Compiled empty where wgmma does not exist; the host never launches it there.
 * Registers: an SM's file is four 16,384-register quarters, one per scheduler, and a block's
 * warps are dealt to them in turn. 12 warps (HP_PRODUCER_WG 1) put 3 in a quarter: 168 a thread
 * at launch (3 x 32 x 168 = 16,128), then 240 + 240 + 24 = 504 x 32 = 16,128 after setmaxnreg.
 * 8 warps (HP_PRODUCER_WG 0) put 2 in a quarter: up to 2 x 32 x 256 = 16,384, i.e. any count
 * ptxas may pick. (Nine warps at 199 registers, the first design, put 3 x 6,400 in one quarter:
 * "too many resources requested for launch"; with the watchdog's trap in the kernel, 12 warps
 * with setmaxnreg made ptxas 13.0 allocate the whole kernel within the launch's 168 and spill:
 * see NOTES.md.) */
template <int D>
__global__ void __launch_bounds__(HP_THREADS, 1)
hp_attn_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
               const __grid_constant__ CUtensorMap tv, const hp_params pr) {
#if HP_DEVICE
    typedef hp_cfg<D> C;
    extern __shared__ unsigned char hp_smem[];
    __shared__ int slot[C::QBUFS]; /* the work item of each Q buffer */
    const uint32_t raw = hp_u32(hp_smem), base = (raw + 1023u) & ~1023u;
    if (threadIdx.x == 0) {
        const hp_bars<C::QBUFS> bars = {base + C::OFF_BAR};
        for (int i = 0; i < C::QBUFS; i++) {
            mbar_init(bars.full_q(i), 1);
            mbar_init(bars.empty_q(i), 8);
        }
        for (int s = 0; s < HP_STAGES; s++) {
            mbar_init(bars.full_k(s), 1);
            mbar_init(bars.full_v(s), 1);
            mbar_init(bars.empty_k(s), 8);
            mbar_init(bars.empty_v(s), 8);
        }
        /* make the initialised barriers visible to the async proxy (the TMA unit) */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();
    const hp_io io = {base, slot, &tq, &tk, &tv};
#if HP_PRODUCER_WG
    /* 12 warps, 3 a scheduler at 168 registers from the launch; the producer warpgroup gives
     * back to 24, the consumers take 240: 240 + 240 + 24 = 504 x 32 <= 16,384 a scheduler. The
     * role is warp-uniform by __shfl_sync, as setmaxnreg.sync.aligned needs. */
    if (__shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0) == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (threadIdx.x == 256) hp_producer<D>(io, pr);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
#endif
    hp_consumer<D>(io, pr);
#else
    (void)tq; (void)tk; (void)tv; (void)pr;
#endif
}

/* ---- host side of the Hopper path ---- */
typedef CUresult (*hp_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled through the runtime (no -lcuda at link time). */
static hp_encode_fn hp_get_encoder(void) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return (hp_encode_fn)fn;
}

/* [BH, T, D] bf16 viewed as a 3-D tensor, boxes of 64 columns x 128 rows x 1 head, 128-byte
 * swizzle, zero fill past T (each head is its own coordinate, so no box reads the next head). */
static int hp_make_map(hp_encode_fn enc, CUtensorMap *m, const void *ptr, int D, int64_t T,
                       int64_t BH) {
    const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)T, (cuuint64_t)BH};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)(T * D * 2)};
    const cuuint32_t box[3] = {64, HP_BN, 1}, elem[3] = {1, 1, 1};
    const CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)ptr, dims, strides, box,
                           elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        fprintf(stderr, "attention expert: cuTensorMapEncodeTiled (D %d, T %lld, B*H %lld): error %d\n",
                D, (long long)T, (long long)BH, (int)r);
    return r == CUDA_SUCCESS ? 0 : 1;
}

/* Launch state: the encoder, the grid size and the tensor maps of the last pointers seen. */
typedef struct hp_state {
    hp_encode_fn enc;
    int n_sms;  /* persistent grid: one block an SM */
    int *sched; /* the kernel's work counters (device memory, zero between launches) */
    int hpg;    /* heads a group */
    const void *ptr[3];
    CUtensorMap map[3];
} hp_state;

static void hp_destroy(hp_state *h) {
    if (h == NULL) return;
    cudaFree(h->sched);
    free(h);
}

/* The Hopper path's state if this process can run hp_attn_kernel<D> for these sizes, else NULL
 * (the caller takes the sm_80 kernel): an sm_90 device, the kernel's body compiled (it is empty
 * unless the build targets sm_90a: an sm_80 build JIT-compiled for an H200, or a plain sm_90
 * build, has ptxVersion < 90 or no static shared memory, the body's slot array), the driver's
 * encoder, and a work-item count that fits an int. */
template <int D>
static hp_state *hp_init(int64_t T, int64_t BH) {
    if (HP_DISABLE || ((T + HP_BM - 1) / HP_BM) * BH > INT32_MAX) return NULL;
    int dev = 0, major = 0, n_sms = 0;
    cudaFuncAttributes fa;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncGetAttributes(&fa, hp_attn_kernel<D>) != cudaSuccess)
        return NULL;
    if (major != 9 || fa.ptxVersion < 90 || fa.sharedSizeBytes == 0 || n_sms < 1) return NULL;
    if (cudaFuncSetAttribute(hp_attn_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             hp_cfg<D>::SMEM) != cudaSuccess)
        return NULL;
    const hp_encode_fn enc = hp_get_encoder();
    if (enc == NULL) return NULL;
    hp_state *h = (hp_state *)calloc(1, sizeof(hp_state));
    if (h == NULL) return NULL;
    h->enc = enc;
    h->n_sms = n_sms;
    if (cudaMalloc(&h->sched, 2 * sizeof(int)) != cudaSuccess ||
        cudaMemset(h->sched, 0, 2 * sizeof(int)) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        hp_destroy(h);
        return NULL;
    }
    /* groups of heads whose K and V take about HP_GROUP_BYTES: the blocks running at a time
     * work on one or two groups, whose K and V then stay in L2 */
    const int64_t per_head = 2 * T * D * 2;
    const int64_t g = HP_GROUP_BYTES / per_head;
    h->hpg = !HP_SCHED ? (int)BH : g < 1 ? 1 : g > BH ? (int)BH : (int)g;
    return h;
}

/* Launch on q, k, v (16-byte aligned) into o; maps are re-encoded only when a pointer moved. */
template <int D>
static int hp_launch(hp_state *h, const void *q, const void *k, const void *v, __nv_bfloat16 *o,
                     int64_t T, int64_t BH, cudaStream_t stream) {
    const void *src[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        if (h->ptr[i] == src[i]) continue;
        if (hp_make_map(h->enc, &h->map[i], src[i], D, T, BH)) return 1;
        h->ptr[i] = src[i];
    }
    const int64_t n_qblocks = (T + HP_BM - 1) / HP_BM, n_items = n_qblocks * BH; /* < 2^31 */
    hp_params pr;
    pr.O = o;
    pr.sched = h->sched;
    pr.T = (int)T;
    pr.BH = (int)BH;
    pr.n_qblocks = (int)n_qblocks;
    pr.hpg = h->hpg;
    pr.scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    const int64_t grid = HP_PERSISTENT && n_items > h->n_sms ? h->n_sms : n_items;
    hp_attn_kernel<D><<<(unsigned)grid, HP_THREADS, hp_cfg<D>::SMEM, stream>>>(
        h->map[0], h->map[1], h->map[2], pr);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        fprintf(stderr, "attention expert: hp_attn_kernel<%d> launch (grid %lld, %d threads, %d bytes "
                "of shared memory): %s\n", D, (long long)grid, HP_THREADS, hp_cfg<D>::SMEM,
                cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
/* ==== Hopper path ends here ==== */
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

static bool tensor_ok(const st_tensor *t, const attn_ctx *c) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
           t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL;
}

static bool aligned16(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}

extern "C" void st_free(void *ctx) {
    attn_ctx *c = (attn_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->q);
    cudaFree(c->k);
    cudaFree(c->v);
    cudaFree(c->o);
    hp_destroy(c->hp);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t B, H, T;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "B", &B) || cfg_get(cfg, "H", &H) || cfg_get(cfg, "T", &T)) return 1;
    if (B < 1 || H < 1 || T < 1 || T > INT32_MAX - BLOCK_Q || B > INT32_MAX / H) return 1;
    const int64_t n_qblocks = (T + BLOCK_Q - 1) / BLOCK_Q;
    if (n_qblocks > INT32_MAX / (B * H)) return 1;  /* one-dimensional grid */

    /* 80 KiB of dynamic shared memory a block, two blocks an SM */
    if (cudaFuncSetAttribute(flash_attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             SMEM_BYTES) != cudaSuccess ||
        cudaFuncSetAttribute(flash_attn_fwd_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared) != cudaSuccess)
        return 1;

    attn_ctx *c = (attn_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->B = B;
    c->H = H;
    c->T = T;
    const size_t bytes = (size_t)(B * H * T * HEAD_DIM) * sizeof(__nv_bfloat16);
    if (cudaMalloc(&c->q, bytes) != cudaSuccess || cudaMalloc(&c->k, bytes) != cudaSuccess ||
        cudaMalloc(&c->v, bytes) != cudaSuccess || cudaMalloc(&c->o, bytes) != cudaSuccess) {
        st_free(c);
        return 1;
    }
    /* the Hopper kernel where it can run; otherwise (or if its setup fails) the sm_80 one */
    c->hp = hp_init<HEAD_DIM>(T, B * H);
    c->use_hp = c->hp != NULL;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const attn_ctx *c = (const attn_ctx *)ctx;
    if (c == NULL || n_in != 3 || n_out != 1) return 1;
    for (int i = 0; i < 3; i++)
        if (!tensor_ok(&in[i], c)) return 1;
    if (!tensor_ok(&out[0], c)) return 1;
    const __nv_bfloat16 *q = (const __nv_bfloat16 *)in[0].data;
    const __nv_bfloat16 *k = (const __nv_bfloat16 *)in[1].data;
    const __nv_bfloat16 *v = (const __nv_bfloat16 *)in[2].data;
    __nv_bfloat16 *o = (__nv_bfloat16 *)out[0].data;
    const int64_t BH = c->B * c->H, n_qblocks = (c->T + BLOCK_Q - 1) / BLOCK_Q;
    const size_t bytes = (size_t)(BH * c->T * HEAD_DIM) * sizeof(__nv_bfloat16);

    /* Rows are 256 bytes, so an aligned base aligns every 16-byte chunk. A misaligned tensor is
     * copied to (or, for O, from) an aligned one: correct, just slower. */
    const bool o_aligned = aligned16(o);
    if (!aligned16(q)) {
        if (cudaMemcpyAsync(c->q, q, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 1;
        q = c->q;
    }
    if (!aligned16(k)) {
        if (cudaMemcpyAsync(c->k, k, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 1;
        k = c->k;
    }
    if (!aligned16(v)) {
        if (cudaMemcpyAsync(c->v, v, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 1;
        v = c->v;
    }

    if (c->use_hp) {
        if (hp_launch<HEAD_DIM>(c->hp, q, k, v, o_aligned ? o : c->o, c->T, BH, stream)) return 1;
    } else {
        const float scale_log2 = 1.4426950408889634f / sqrtf((float)HEAD_DIM);
        flash_attn_fwd_kernel<<<(unsigned)(n_qblocks * BH), THREADS, SMEM_BYTES, stream>>>(
            q, k, v, o_aligned ? o : c->o, (int)c->T, (int)BH, (int)n_qblocks, scale_log2);
        if (cudaGetLastError() != cudaSuccess) return 1;
    }
    if (!o_aligned &&
        cudaMemcpyAsync(o, c->o, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return 1;
    return 0;
}
