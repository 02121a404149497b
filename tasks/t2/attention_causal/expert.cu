/* Expert for t2/attention_causal: a flash-attention style forward kernel, head dim 64. A block
 * takes 128 queries of one head (8 warps, 16 query rows each; the q tile stays in shared
 * memory) and streams the keys and values up to its last query through
 * shared memory in tiles of 64, double buffered with cp.async so the next tile loads while this
 * one is used. Per tile a warp computes its 16 x 64 scores with bf16 mma.sync (m16n8k16, fp32
 * accumulators), masks them only on the diagonal and the ragged end, folds them into a running
 * max and sum (online softmax, base-2 exponent with the 1/8 scale folded in), and multiplies the
 * probabilities, rounded to bf16 straight from the score registers, by the v tile into its
 * 16 x 64 output accumulators. A warp skips tiles that lie entirely after its rows; the heaviest
 * query blocks (nearest the end of the sequence) are launched first. Shared-memory rows are
 * XOR-swizzled by 16-byte chunk so ldmatrix and cp.async are free of bank conflicts. Inputs that
 * are not 16-byte aligned take the same kernel with plain loads and stores. */
#include <math.h>
#include <stdint.h>
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

typedef struct {
    int B, H, T;
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
    free(p);
}
