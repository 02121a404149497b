/* Expert for t4/flash_attention: causal attention forward, O = softmax(Q·K^T/sqrt(D) + mask)·V,
 * bf16 [B, H, T, 128] in and out, in one FlashAttention-2-style kernel: the T x T scores never
 * leave the chip. A block owns 64 queries of one head (16 a warp, 4 warps); it keeps its Q
 * fragments in registers, streams K and V through shared memory in 64-key tiles (cp.async,
 * double-buffered, XOR-swizzled so ldmatrix is conflict-free), computes S = Q·K^T and O += P·V
 * with bf16 mma.sync m16n8k16 and fp32 accumulators, and keeps the softmax online in registers
 * (running max and sum per row, base-2 exponentials with the 1/sqrt(D) folded in). Key tiles
 * past the diagonal are never loaded; only the diagonal tile is masked, which also masks the
 * zero-filled keys past a ragged T. Blocks are issued heaviest first (last query blocks) so the
 * causal triangle load-balances. P is rounded to bf16 for the second product, as every
 * tensor-core attention does; the row sums use the unrounded fp32 values. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
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

    const float scale_log2 = 1.4426950408889634f / sqrtf((float)HEAD_DIM);
    flash_attn_fwd_kernel<<<(unsigned)(n_qblocks * BH), THREADS, SMEM_BYTES, stream>>>(
        q, k, v, o_aligned ? o : c->o, (int)c->T, (int)BH, (int)n_qblocks, scale_log2);
    if (cudaGetLastError() != cudaSuccess) return 1;
    if (!o_aligned &&
        cudaMemcpyAsync(o, c->o, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return 1;
    return 0;
}
