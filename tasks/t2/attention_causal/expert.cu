/* Expert for t2/attention_causal: causal attention forward, head dim 64, bf16 [B, H, T, 64]
 * in and out, fused. Two kernels, picked at st_init: on an sm_90 device with a build for sm_90a,
 * a FlashAttention-3-style kernel (TMA loads into an mbarrier ring, wgmma with operands in
 * 128-byte-swizzled shared memory, a producer warp and two consumer warpgroups taking turns, P·V
 * from registers; the "Hopper path" below, instantiated for D = 64); everywhere else (sm_80,
 * sm_100a, where the sm_90a wgmma does not exist) and for misaligned tensors, the
 * FlashAttention-2-style mma.sync kernel that was this task's first expert, unchanged. */
#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes through the runtime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "stitch/solution.h"

#define HEAD_DIM 64
#define BM 128 /* queries per block */
#define BN 64  /* keys per tile */
#define NWARPS (BM / 16)
#define NTHREADS (32 * NWARPS)
#define SMEM_BYTES ((BM + 4 * BN) * HEAD_DIM * 2) /* q tile, two stages of k and v: 48 KiB */

typedef __nv_bfloat16 bf16;

struct hp_state;
typedef struct {
    int B, H, T;
    int use_hp;    /* the sm_90a kernel (set in st_init) */
    struct hp_state *hp;
} attn_ctx;

/* ------------------------------------------------------------------------------------------ */
/* PTX helpers (sm_80 and later) */

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; src_bytes = 0 fills the 16 bytes with zeros */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)) : "memory");
}

/* c += a · b: a is a 16x16 bf16 fragment (4 registers), b a 16x8 one (2 registers) */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* two floats as bf16x2, the first in the low half (the lower k index of a fragment pair) */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, sizeof(u)); /* a register move; no type punning through pointers */
    return u;
}

/* Element offset of 16-byte chunk `chunk` (0..7) of tile row `row`: chunks are permuted by the
 * row's low 3 bits, so the 8 rows one ldmatrix reads (same logical chunk) hit 8 different
 * bank groups. */
__device__ __forceinline__ int swz(int row, int chunk) {
    return row * HEAD_DIM + ((chunk ^ (row & 7)) << 3);
}

/* Rows [row0, row0 + ROWS) of a [T, 64] matrix into a swizzled tile; rows past T become zeros
 * (v's must: 0 · garbage could be NaN). VEC: cp.async, the caller commits and waits. */
template <bool VEC, int ROWS>
__device__ __forceinline__ void load_tile(bf16 *tile, const bf16 *__restrict__ g, int row0, int T) {
#pragma unroll
    for (int i = 0; i < ROWS * 8 / NTHREADS; i++) {
        const int idx = threadIdx.x + i * NTHREADS;
        const int r = idx >> 3, c = idx & 7, gr = row0 + r;
        bf16 *dst = tile + swz(r, c);
        if (VEC) {
            const bf16 *src = g + (size_t)(gr < T ? gr : 0) * HEAD_DIM + c * 8;
            cp_async16(dst, src, gr < T ? 16 : 0);
        } else {
            uint32_t w[4] = {0u, 0u, 0u, 0u};
            if (gr < T) {
                const bf16 *src = g + (size_t)gr * HEAD_DIM + c * 8;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    w[e] = (uint32_t)__bfloat16_as_ushort(src[2 * e]) |
                           ((uint32_t)__bfloat16_as_ushort(src[2 * e + 1]) << 16);
            }
            *(uint4 *)dst = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the kernel: grid (B*H, ceil(T / BM)), block NTHREADS */

template <bool VEC>
__global__ void __launch_bounds__(NTHREADS, 2)
flash_causal_kernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                    const bf16 *__restrict__ v, bf16 *__restrict__ o, int T, float scale_log2) {
    extern __shared__ uint4 smem_raw[];
    bf16 *sQ = (bf16 *)smem_raw;
    bf16 *sK = sQ + BM * HEAD_DIM; /* two stages of BN rows */
    bf16 *sV = sK + 2 * BN * HEAD_DIM;

    /* the last query blocks have the most keys: schedule them first */
    const int qb = gridDim.y - 1 - blockIdx.y;
    const size_t head = (size_t)blockIdx.x * T * HEAD_DIM;
    q += head;
    k += head;
    v += head;
    o += head;
    const int q0 = qb * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3; /* fragment row group and column pair */
    const int wq0 = q0 + warp * 16;          /* this warp's first query */
    const bool warp_live = wq0 < T;
    const int n_tiles = (min(T, q0 + BM) + BN - 1) / BN;

    load_tile<VEC, BM>(sQ, q, q0, T);
    load_tile<VEC, BN>(sK, k, 0, T);
    load_tile<VEC, BN>(sV, v, 0, T);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    float oacc[8][4];
#pragma unroll
    for (int dn = 0; dn < 8; dn++)
        oacc[dn][0] = oacc[dn][1] = oacc[dn][2] = oacc[dn][3] = 0.0f;
    /* rows g and g + 8 of the warp: running max (raw score units) and this thread's part of
     * the running sum (the quad's four parts are added at the end) */
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

    for (int kt = 0; kt < n_tiles; kt++) {
        const int st = kt & 1;
        if (kt > 0) {
            /* tile kt has landed, and every warp is done with tile kt - 1, whose stage the
             * next load reuses */
            cp_async_wait_all();
            __syncthreads();
        }
        if (kt + 1 < n_tiles) {
            load_tile<VEC, BN>(sK + (st ^ 1) * BN * HEAD_DIM, k, (kt + 1) * BN, T);
            load_tile<VEC, BN>(sV + (st ^ 1) * BN * HEAD_DIM, v, (kt + 1) * BN, T);
            cp_async_commit();
        }
        const int k0 = kt * BN;
        /* Tile 0 is never skipped, and key 0 is visible to every row: after it every running
         * max is finite, so no -inf - -inf below. */
        if (!warp_live || k0 > wq0 + 15) continue;
        const bf16 *tK = sK + st * BN * HEAD_DIM, *tV = sV + st * BN * HEAD_DIM;

        /* q fragments for the 4 k-steps of 16 dims: matrices (rows 0-7 | 8-15) x (dims lo |
         * hi). Reloaded from shared memory every tile: 16 registers kept free keep the kernel
         * at 128 registers (2 blocks per SM) without spilling. */
        uint32_t qf[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            ldmatrix_x4(qf[kk], sQ + swz(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
        /* scores: 8 n-tiles of 8 keys; each ldmatrix_x4 brings 4 dim chunks of 8 keys */
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t kb[4];
                ldmatrix_x4(kb, tK + swz(8 * j + (lane & 7), 4 * h + (lane >> 3)));
                mma_bf16(s[j], qf[2 * h], kb[0], kb[1]);
                mma_bf16(s[j], qf[2 * h + 1], kb[2], kb[3]);
            }
        }
        /* causal and end-of-sequence mask, only where some key can be past some row */
        if (k0 + BN - 1 > wq0 || k0 + BN > T) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + 8 * j + 2 * tq + (e & 1), row = wq0 + g + 8 * (e >> 1);
                    if (key > row || key >= T) s[j][e] = -INFINITY;
                }
        }
        /* online softmax */
        float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int j = 0; j < 8; j++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[j][0], s[j][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[j][2], s[j][3]));
        }
        float alpha[2], msc[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            alpha[r] = exp2f((m_run[r] - mx[r]) * scale_log2); /* first tile: exp2(-inf) = 0 */
            m_run[r] = mx[r];
            msc[r] = mx[r] * scale_log2;
        }
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = exp2f(fmaf(s[j][e], scale_log2, -msc[e >> 1])); /* masked: 0 */
                rs[e >> 1] += s[j][e];
            }
#pragma unroll
        for (int r = 0; r < 2; r++) l_run[r] = l_run[r] * alpha[r] + rs[r];
#pragma unroll
        for (int dn = 0; dn < 8; dn++) {
            oacc[dn][0] *= alpha[0];
            oacc[dn][1] *= alpha[0];
            oacc[dn][2] *= alpha[1];
            oacc[dn][3] *= alpha[1];
        }
        /* o += p · v: the score accumulators of n-tiles 2kk and 2kk+1 are exactly the A
         * fragment of k-step kk; v comes in transposed by ldmatrix.trans, two dim tiles a load */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4];
            pa[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < 4; dp++) {
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, tV + swz(16 * kk + (lane & 15), 2 * dp + (lane >> 4)));
                mma_bf16(oacc[2 * dp], pa, vb[0], vb[1]);
                mma_bf16(oacc[2 * dp + 1], pa, vb[2], vb[3]);
            }
        }
    }

    if (!warp_live) return;
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = l_run[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[r] = 1.0f / l; /* l >= 1: the row's maximum contributes exp(0) */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = wq0 + g + 8 * r;
        if (row >= T) continue;
        bf16 *orow = o + (size_t)row * HEAD_DIM + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < 8; dn++) {
            const float a = oacc[dn][2 * r] * inv[r], b = oacc[dn][2 * r + 1] * inv[r];
            if (VEC) {
                *(__nv_bfloat162 *)(orow + 8 * dn) = __floats2bfloat162_rn(a, b);
            } else {
                orow[8 * dn] = __float2bfloat16(a);
                orow[8 * dn + 1] = __float2bfloat16(b);
            }
        }
    }
}

/* ==== Hopper (sm_90a) path begins here ==== */
/* FlashAttention-3-style forward for sm_90a. The work items are (query block of HP_BM = 128
 * rows, head) pairs, in groups of a few heads, heaviest first within a group; a persistent grid
 * of one block an SM takes them greedily from a global counter (hp_fetch). A block has 9 warps: warps 0-7 are two consumer warpgroups of 64 query rows
 * each, warp 8 is the producer, one lane of which issues TMA loads (cp.async.bulk.tensor) of the
 * Q tile (double-buffered across work items) and of 128-key K and V tiles into a
 * HP_STAGES-deep ring guarded by mbarriers (full: TMA bytes landed; empty: all 8 consumer warps
 * are done with the buffer), running ahead into the next work item while the consumers finish
 * the current one. Tiles are stored as the TMA writes
 * them with CU_TENSOR_MAP_SWIZZLE_128B: 64-column (128-byte) panels of 128 rows, which is exactly
 * wgmma's canonical SW128 layout: K-major for Q and K (operands of S = Q·K^T) and N-major for V
 * (the B operand of O += P·V). S comes from an SS wgmma m64n128k16 (D/16 k16 steps); P is
 * rounded to bf16 straight from S's accumulator registers, which for 16-bit types already are
 * wgmma's A-register fragment, and O += P·V is an RS wgmma. Within a warpgroup the P·V of tile
 * n-1 is issued right behind S of tile n, so the softmax of tile n runs while the tensor cores
 * still work on P·V (FA3's intra-warpgroup overlap); across the two warpgroups a pair of named
 * barriers makes them take turns issuing (FA3's ping-pong), so one warpgroup's softmax hides
 * behind the other's matmuls. 288 threads, no setmaxnreg. The register file is four quarters of
 * 16,384, one per scheduler, and the 9 warps are dealt to them in turn, so one quarter holds 3:
 * a thread may use at most 170 registers (158 at D = 64: S (64), P (32) and O (D/2) at once).
 * At D = 128 the same kernel needs 199 and fails to launch ("too many resources"). O is stored from registers.
 * Debug switches: -DHP_PINGPONG=0 drops the named-barrier turn-taking; -DHP_SERIAL=1 waits for
 * every S product right after it is issued; -DHP_PERSISTENT=0 launches one block a work item;
 * -DHP_STAGES=3 deepens the K/V ring; -DHP_DISABLE=1 forces the sm_80 kernel everywhere;
 * -DHP_SCHED=0 replaces the global work counter by a static snake order over all heads;
 * -DHP_QBUFS=1 keeps one Q tile (the next item's Q then waits for the last S product);
 * -DHP_WATCHDOG=0 lets a stuck barrier wait spin forever instead of trapping. Layout
 * alternatives for bisecting on a GPU (wgmma_selftest.cu names them): -DHP_NMAJOR_LBO=1024
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
#ifndef HP_WATCHDOG
#define HP_WATCHDOG 22 /* log2 of the polls before a stuck mbarrier wait traps; 0: never */
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
#define HP_THREADS 288   /* 8 consumer warps + 1 producer warp */
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
    int *sched;      /* HP_SCHED 1: {next work item, producers done}, zero between launches */
    int T, BH, n_qblocks;
    int hpg;         /* heads a group (see hp_decode) */
    float scale_log2;
};

#if HP_DEVICE
__device__ __forceinline__ uint32_t hp_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarriers (PTX ISA 9.7.13.15) ---- */
/* A block's barriers. full_*: the producer's arrive.expect_tx plus the TMA bytes (count 1);
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
/* The producer's arrival, announcing how many bytes the TMA copies will complete_tx. */
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

/* The producer's next work item (>= n_items: none left). HP_SCHED 1: a global counter, so the
 * blocks take items greedily in order (heaviest first within each group of heads) and finish
 * together. HP_SCHED 0: a static snake order over all heads (round r left to right when even,
 * right to left when odd; the host then makes one group of all heads). */
__device__ __forceinline__ int hp_fetch(const hp_params &pr, int r, int n_items) {
    if (HP_SCHED) return atomicAdd(pr.sched, 1);
    const long long item = (long long)r * gridDim.x +
                           ((r & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
    return item < n_items ? (int)item : n_items;
}

/* The producer lane: per work item, the item number into the Q buffer's slot and Q once the
 * consumers released that buffer, then K and V tile x (counted over the whole block's life) into
 * stage x % HP_STAGES as soon as the consumers have released what that stage held before (empty
 * barriers, parity of the use). The order is the consumers' (K_0, K_1, V_0, K_2, V_1, ...,
 * V_last: P·V lags S by a tile), so no wait for a V slot holds back a K load needed earlier. When
 * no item is left, the slot says so and full_q completes without bytes. */
template <int D>
__device__ void hp_producer(uint32_t base, volatile int *slot, const CUtensorMap *tq,
                            const CUtensorMap *tk, const CUtensorMap *tv, const hp_params &pr) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {base + C::OFF_BAR};
    const int n_items = pr.n_qblocks * pr.BH; /* the host checked that this fits */
    uint32_t x = 0; /* tiles so far */
    for (int qi = 0;; qi++) {
        const int qs = qi % C::QBUFS, quse = qi / C::QBUFS;
        if (quse > 0) mbar_wait(bars.empty_q(qs), (quse - 1) & 1);
        const int item = hp_fetch(pr, qi, n_items);
        slot[qs] = item; /* published by the arrive below (release) to the waiters (acquire) */
        if (item >= n_items) {
            mbar_arrive(bars.full_q(qs));
            break;
        }
        int qb, bh;
        hp_decode(item, pr, qb, bh);
        hp_load_tile<D>(base + qs * C::TILE, tq, qb * HP_BM, bh, bars.full_q(qs));
        for (int n = 0; n <= qb + 1; n++) {
            if (n <= qb) { /* K_n */
                const uint32_t xk = x + n;
                const int st = xk % HP_STAGES, use = xk / HP_STAGES;
                if (use > 0) mbar_wait(bars.empty_k(st), (use - 1) & 1);
                hp_load_tile<D>(base + C::OFF_K + st * C::TILE, tk, n * HP_BN, bh, bars.full_k(st));
            }
            if (n > 0) { /* V_{n-1} */
                const uint32_t xv = x + n - 1;
                const int st = xv % HP_STAGES, use = xv / HP_STAGES;
                if (use > 0) mbar_wait(bars.empty_v(st), (use - 1) & 1);
                hp_load_tile<D>(base + C::OFF_V + st * C::TILE, tv, (n - 1) * HP_BN, bh,
                                bars.full_v(st));
            }
        }
        x += qb + 1;
    }
    /* the last producer to finish fetching leaves the counters zeroed for the next launch */
    if (HP_SCHED && atomicAdd(pr.sched + 1, 1) == (int)gridDim.x - 1) {
        atomicExch(pr.sched, 0);
        atomicExch(pr.sched + 1, 0);
    }
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
 * warpgroup, and runs
 * the softmax of S_n while P·V is still on the tensor cores; P_n is made once P·V_{n-1} is done
 * with P_{n-1}. Tile 0 is peeled so that every wgmma issue and wait in the loop is
 * unconditional: ptxas must see that each accumulator is waited for before it is touched, or it
 * serialises all wgmmas. */
template <int D>
__device__ __forceinline__ void hp_consumer_item(uint32_t base, int wg, __nv_bfloat16 *out,
                                                 int q0, int n_tiles, int T, float scale_log2,
                                                 uint32_t x, uint32_t qi) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {base + C::OFF_BAR};
    const int t = threadIdx.x % 128, lane = t % 32;
    const int qs = qi % C::QBUFS;
    const uint32_t qw = base + qs * C::TILE + wg * 64 * 128;
    const int row = q0 + wg * 64 + (t / 32) * 16 + lane / 4;
    float o[D / 2], s[64], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}, alpha[2];
    uint32_t p[8][4];
#pragma unroll
    for (int r = 0; r < D / 2; r++) o[r] = 0.0f;
#pragma unroll
    for (int r = 0; r < 64; r++) s[r] = 0.0f;

    /* tile 0: S only */
    mbar_wait(bars.full_k(x % HP_STAGES), (x / HP_STAGES) & 1);
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
    hp_softmax(s, m_run, l_run, alpha, scale_log2, n_tiles == 1, row, 0);
    hp_s_to_p(s, p);
    for (int n = 1; n < n_tiles; n++) {
        const uint32_t xn = x + n, xp = xn - 1;
        const int st = xn % HP_STAGES, pst = xp % HP_STAGES;
        mbar_wait(bars.full_k(st), (xn / HP_STAGES) & 1); /* K_n landed */
        if (HP_PINGPONG) nbar_sync(1 + wg, 256);           /* our turn to issue */
        wgmma_fence();
        hp_mma_qk<D>(s, qw, base + C::OFF_K + st * C::TILE);
        wgmma_commit();
        if (HP_SERIAL) { wgmma_wait<0>(); fence_regs(s); }
        hp_rescale<D>(o, alpha); /* alpha_{n-1} O_{n-2}, before P_{n-1}·V_{n-1} is added */
        mbar_wait(bars.full_v(pst), (xp / HP_STAGES) & 1); /* V_{n-1} landed */
        wgmma_fence();
        hp_mma_pv<D>(o, p, base + C::OFF_V + pst * C::TILE);
        wgmma_commit();
        if (HP_PINGPONG) nbar_arrive(2 - wg, 256);
        wgmma_wait<1>(); /* S_n done (groups retire in order) */
        fence_regs(s);
        if (lane == 0) {
            mbar_arrive(bars.empty_k(st));
            if (n == n_tiles - 1) mbar_arrive(bars.empty_q(qs));
        }
        hp_softmax(s, m_run, l_run, alpha, scale_log2, n == n_tiles - 1, row, n * HP_BN);
        wgmma_wait<0>(); /* P_{n-1}·V_{n-1} done: P and V_{n-1} may be reused */
        fence_regs(o);
        fence_regs_u(p);
        if (lane == 0) mbar_arrive(bars.empty_v(pst));
        hp_s_to_p(s, p);
    }
    const uint32_t xl = x + n_tiles - 1;
    hp_rescale<D>(o, alpha);
    mbar_wait(bars.full_v(xl % HP_STAGES), (xl / HP_STAGES) & 1);
    wgmma_fence();
    hp_mma_pv<D>(o, p, base + C::OFF_V + (xl % HP_STAGES) * C::TILE);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs_u(p);
    if (lane == 0) mbar_arrive(bars.empty_v(xl % HP_STAGES));
    hp_epilogue<D>(o, l_run, out, row, T);
}

/* A consumer warpgroup's life: the work items the producer announces in the Q buffers' slots,
 * until one says none is left. Turns: warpgroup 1 gives warpgroup 0 the first one, and each
 * warpgroup hands one to the other per tile, so warpgroup 0 ends with one turn unclaimed, which
 * it takes at the end (no named barrier is left with arrivals pending). */
template <int D>
__device__ void hp_consumer(uint32_t base, const volatile int *slot, const hp_params &pr) {
    typedef hp_cfg<D> C;
    const hp_bars<C::QBUFS> bars = {base + C::OFF_BAR};
    const int n_items = pr.n_qblocks * pr.BH;
    /* warp-uniform as far as ptxas can tell (threadIdx.x / 128 alone makes it assume divergence,
     * and wgmma in a divergent path is serialised) */
    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
    if (HP_PINGPONG && wg == 1) nbar_arrive(1, 256); /* warpgroup 0 issues first */
    uint32_t x = 0;
    for (int qi = 0;; qi++) {
        const int qs = qi % C::QBUFS;
        mbar_wait(bars.full_q(qs), (qi / C::QBUFS) & 1); /* Q landed, or the end */
        const int item = slot[qs];
        if (item >= n_items) break;
        int qb, bh;
        hp_decode(item, pr, qb, bh);
        hp_consumer_item<D>(base, wg, pr.O + (size_t)bh * pr.T * D, qb * HP_BM, qb + 1, pr.T,
                            pr.scale_log2, x, (uint32_t)qi);
        x += qb + 1; /* keys 0 .. q0 + 127: HP_BN == HP_BM */
    }
    if (HP_PINGPONG && wg == 0) nbar_sync(1, 256);
}
#endif /* HP_DEVICE */

/* Persistent: gridDim.x blocks (at most one an SM) take work items until none is left.
 * Compiled empty where wgmma does not exist; the host never launches it there.
 * __maxnreg__(224): 65536 registers / 288 threads; __launch_bounds__(288, 1) made ptxas stop at
 * 166 and spill. */
template <int D>
__global__ void __maxnreg__(224)
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
    if (threadIdx.x / 32 == 8) {
        if (threadIdx.x % 32 == 0) hp_producer<D>(base, slot, &tq, &tk, &tv, pr);
        return;
    }
    hp_consumer<D>(base, slot, pr);
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

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "attention_causal expert: size '%s' missing from the config\n", name);
    return 1;
}

static bool tensor_ok(const st_tensor *t, const attn_ctx *c) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
           t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL &&
           ((uintptr_t)t->data & 1) == 0;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params;
    (void)stream;
    *out_ctx = NULL;
    int64_t B, H, T;
    if (cfg_get(cfg, "B", &B) || cfg_get(cfg, "H", &H) || cfg_get(cfg, "T", &T)) return 1;
    /* heads along grid x (up to 2^31 - 1), query blocks along grid y (up to 65535) */
    if (B <= 0 || H <= 0 || T <= 0 || B * H > INT32_MAX || (T + BM - 1) / BM > 65535 || n_params != 0) {
        fprintf(stderr, "attention_causal expert: sizes out of range\n");
        return 1;
    }
    /* 48 KiB is the default limit; saying so explicitly keeps it valid if BN or BM grow */
    cudaError_t e = cudaFuncSetAttribute(flash_causal_kernel<true>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(flash_causal_kernel<false>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) {
        fprintf(stderr, "attention_causal expert: cudaFuncSetAttribute: %s\n", cudaGetErrorString(e));
        return 1;
    }
    attn_ctx *c = (attn_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->B = (int)B;
    c->H = (int)H;
    c->T = (int)T;
    /* the Hopper kernel where it can run; otherwise (or if its setup fails) the sm_80 one */
    c->hp = hp_init<HEAD_DIM>(T, B * H);
    c->use_hp = c->hp != NULL;
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const attn_ctx *c = (const attn_ctx *)p;
    if (!c || n_in != 3 || n_out != 1) {
        fprintf(stderr, "attention_causal expert: expected 3 inputs and 1 output\n");
        return 1;
    }
    if (!tensor_ok(&in[0], c) || !tensor_ok(&in[1], c) || !tensor_ok(&in[2], c) || !tensor_ok(&out[0], c)) {
        fprintf(stderr, "attention_causal expert: tensors must be bf16 [%d, %d, %d, %d]\n", c->B, c->H,
                c->T, HEAD_DIM);
        return 1;
    }
    const bf16 *q = (const bf16 *)in[0].data, *k = (const bf16 *)in[1].data, *v = (const bf16 *)in[2].data;
    bf16 *o = (bf16 *)out[0].data;
    /* each head and row is 128 bytes apart, so aligned bases mean aligned rows throughout */
    const bool vec = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o);
    const dim3 grid((unsigned int)(c->B * c->H), (unsigned int)((c->T + BM - 1) / BM));
    /* log2(e) / sqrt(64): scores go straight into exp2 */
    const float scale_log2 = 1.4426950408889634f / 8.0f;
    if (vec && c->use_hp) {
        if (hp_launch<HEAD_DIM>(c->hp, q, k, v, o, c->T, (int64_t)c->B * c->H, stream)) {
            fprintf(stderr, "attention_causal expert: sm_90a launch failed\n");
            return 1;
        }
        return 0;
    }
    if (vec)
        flash_causal_kernel<true><<<grid, NTHREADS, SMEM_BYTES, stream>>>(q, k, v, o, c->T, scale_log2);
    else
        flash_causal_kernel<false><<<grid, NTHREADS, SMEM_BYTES, stream>>>(q, k, v, o, c->T, scale_log2);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "attention_causal expert: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" void st_free(void *p) {
    if (p != NULL) hp_destroy(((attn_ctx *)p)->hp);
    free(p);
}
