/* Expert for t1/conv2d: 3x3 convolution, stride 1, zero padding 1, NCHW bf16 in and out, fp32
 * accumulation, as an implicit GEMM on the bf16 tensor cores (mma.sync m16n8k16). Per image the
 * convolution is Y[k, p] = sum over (c, tap) of Wt[k, c, tap] * X[c, p shifted by tap]: out
 * channels are the GEMM's M, output pixels its N, input channels times the 9 taps its K.
 * A block computes 64 output channels for an 8 x 32 tile of output pixels. Instead of expanding
 * im2col, it stages the input once per 16 input channels as a halo patch (10 x 34 pixels x 16
 * channels) in shared memory; the 9 taps are 9 shifted windows of that patch, read with
 * ldmatrix from per-lane pixel addresses, so each input element is fetched from global memory
 * about once per block instead of 9 times. Weights are reordered once in st_init into the exact
 * [tap][out channel][16 channels] tiles the kernel copies with cp.async. Patch and weights are
 * double-buffered across channel chunks; smem rows are XOR-swizzled so ldmatrix is conflict-free. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BM 64                       /* output channels per block */
#define TH 8                        /* output rows per block: one per warp */
#define TW 32                       /* output columns per block: one warp's 4 n8 tiles */
#define CK 16                       /* input channels per chunk: one k16 step per tap */
#define PH (TH + 2)                 /* halo patch rows */
#define PW (TW + 2)                 /* halo patch columns */
#define PATCH_PIX (PH * PW)         /* 340 */
#define THREADS 256
#define TAPS 9
#define W_ROWS (TAPS * BM)          /* weight rows per chunk: (tap, out channel) */
#define PATCH_ELEMS (PATCH_PIX * CK)
#define W_ELEMS (W_ROWS * CK)
#define STAGE_ELEMS (PATCH_ELEMS + W_ELEMS)
#define SMEM_BYTES (2 * STAGE_ELEMS * 2) /* two stages of bf16: 58,624 bytes */
#define W_PIECES (W_ROWS * 2)       /* 16-byte pieces of one chunk's weights */

typedef struct conv_ctx {
    int N, C, H, W, K;
    int tiles_h, tiles_w, kblocks, chunks;
    __nv_bfloat16 *wp;              /* weights reordered for the kernel, see prep_weights_kernel */
} conv_ctx;

/* ------------------------------------------------------------------------------------------ */
/* shared-memory layout. Both the patch and the weights are rows of 16 channels (32 bytes, two
 * 16-byte halves); ldmatrix reads one half of 8 consecutive rows at once. Plain, rows i and i+4
 * would share banks; swapping the halves of rows whose bit 2 is set makes any 8 consecutive rows
 * land in 8 distinct groups of 4 banks. */

__host__ __device__ __forceinline__ int swz(int row, int c) {
    return row * CK + ((((c >> 3) ^ (row >> 2)) & 1) << 3) + (c & 7);
}

/* Lane's row address for the x4 ldmatrix that fetches A (weights) for tap t, m16 tile i: the four
 * 8x8 matrices are rows 0-7 / 8-15 by channels 0-7 / 8-15, in the a0..a3 order of mma's A. */
__host__ __device__ __forceinline__ int a_ldm_off(int t, int i, int lane) {
    const int row = t * BM + 16 * i + (lane & 7) + 8 * ((lane >> 3) & 1);
    return swz(row, 8 * (lane >> 4));
}

/* Lane's row address for the x4 ldmatrix that fetches B (the patch window of tap t) for the n8
 * tiles 2p and 2p+1 of warp `warp`: matrices (tile 2p, ch 0-7), (2p, 8-15), (2p+1, 0-7),
 * (2p+1, 8-15), i.e. b0, b1 of tile 2p then b0, b1 of tile 2p+1. Row n of B is output pixel
 * (warp, 8*tile + n), which reads patch pixel (warp + t/3, 8*tile + n + t%3). */
__host__ __device__ __forceinline__ int b_ldm_off(int warp, int t, int p, int lane) {
    const int q = lane >> 3;
    const int col = 16 * p + (lane & 7) + 8 * (q >> 1);
    const int pix = (warp + t / 3) * PW + col + t % 3;
    return swz(pix, 8 * (q & 1));
}

/* ------------------------------------------------------------------------------------------ */
/* PTX wrappers (sm_80 and later) */

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1,
                                            uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* wp[kb][chunk][tap][m][c] = w[kb*64 + m][chunk*16 + c][tap], zero where the out channel or the
 * input channel does not exist, so the main kernel copies whole tiles without bounds checks. */
__global__ void prep_weights_kernel(const __nv_bfloat16 *__restrict__ w,
                                    __nv_bfloat16 *__restrict__ wp, int C, int K, int chunks,
                                    size_t total) {
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(e % CK);
        const int m = (int)(e / CK % BM);
        const int t = (int)(e / (CK * BM) % TAPS);
        const size_t kc = e / W_ELEMS;  /* kb * chunks + chunk */
        const int chunk = (int)(kc % chunks), kb = (int)(kc / chunks);
        const int k = kb * BM + m, ci = chunk * CK + c;
        wp[e] = k < K && ci < C ? w[((size_t)k * C + ci) * TAPS + t] : __float2bfloat16(0.0f);
    }
}

/* One block: image n, output rows h0 .. h0+7, columns w0 .. w0+31, out channels kb*64 .. +63.
 * Warp `warp` owns output row h0 + warp: 64 channels x 32 pixels = 4 m16 x 4 n8 accumulators. */
__global__ void __launch_bounds__(THREADS, 2)
conv3x3_kernel(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ wp,
               __nv_bfloat16 *__restrict__ y, int C, int H, int W, int K, int tiles_h,
               int tiles_w, int chunks, int pair_store) {
    extern __shared__ __align__(16) uint16_t smem[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int tw = blockIdx.x % tiles_w;
    const int th = blockIdx.x / tiles_w % tiles_h;
    const int n = blockIdx.x / tiles_w / tiles_h;
    const int kb = blockIdx.y;
    const int h0 = th * TH, w0 = tw * TW;
    const size_t HW = (size_t)H * W;
    const __nv_bfloat16 *xn = x + (size_t)n * C * HW;
    const __nv_bfloat16 *wpk = wp + (size_t)kb * chunks * W_ELEMS;
    const uint32_t smem_base = (uint32_t)__cvta_generic_to_shared(smem);

    /* The patch has 340 pixels: thread tid loads pixel tid, threads below 84 also pixel
     * tid + 256, each for all 16 channels of a chunk. Where a pixel lies (and whether it lies in
     * the image at all) is fixed for the block, so it is worked out once. */
    const int pix_a = tid, pix_b = tid + THREADS;
    const bool has_b = pix_b < PATCH_PIX;
    int off_a = -1, off_b = -1;  /* offset within a channel plane; -1: padding */
    {
        const int gh = h0 - 1 + pix_a / PW, gw = w0 - 1 + pix_a % PW;
        if (gh >= 0 && gh < H && gw >= 0 && gw < W) off_a = gh * W + gw;
    }
    if (has_b) {
        const int gh = h0 - 1 + pix_b / PW, gw = w0 - 1 + pix_b % PW;
        if (gh >= 0 && gh < H && gw >= 0 && gw < W) off_b = gh * W + gw;
    }

    /* channel pairs packed in one word, the layout the patch rows have in shared memory */
    uint32_t reg_a[CK / 2], reg_b[CK / 2];
    auto load_patch = [&](int chunk) {
        const int c0 = chunk * CK;
#pragma unroll
        for (int cp = 0; cp < CK / 2; cp++) {
            const int c = c0 + 2 * cp;
            uint32_t lo = 0, hi = 0;
            if (off_a >= 0) {
                if (c < C) lo = __ldg((const unsigned short *)xn + (size_t)c * HW + off_a);
                if (c + 1 < C)
                    hi = __ldg((const unsigned short *)xn + (size_t)(c + 1) * HW + off_a);
            }
            reg_a[cp] = lo | hi << 16;
            lo = hi = 0;
            if (off_b >= 0) {
                if (c < C) lo = __ldg((const unsigned short *)xn + (size_t)c * HW + off_b);
                if (c + 1 < C)
                    hi = __ldg((const unsigned short *)xn + (size_t)(c + 1) * HW + off_b);
            }
            reg_b[cp] = lo | hi << 16;
        }
    };
    auto store_patch = [&](int stage) {
        uint16_t *patch = smem + stage * STAGE_ELEMS;
#pragma unroll
        for (int cp = 0; cp < CK / 2; cp++) {
            *(uint32_t *)(patch + swz(pix_a, 2 * cp)) = reg_a[cp];
            if (has_b) *(uint32_t *)(patch + swz(pix_b, 2 * cp)) = reg_b[cp];
        }
    };
    auto load_weights = [&](int chunk, int stage) {
        const __nv_bfloat16 *src = wpk + (size_t)chunk * W_ELEMS;
        const uint32_t dst = smem_base + (uint32_t)(stage * STAGE_ELEMS + PATCH_ELEMS) * 2;
        for (int q = tid; q < W_PIECES; q += THREADS)
            cp_async16(dst + (uint32_t)swz(q >> 1, 8 * (q & 1)) * 2, src + 8 * q);
        cp_async_commit();
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    load_weights(0, 0);
    load_patch(0);
    store_patch(0);
    cp_async_wait_all();
    __syncthreads();

    for (int chunk = 0; chunk < chunks; chunk++) {
        const int stage = chunk & 1;
        const bool more = chunk + 1 < chunks;
        /* the next chunk's loads are in flight while this one is multiplied; its stage was
         * last read before the barrier that ended the previous iteration */
        if (more) {
            load_weights(chunk + 1, stage ^ 1);
            load_patch(chunk + 1);
        }

        const uint32_t patch_s = smem_base + (uint32_t)(stage * STAGE_ELEMS) * 2;
        const uint32_t w_s = patch_s + PATCH_ELEMS * 2;
#pragma unroll
        for (int t = 0; t < TAPS; t++) {
            uint32_t b[4][2];
            ldmatrix_x4(patch_s + b_ldm_off(warp, t, 0, lane) * 2, b[0][0], b[0][1], b[1][0],
                        b[1][1]);
            ldmatrix_x4(patch_s + b_ldm_off(warp, t, 1, lane) * 2, b[2][0], b[2][1], b[3][0],
                        b[3][1]);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t a[4];
                ldmatrix_x4(w_s + a_ldm_off(t, i, lane) * 2, a[0], a[1], a[2], a[3]);
#pragma unroll
                for (int j = 0; j < 4; j++) mma_bf16(acc[i][j], a, b[j][0], b[j][1]);
            }
        }

        if (more) {
            store_patch(stage ^ 1);
            cp_async_wait_all();
        }
        __syncthreads();
    }

    /* accumulator (i, j, e) is out channel 16i + lane/4 (+8 for e >= 2), pixel 8j + 2(lane%4)
     * (+1 for odd e) of the warp's row */
    const int h = h0 + warp;
    if (h >= H) return;
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int k = kb * BM + 16 * i + lane / 4 + 8 * half;
            if (k >= K) continue;
            __nv_bfloat16 *yrow = y + (((size_t)n * K + k) * H + h) * W;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int wc = w0 + 8 * j + 2 * (lane % 4);
                const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
                if (pair_store && wc + 1 < W) {
                    *(__nv_bfloat162 *)(yrow + wc) = __floats2bfloat162_rn(v0, v1);
                } else {
                    if (wc < W) yrow[wc] = __float2bfloat16(v0);
                    if (wc + 1 < W) yrow[wc + 1] = __float2bfloat16(v1);
                }
            }
        }
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

static bool tensor_ok(const st_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->shape[2] == d2 && t->shape[3] == d3 && t->data != NULL &&
           ((uintptr_t)t->data & 1) == 0;
}

extern "C" void st_free(void *ctx) {
    conv_ctx *c = (conv_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->wp);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    int64_t N, C, H, W, K;
    if (cfg == NULL || ctx == NULL || n_params != 1) return 1;
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "H", &H) ||
        cfg_get(cfg, "W", &W) || cfg_get(cfg, "K", &K))
        return 1;
    if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1) return 1;
    if (!tensor_ok(&params[0], K, C, 3, 3)) return 1;
    /* int arithmetic inside the kernel: a channel plane, the grid, the weight tiles */
    const int64_t tiles_h = (H + TH - 1) / TH, tiles_w = (W + TW - 1) / TW;
    const int64_t kblocks = (K + BM - 1) / BM, chunks = (C + CK - 1) / CK;
    if (H * W > INT32_MAX || N * tiles_h * tiles_w > INT32_MAX || kblocks > 65535 ||
        C > INT32_MAX - CK || K > INT32_MAX - BM)
        return 1;

    conv_ctx *c = (conv_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->N = (int)N;
    c->C = (int)C;
    c->H = (int)H;
    c->W = (int)W;
    c->K = (int)K;
    c->tiles_h = (int)tiles_h;
    c->tiles_w = (int)tiles_w;
    c->kblocks = (int)kblocks;
    c->chunks = (int)chunks;

    const size_t total = (size_t)kblocks * chunks * W_ELEMS;
    const size_t prep_blocks = (total + THREADS - 1) / THREADS;
    const int grid = (int)(prep_blocks < 4096 ? prep_blocks : 4096);
    bool ok = cudaMalloc(&c->wp, total * sizeof(__nv_bfloat16)) == cudaSuccess &&
        cudaFuncSetAttribute(conv3x3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             SMEM_BYTES) == cudaSuccess;
    if (ok) {
        prep_weights_kernel<<<grid, THREADS, 0, stream>>>(
            (const __nv_bfloat16 *)params[0].data, c->wp, c->C, c->K, c->chunks, total);
        ok = cudaGetLastError() == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess;
    }
    if (!ok) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const conv_ctx *c = (const conv_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->N, c->C, c->H, c->W) ||
        !tensor_ok(&out[0], c->N, c->K, c->H, c->W))
        return 1;
    __nv_bfloat16 *y = (__nv_bfloat16 *)out[0].data;
    /* two outputs per store when every row starts on a 4-byte boundary (pointers may move) */
    const int pair_store = c->W % 2 == 0 && ((uintptr_t)y & 3) == 0;
    dim3 grid((unsigned)(c->N * c->tiles_h * c->tiles_w), (unsigned)c->kblocks);
    conv3x3_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(
        (const __nv_bfloat16 *)in[0].data, c->wp, y, c->C, c->H, c->W, c->K, c->tiles_h,
        c->tiles_w, c->chunks, pair_store);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
