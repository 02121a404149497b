/* Expert for t2/conv_bn_relu: y = ReLU(BatchNorm(conv3x3(x, W))), stride 1, zero padding 1,
 * NCHW bf16, fp32 accumulation, in two kernels per call (the design of t1/conv2d's expert).
 * A memory-bound pre-pass rewrites x into a zero-bordered, channels-last scratch copy
 * xp[chunk][n][H+2][W+2][16 channels]; the main kernel is then an implicit GEMM on mma.sync
 * m16n8k16 (sm_80+) with no bounds checks in its loop. In the padded layout an output pixel is a
 * linear position g = (n, h, w) of the padded image grid and tap (r, s) reads position
 * g + r*(W+2) + s. A block takes 256 consecutive output pixels (or, where that would make the
 * window too long, 256 consecutive padded positions, those on pad rows and columns computed and
 * discarded), which read three runs of consecutive padded pixels from the first one's position on
 * (one contiguous window when rows are short): every operand row is a 32-byte cp.async pair,
 * every ldmatrix row one shifted smem row. Block: 64 out channels x 256 positions, 4 warps of
 * 64 x 64, 3-stage cp.async pipeline over 16-channel chunks, XOR-swizzled smem rows. The batch
 * norm is kept out of the filter: st_init turns it into a per-channel fp32 scale and shift, which
 * the epilogue applies to the fp32 accumulator with the ReLU before the single rounding to bf16
 * (half the error of a bf16-rounded folded filter, for one FMA per output). The filter is
 * repacked once in st_init. The batch can run in CONV_PARTS parts of whole images, each part's
 * GEMM on a side stream beside the next part's pre-pass (one part by default). */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BM 64                       /* output channels per block */
#define BN 256                      /* padded positions per block */
#define WN 64                       /* positions per warp */
#define THREADS 128
#define CK 16                       /* channels per chunk: one k16 step per tap */
#define TAPS 9
#define STAGES 3                    /* cp.async pipeline depth (smem 91 KB at eval) */
#define MIN_BLOCKS 2                /* blocks per SM promised to ptxas: 211 registers at sm_90a */
#define SEG (BN + 2)                /* padded pixels one kernel row r reads for a block */
#define W_ROWS (TAPS * BM)          /* weight rows per chunk: (tap, out channel) */
#define W_ELEMS (W_ROWS * CK)
#define PRE_THREADS 256
#define PRE_COLS 64                 /* padded columns per pre-pass block */
#define PRE_HW 17                   /* 32-bit words per pre-pass smem pixel (16 + 1 pad) */
#define EP_STRIDE 72                /* bf16 elements per staged output row (64 + 8 pad) */
#define REAL_SMEM_MAX (110 * 1024)  /* shared memory a block can have with two an SM (sm_90) */

/* Sizes and the derived scratch geometry; passed by value to both kernels. */
typedef struct geom {
    int N, C, H, W, K;
    int Hp, Wp, chunks, kblocks, tiles;
    int real;                       /* tiles of output pixels (1) or of padded positions (0) */
    int seg;                        /* padded pixels one kernel row r reads for a block */
    int RS;                         /* smem rows between the runs of kernel rows r and r+1 */
    int xrows;                      /* smem rows of one stage's input window: 2*RS + seg */
    long long HW, NHW;              /* output pixels per image and in the batch */
    long long HpWp, G;              /* padded pixels per image; per chunk in xp (with slack) */
} geom;

#ifndef CONV_PARTS
#define CONV_PARTS 1 /* the batch in parts: part k's GEMM overlaps part k+1's pre-pass; with
                      * tiles of output pixels one part, whose GEMM is three whole waves at eval */
#endif

typedef struct conv_ctx {
    geom g;
    int smem_bytes;
    __nv_bfloat16 *wp;              /* [kblock][chunk][tap][64 out][16 in] */
    float *bn;                      /* [2][kblocks*64]: batch-norm scale, then shift; 0 past K */
    uint16_t *xp;                   /* [chunk][G][16]: the pre-pass output */
    cudaStream_t side[2];           /* the parts' GEMMs, alternating */
    cudaEvent_t ev_pre[CONV_PARTS], ev_done[2];
} conv_ctx;

/* ------------------------------------------------------------------------------------------ */
/* index helpers, shared with the host emulation. Smem rows are 16 channels (32 bytes); ldmatrix
 * reads one 16-byte half of 8 consecutive rows; swapping the halves of rows with bit 2 set puts
 * any 8 consecutive rows (any start) in 8 distinct 16-byte bank groups. */

__host__ __device__ __forceinline__ int swz(int row, int c) {
    return row * CK + ((((c >> 3) ^ (row >> 2)) & 1) << 3) + (c & 7);
}

/* Stage fill, input window: piece q (16 bytes) of the run of kernel row r. Returns the smem
 * element offset; *src gets the element offset in xp relative to (chunk, the tile's base). */
__host__ __device__ __forceinline__ int x_piece(const geom &g, int r, int q, long long *src) {
    const int j = q >> 1, half = q & 1;
    *src = (long long)(r * g.Wp + j) * CK + 8 * half;
    return swz(r * g.RS + j, 8 * half);
}

__host__ __device__ __forceinline__ int x_run_rows(const geom &g, int r) {
    return r < 2 ? g.RS : g.seg;
}

/* Padded position of output pixel q (n, h, w): n*(H+2)(W+2) + h*(W+2) + w. q < NHW < 2^30. */
__host__ __device__ __forceinline__ int pad_of(const geom &g, int q) {
    const int hw = (int)g.HW, n = q / hw, rem = q - n * hw, h = rem / g.W;
    return n * (int)g.HpWp + h * g.Wp + rem - h * g.W;
}

/* First padded position of tile b's window: with real tiles, that of its first output pixel. */
__host__ __device__ __forceinline__ int tile_base(const geom &g, int b) {
    return g.real ? pad_of(g, b * BN) : b * BN;
}

/* Window row (tap 0) of the tile's position p: p itself for padded tiles; for real tiles the
 * padded position of output pixel b*256 + p (the batch's last pixel past the end, whose results
 * are discarded) less the tile's base. */
__host__ __device__ __forceinline__ int pos_row(const geom &g, int b, int base, int p) {
    if (!g.real) return p;
    const long long q = (long long)b * BN + p;
    return pad_of(g, (int)(q < g.NHW ? q : g.NHW - 1)) - base;
}

/* Lane's ldmatrix.x4 row for A (weights) of tap t, m16 tile i: matrices (rows 0-7, ch 0-7),
 * (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = a0..a3 of mma's A fragment. */
__host__ __device__ __forceinline__ int a_ldm_off(int t, int i, int lane) {
    const int row = t * BM + 16 * i + (lane & 7) + 8 * ((lane >> 3) & 1);
    return swz(row, 8 * (lane >> 4));
}

/* Lane's ldmatrix.x4 position for B of the warp's n8 tiles 2pg and 2pg+1: matrices (tile 2pg,
 * ch 0-7), (2pg, 8-15), (2pg+1, 0-7), (2pg+1, 8-15) = b0, b1 of one tile, then of the other.
 * Row n of tile j is position p = WN*warp + 8j + n; tap t reads window row
 * pos_row(p) + (t/3)*RS + t%3, and the lane's channel half is 8*((lane/8)%2). */
__host__ __device__ __forceinline__ int b_lane_pos(int warp, int pg, int lane) {
    return WN * warp + 16 * pg + (lane & 7) + 8 * (lane >> 4);
}

__host__ __device__ __forceinline__ int b_tap_off(int RS, int row, int t, int lane) {
    return swz(row + (t / 3) * RS + t % 3, 8 * ((lane >> 3) & 1));
}

/* Output offset of padded position gpos without the channel term (add k*H*W), -1 when gpos is
 * a pad row or column or past the batch. gpos < G < 2^30, so the divisions are 32-bit. */
__host__ __device__ __forceinline__ long long out_base(const geom &g, long long gpos) {
    const int gi = (int)gpos, hpwp = (int)g.HpWp;
    const int n = gi / hpwp, rem = gi - n * hpwp;
    const int h = rem / g.Wp, w = rem - h * g.Wp;
    if (n >= g.N || h >= g.H || w >= g.W) return -1;
    return (long long)n * g.K * ((long long)g.H * g.W) + (long long)h * g.W + w;
}

/* Output offset (less k*H*W) of tile b's position p, -1 when it is discarded. */
__host__ __device__ __forceinline__ long long out_pos(const geom &g, int b, int p) {
    const long long q = (long long)b * BN + p;
    if (!g.real) return out_base(g, q);
    if (q >= g.NHW) return -1;
    const long long n = q / g.HW;
    return n * g.K * g.HW + q - n * g.HW;
}

/* Epilogue staging: a warp's 64 x 64 bf16 tile as [out channel][position] rows of EP_STRIDE
 * elements; 72 (36 words) puts the 8 channels of one fragment store in 8 distinct bank groups. */
__host__ __device__ __forceinline__ int ep_slot(int warp, int m, int px) {
    return (warp * BM + m) * EP_STRIDE + px;
}

/* Pre-pass load: element i of thread t for the chunk pair starting at chunk0, block (nh, wp0).
 * Returns x's element offset or -1 for a zero (border, missing channel); *s_half gets the
 * 16-bit smem slot ([pixel][32 channels], PRE_HW words per pixel). */
__host__ __device__ __forceinline__ long long pre_load(const geom &g, int nh, int wp0, int chunk0,
                                                       int t, int i, int *s_half) {
    const int px = t & (PRE_COLS - 1), ch = t / PRE_COLS + 4 * i;
    const int n = nh / g.Hp, h = nh - n * g.Hp - 1, w = wp0 + px - 1, c = chunk0 * CK + ch;
    *s_half = px * 2 * PRE_HW + ch;
    if (h < 0 || h >= g.H || w < 0 || w >= g.W || c >= g.C) return -1;
    return (((long long)n * g.C + c) * g.H + h) * g.W + w;
}

/* Pre-pass store: thread t writes 8 channels (16 bytes) of one pixel. Returns xp's element
 * offset or -1 (column past the padded row, chunk past the last); *s_word gets its first word. */
__host__ __device__ __forceinline__ long long pre_store(const geom &g, int nh, int wp0,
                                                        int chunk0, int t, int *s_word) {
    const int cc = t >> 7, px = (t >> 1) & (PRE_COLS - 1), half = t & 1;
    *s_word = px * PRE_HW + cc * 8 + half * 4;
    if (wp0 + px >= g.Wp || chunk0 + cc >= g.chunks) return -1;
    return ((long long)(chunk0 + cc) * g.G + (long long)nh * g.Wp + wp0 + px) * CK + 8 * half;
}

/* Repacked filter element e = [kb][chunk][tap][m][c] comes from weight element
 * ((kb*64 + m)*C + chunk*16 + c)*9 + tap; -1 (a zero) where that channel does not exist. */
__host__ __device__ __forceinline__ long long wp_src(size_t e, int C, int K, int chunks) {
    const int c = (int)(e % CK);
    const int m = (int)(e / CK % BM);
    const int t = (int)(e / (CK * BM) % TAPS);
    const size_t kc = e / W_ELEMS;  /* kb * chunks + chunk */
    const int chunk = (int)(kc % chunks), kb = (int)(kc / chunks);
    const int k = kb * BM + m, ci = chunk * CK + c;
    return k < K && ci < C ? ((long long)k * C + ci) * TAPS + t : -1;
}

/* Batch norm as y = max(conv*scale + shift, 0): scale = gamma / sqrt(var + eps) and
 * shift = beta - mean*scale in fp32 (IEEE sqrtf and division on both host and device). */
__host__ __device__ __forceinline__ void bn_consts(float gamma, float beta, float mean, float var,
                                                   float eps, float *scale, float *shift) {
    *scale = gamma / sqrtf(var + eps);
    *shift = beta - mean * *scale;
}

/* Block index -> (tile, channel block kb): kb varies fastest. */
__host__ __device__ __forceinline__ int block_tile(const geom &g, unsigned bid, int *kb) {
    const int tile = (int)(bid / (unsigned)g.kblocks);
    *kb = (int)(bid - (unsigned)tile * g.kblocks);
    return tile;
}

#ifdef __CUDACC__
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

__device__ __forceinline__ void cp_async_wait_pending() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
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
        const long long src = wp_src(e, C, K, chunks);
        wp[e] = src >= 0 ? w[src] : __float2bfloat16(0.0f);
    }
}

/* bn = [scale | shift] per channel (bn_consts), zero for the padded channels so that the
 * epilogue loads them without bounds checks. */
__global__ void prep_bn_kernel(const float *__restrict__ gamma, const float *__restrict__ beta,
                               const float *__restrict__ mean, const float *__restrict__ var,
                               const float *__restrict__ eps, float *__restrict__ bn, int K,
                               int kpad) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= kpad) return;
    float scale = 0.0f, shift = 0.0f;
    if (k < K) bn_consts(gamma[k], beta[k], mean[k], var[k], eps[0], &scale, &shift);
    bn[k] = scale;
    bn[kpad + k] = shift;
}

/* Pre-pass loads, vector form (W a multiple of 8, x 16-byte aligned, so an x row's 8-column
 * groups are 16-byte loads that never straddle the row's end): thread t loads x columns
 * wp0 + 8*(t%8) .. +7 of channel chunk0*16 + t/8, i.e. padded columns 1 + 8*(t%8) .. of the
 * block's window; the window's first padded column (x column wp0 - 1) comes from a scalar load by
 * the threads of group 0. One 16-byte load a thread a round instead of eight 2-byte ones: the
 * scalar pre-pass ran at 1.8 TB/s (29 us of conv2d's 80 on an H100, session 49's profile). */
__device__ __forceinline__ void pre_load_vec(const uint16_t *__restrict__ x, const geom &g, int nh,
                                             int wp0, int chunk0, int t, uint16_t *sh) {
    const int ch = t >> 3, seg = t & 7;
    const int n = nh / g.Hp, h = nh - n * g.Hp - 1, c = chunk0 * CK + ch, w = wp0 + 8 * seg;
    const bool row_ok = h >= 0 && h < g.H && c < g.C;
    const long long row = (((long long)n * g.C + c) * g.H + h) * g.W;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row_ok && w < g.W) v = __ldg((const uint4 *)(x + row + w));
    const uint16_t e[8] = {(uint16_t)v.x, (uint16_t)(v.x >> 16), (uint16_t)v.y, (uint16_t)(v.y >> 16),
                           (uint16_t)v.z, (uint16_t)(v.z >> 16), (uint16_t)v.w, (uint16_t)(v.w >> 16)};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int px = 1 + 8 * seg + i;
        if (px < PRE_COLS) sh[px * 2 * PRE_HW + ch] = e[i];
    }
    if (seg == 0)
        sh[ch] = row_ok && wp0 > 0 && wp0 - 1 < g.W ? __ldg(x + row + wp0 - 1) : (uint16_t)0;
}

/* Pre-pass: block (n*Hp + hp, column group) writes padded row hp, columns wp0 .. wp0+63 of xp
 * for every chunk, borders and missing channels as zeros, so xp is fully rewritten each call.
 * Two chunks (32 channels) per round: reads are 16-byte groups of an x row (VEC: W a multiple of
 * 8, x 16-byte aligned) or 64-byte runs of 2-byte loads, writes 2 KiB runs.
 * Rows go last to first so that the rows the main kernel's first wave reads were written last
 * and are the likeliest to still be in L2. */
template <bool VEC>
__global__ void __launch_bounds__(PRE_THREADS)
to_padded_nhwc_kernel(const uint16_t *__restrict__ x, uint16_t *__restrict__ xp, geom g, int nh_hi) {
    __shared__ uint32_t s[PRE_COLS * PRE_HW];
    uint16_t *sh = (uint16_t *)s;
    const int t = threadIdx.x, nh = nh_hi - 1 - blockIdx.x, wp0 = blockIdx.y * PRE_COLS;
    for (int chunk0 = 0; chunk0 < g.chunks; chunk0 += 2) {
        if (VEC) {
            pre_load_vec(x, g, nh, wp0, chunk0, t, sh);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                int s_half;
                const long long src = pre_load(g, nh, wp0, chunk0, t, i, &s_half);
                sh[s_half] = src >= 0 ? __ldg(x + src) : (uint16_t)0;
            }
        }
        __syncthreads();
        int s_word;
        const long long dst = pre_store(g, nh, wp0, chunk0, t, &s_word);
        if (dst >= 0)
            *(uint4 *)(xp + dst) = make_uint4(s[s_word], s[s_word + 1], s[s_word + 2],
                                              s[s_word + 3]);
        __syncthreads();
    }
}

/* Issue one chunk's cp.async copies (input window and weights) into stage `stage`. */
__device__ __forceinline__ void load_stage(const geom &g, const uint16_t *__restrict__ xp,
                                           const uint16_t *__restrict__ wpk, int base,
                                           int chunk, uint32_t stage_s, int tid) {
    const uint16_t *xsrc = xp + ((long long)chunk * g.G + base) * CK;
#pragma unroll
    for (int r = 0; r < 3; r++) {
        const int pieces = 2 * x_run_rows(g, r);
        for (int q = tid; q < pieces; q += THREADS) {
            long long src;
            const int dst = x_piece(g, r, q, &src);
            cp_async16(stage_s + (uint32_t)dst * 2, xsrc + src);
        }
    }
    const uint16_t *wsrc = wpk + (size_t)chunk * W_ELEMS;
    const uint32_t wdst = stage_s + (uint32_t)g.xrows * CK * 2;
    for (int q = tid; q < 2 * W_ROWS; q += THREADS)
        cp_async16(wdst + (uint32_t)swz(q >> 1, 8 * (q & 1)) * 2, wsrc + 8 * q);
}

/* One chunk: 9 taps x (4 + 4 ldmatrix.x4, 32 MMAs) per warp. brow: the lane's window rows of
 * its four position pairs (b_lane_pos). */
__device__ __forceinline__ void compute_stage(float (&acc)[4][8][4], uint32_t xs, uint32_t ws,
                                              const int (&brow)[4], int RS, int lane, int aoff) {
#pragma unroll
    for (int t = 0; t < TAPS; t++) {
        uint32_t b[8][2];
#pragma unroll
        for (int pg = 0; pg < 4; pg++)
            ldmatrix_x4(xs + (uint32_t)b_tap_off(RS, brow[pg], t, lane) * 2, b[2 * pg][0],
                        b[2 * pg][1], b[2 * pg + 1][0], b[2 * pg + 1][1]);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t a[4];
            ldmatrix_x4(ws + (uint32_t)(aoff + (t * BM + 16 * i) * CK) * 2, a[0], a[1], a[2],
                        a[3]);
#pragma unroll
            for (int j = 0; j < 8; j++) mma_bf16(acc[i][j], a, b[j][0], b[j][1]);
        }
    }
}

/* Accumulator (i, j, e) is out channel 16i + lane/4 (+8 for e >= 2), position
 * WN*warp + 8j + 2*(lane%4) (+1 for odd e). Written to smem first so that each warp store covers
 * 64 consecutive positions of one channel (128 contiguous bytes but for row breaks) instead of
 * 16-byte pieces of 8 channels (128 contiguous bytes but for image breaks, and row breaks with
 * padded tiles). The batch norm (fp32 scale and shift of the channel) and the ReLU are applied
 * to the fp32 accumulator before its one rounding. Lane l stores positions 2l and 2l+1 of its
 * warp's 64. With pair_store both are in one image (real tiles, H*W even: the pair's first pixel
 * index is even) or, with padded tiles and W even, one image row or both discarded (the tile
 * start and 2l are even and so are W+2 and (H+2)(W+2), so the pair starts on an even column and
 * W-1 is odd). */
__device__ __forceinline__ void store_tile(const geom &g, const float (&acc)[4][8][4],
                                           const float *__restrict__ bn, uint16_t *stage,
                                           __nv_bfloat16 *__restrict__ y, int b, int kb,
                                           int warp, int lane, int pair_store) {
    const int kpad = g.kblocks * BM;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int m = 16 * i + (lane >> 2) + 8 * half;
            const float sc = __ldg(bn + kb * BM + m), sh = __ldg(bn + kpad + kb * BM + m);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int px = 8 * j + 2 * (lane & 3);
                *(__nv_bfloat162 *)(stage + ep_slot(warp, m, px)) = __floats2bfloat162_rn(
                    fmaxf(fmaf(acc[i][j][2 * half], sc, sh), 0.0f),
                    fmaxf(fmaf(acc[i][j][2 * half + 1], sc, sh), 0.0f));
            }
        }
    __syncwarp();
    const int p = WN * warp + 2 * lane;
    const long long o0 = out_pos(g, b, p), o1 = out_pos(g, b, p + 1);
    if (o0 < 0 && o1 < 0) return;
    const long long HW = (long long)g.H * g.W;
    const int mmax = g.K - kb * BM < BM ? g.K - kb * BM : BM;
    for (int m = 0; m < mmax; m++) {
        const uint32_t v = *(const uint32_t *)(stage + ep_slot(warp, m, 2 * lane));
        const long long koff = (long long)(kb * BM + m) * HW;
        if (pair_store) {
            *(uint32_t *)(y + o0 + koff) = v;
        } else {
            if (o0 >= 0) *(uint16_t *)(y + o0 + koff) = (uint16_t)v;
            if (o1 >= 0) *(uint16_t *)(y + o1 + koff) = (uint16_t)(v >> 16);
        }
    }
}

/* One block: tile b's 256 positions (output pixels or padded positions), out channels
 * kb*64 .. +63, for block index tile*kblocks + kb: the channel blocks of one tile are neighbours
 * in launch order, so they run together and read the same input window while it is in L2.
 * Warp w owns positions 64w .. 64w+63 for all 64 channels: 4 m16 x 8 n8 accumulators. */
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
conv3x3_bn_relu_kernel(const uint16_t *__restrict__ xp, const uint16_t *__restrict__ wp,
                       const float *__restrict__ bn, __nv_bfloat16 *__restrict__ y, geom g,
                       int pair_store, unsigned bid0) {
    extern __shared__ __align__(128) uint16_t smem[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    int kb;
    const int tile = block_tile(g, bid0 + blockIdx.x, &kb), base = tile_base(g, tile);
    const uint16_t *wpk = wp + (size_t)kb * g.chunks * W_ELEMS;
    const uint32_t smem_base = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t stage_bytes = (uint32_t)(g.xrows * CK + W_ELEMS) * 2;

    int brow[4];
#pragma unroll
    for (int pg = 0; pg < 4; pg++) brow[pg] = pos_row(g, tile, base, b_lane_pos(warp, pg, lane));
    const int aoff = a_ldm_off(0, 0, lane);

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    for (int s = 0; s < STAGES - 1; s++) {
        if (s < g.chunks) load_stage(g, xp, wpk, base, s, smem_base + s * stage_bytes, tid);
        cp_async_commit();
    }
    for (int chunk = 0; chunk < g.chunks; chunk++) {
        /* chunk's copies are done (this thread's) and visible (everyone's); the stage refilled
         * below was last read in the previous iteration, which every warp has left */
        cp_async_wait_pending();
        __syncthreads();
        const int next = chunk + STAGES - 1;
        if (next < g.chunks)
            load_stage(g, xp, wpk, base, next, smem_base + (next % STAGES) * stage_bytes, tid);
        cp_async_commit();
        const uint32_t xs = smem_base + (chunk % STAGES) * stage_bytes;
        compute_stage(acc, xs, xs + (uint32_t)g.xrows * CK * 2, brow, g.RS, lane, aoff);
    }
    /* every warp is done reading the stages before they hold the output tile (the remaining
     * cp.async groups are empty) */
    cp_async_wait_all();
    __syncthreads();
    store_tile(g, acc, bn, smem, y, tile, kb, warp, lane, pair_store);
}
#endif /* __CUDACC__ */

/* ------------------------------------------------------------------------------------------ */
/* geometry (host) */

static int window_rows(long long Wp, int seg) {
    return 2 * (Wp < seg ? (int)Wp : seg) + seg;
}

static int stage_smem(int xrows) {
    return STAGES * (xrows * CK + W_ELEMS) * 2;
}

/* The longest run of padded positions a tile of 256 output pixels spans (its first to its last
 * pixel), plus the two columns tap s = 2 reaches past it. */
static int real_seg(const geom *g) {
    int span = 0;
    for (int b = 0; b < g->tiles; b++) {
        const long long last = (long long)b * BN + BN - 1;
        const int s = pad_of(*g, (int)(last < g->NHW ? last : g->NHW - 1)) - pad_of(*g, b * BN);
        if (s > span) span = s;
    }
    return span + 1 + 2;
}

/* The number of tiles whose input windows end inside the first `end` padded positions: those
 * are tiles 0 .. that - 1, since tile bases grow with the tile index. */
static long long tiles_inside(const geom &g, long long end) {
    long long lo = 0, hi = g.tiles; /* tiles lo-1 and below fit, hi and above do not */
    while (lo < hi) {
        const long long mid = (lo + hi) / 2;
        if (tile_base(g, (int)mid) + 2LL * g.Wp + g.seg <= end) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Fills g from the sizes; returns 0, or -1 when a size overflows the int arithmetic used.
 * Tiles are 256 output pixels each (real) where that takes fewer tiles than 256 padded
 * positions and its longer window still leaves room for two blocks an SM: at the eval size 784
 * tiles instead of 841, three whole waves of 264 blocks on 132 SMs instead of 3.19. */
static int make_geom(geom *g, long long N, long long C, long long H, long long W, long long K) {
    memset(g, 0, sizeof(*g));
    const long long Hp = H + 2, Wp = W + 2, chunks = (C + CK - 1) / CK;
    const long long HpWp = Hp * Wp, tiles = (N * HpWp + BN - 1) / BN;
    if (N * Hp > INT32_MAX || (Wp + PRE_COLS - 1) / PRE_COLS > 65535 ||
        tiles * BN + 2 * Wp + 2 > INT32_MAX / 2 || tiles * ((K + BM - 1) / BM) > INT32_MAX ||
        C > INT32_MAX - CK || K > INT32_MAX - BM || H * W > INT32_MAX)
        return -1;
    g->N = (int)N, g->C = (int)C, g->H = (int)H, g->W = (int)W, g->K = (int)K;
    g->Hp = (int)Hp, g->Wp = (int)Wp, g->chunks = (int)chunks;
    g->kblocks = (int)((K + BM - 1) / BM);
    g->HW = H * W, g->NHW = N * H * W, g->HpWp = HpWp;
    /* output-pixel tiles where they are fewer and their window leaves two blocks an SM (or no
     * less room than the padded tiles' own) */
    const int real_tiles = (int)((g->NHW + BN - 1) / BN);
    const int padded_smem = stage_smem(window_rows(Wp, SEG));
    g->real = 1, g->tiles = real_tiles; /* the tiles real_seg walks */
    const int seg = real_tiles < tiles ? real_seg(g) : 0;
    const int room = padded_smem > REAL_SMEM_MAX ? padded_smem : REAL_SMEM_MAX;
    if (seg && stage_smem(window_rows(Wp, seg)) <= room)
        g->seg = seg;
    else
        g->real = 0, g->tiles = (int)tiles, g->seg = SEG;
    /* short rows: one contiguous window of 2*Wp + seg pixels; long rows: three runs of seg */
    g->RS = Wp < g->seg ? (int)Wp : g->seg;
    g->xrows = window_rows(Wp, g->seg);
    /* the last block's window ends at G; the pre-pass writes every padded image */
    const long long end = (long long)tile_base(*g, g->tiles - 1) + 2 * Wp + g->seg;
    g->G = end > N * HpWp ? end : N * HpWp;
    return 0;
}

#ifdef __CUDACC__
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

/* A 1-d f32 param of length n. */
static bool f32_ok(const st_tensor *t, int64_t n) {
    return t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == n && t->data != NULL &&
           ((uintptr_t)t->data & 3) == 0;
}

static bool cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "conv_bn_relu expert: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

extern "C" void st_free(void *ctx) {
    conv_ctx *c = (conv_ctx *)ctx;
    if (c == NULL) return;
    /* st_free cannot report; a failing free here would only hide the error that led to it */
    cudaFree(c->wp);
    cudaFree(c->bn);
    cudaFree(c->xp);
    for (int i = 0; i < 2; i++) {
        if (c->side[i]) cudaStreamDestroy(c->side[i]);
        if (c->ev_done[i]) cudaEventDestroy(c->ev_done[i]);
    }
    for (int i = 0; i < CONV_PARTS; i++)
        if (c->ev_pre[i]) cudaEventDestroy(c->ev_pre[i]);
    free(c);
}

/* Allocations, the weight repack, the batch-norm constants and the one-time attributes. The
 * scratch is zeroed once only for its slack rows past the batch, which feed discarded
 * positions; the pre-pass rewrites everything else on every call. */
static bool init_device(conv_ctx *c, const st_tensor *params, cudaStream_t stream) {
    const geom *g = &c->g;
    const int kpad = g->kblocks * BM;
    const size_t wtotal = (size_t)g->kblocks * g->chunks * W_ELEMS;
    const size_t xtotal = (size_t)g->chunks * g->G * CK;
    int dev = 0, max_smem = 0;
    if (!cuda_ok(cudaGetDevice(&dev), "cudaGetDevice") ||
        !cuda_ok(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                 "cudaDeviceGetAttribute"))
        return false;
    if (c->smem_bytes > max_smem) {
        fprintf(stderr, "conv_bn_relu expert: %d bytes of shared memory needed, %d available\n",
                c->smem_bytes, max_smem);
        return false;
    }
    if (!cuda_ok(cudaMalloc(&c->wp, wtotal * 2), "cudaMalloc(wp)") ||
        !cuda_ok(cudaMalloc(&c->bn, (size_t)kpad * 2 * sizeof(float)), "cudaMalloc(bn)") ||
        !cuda_ok(cudaMalloc(&c->xp, xtotal * 2), "cudaMalloc(xp)") ||
        !cuda_ok(cudaMemsetAsync(c->xp, 0, xtotal * 2, stream), "cudaMemsetAsync") ||
        !cuda_ok(cudaFuncSetAttribute(conv3x3_bn_relu_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, c->smem_bytes),
                 "cudaFuncSetAttribute(max dynamic smem)") ||
        /* a hint that the L1/smem split should favour smem, so that MIN_BLOCKS blocks fit: the
         * main loop copies with cp.async.cg, which bypasses L1 anyway */
        !cuda_ok(cudaFuncSetAttribute(conv3x3_bn_relu_kernel,
                                      cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared),
                 "cudaFuncSetAttribute(carveout)"))
        return false;
    for (int i = 0; i < 2; i++)
        if (!cuda_ok(cudaStreamCreateWithFlags(&c->side[i], cudaStreamNonBlocking), "side stream") ||
            !cuda_ok(cudaEventCreateWithFlags(&c->ev_done[i], cudaEventDisableTiming), "event"))
            return false;
    for (int i = 0; i < CONV_PARTS; i++)
        if (!cuda_ok(cudaEventCreateWithFlags(&c->ev_pre[i], cudaEventDisableTiming), "event"))
            return false;
    const size_t blocks = (wtotal + 255) / 256;
    prep_weights_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(
        (const __nv_bfloat16 *)params[0].data, c->wp, g->C, g->K, g->chunks, wtotal);
    if (!cuda_ok(cudaGetLastError(), "prep_weights_kernel launch")) return false;
    prep_bn_kernel<<<(unsigned)((kpad + 255) / 256), 256, 0, stream>>>(
        (const float *)params[1].data, (const float *)params[2].data,
        (const float *)params[3].data, (const float *)params[4].data,
        (const float *)params[5].data, c->bn, g->K, kpad);
    /* st_run may get another stream: the repacked params must be complete before we return */
    return cuda_ok(cudaGetLastError(), "prep_bn_kernel launch") &&
           cuda_ok(cudaStreamSynchronize(stream), "st_init sync");
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    int64_t N, C, H, W, K;
    if (cfg == NULL || ctx == NULL || params == NULL || n_params != 6) {
        fprintf(stderr, "conv_bn_relu expert: expected 6 params\n");
        return 1;
    }
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "H", &H) ||
        cfg_get(cfg, "W", &W) || cfg_get(cfg, "K", &K)) {
        fprintf(stderr, "conv_bn_relu expert: config lacks one of N, C, H, W, K\n");
        return 1;
    }
    /* params: weight, gamma, beta, running_mean, running_var, eps */
    bool params_ok = N >= 1 && C >= 1 && H >= 1 && W >= 1 && K >= 1 &&
                     tensor_ok(&params[0], K, C, 3, 3) && f32_ok(&params[5], 1);
    for (int i = 1; i < 5; i++) params_ok = params_ok && f32_ok(&params[i], K);
    if (!params_ok) {
        fprintf(stderr, "conv_bn_relu expert: bad sizes or param tensors\n");
        return 1;
    }
    conv_ctx *c = (conv_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    if (make_geom(&c->g, N, C, H, W, K) != 0) {
        fprintf(stderr, "conv_bn_relu expert: sizes too large\n");
        free(c);
        return 1;
    }
    c->smem_bytes = stage_smem(c->g.xrows);
    if (c->smem_bytes < ep_slot(THREADS / 32, 0, 0) * 2) /* the staged epilogue; never at CK 16 */
        c->smem_bytes = ep_slot(THREADS / 32, 0, 0) * 2;
    if (!init_device(c, params, stream)) {
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
    const geom g = c->g;
    if (!tensor_ok(&in[0], g.N, g.C, g.H, g.W) || !tensor_ok(&out[0], g.N, g.K, g.H, g.W)) {
        fprintf(stderr, "conv_bn_relu expert: tensor shapes differ from the config\n");
        return 1;
    }
    __nv_bfloat16 *y = (__nv_bfloat16 *)out[0].data;
    /* pairs of positions share an image row (padded tiles, W even) or an image (real, HW even) */
    const int pair_store = (g.real ? g.HW % 2 == 0 : g.W % 2 == 0) && ((uintptr_t)y & 3) == 0;
    /* The batch in parts of whole images: pre-passes in order on the call's stream, part k's GEMM
     * on a side stream once pre-pass k is done, so the memory-bound pre-pass k+1 runs beside it.
     * A part's GEMM takes the tiles whose input windows end inside its images. */
    const bool vec = g.W % 8 == 0 && ((uintptr_t)in[0].data & 15) == 0;
    const int parts = g.N < CONV_PARTS ? g.N : CONV_PARTS;
    for (int i = 0; i < 2; i++)
        if (!cuda_ok(cudaStreamWaitEvent(stream, c->ev_done[i], 0), "wait for the last call")) return 1;
    long long t_lo = 0;
    for (int k = 0; k < parts; k++) {
        const long long n_hi = (long long)g.N * (k + 1) / parts, n_lo = (long long)g.N * k / parts;
        const dim3 pre_grid((unsigned)((n_hi - n_lo) * g.Hp), (unsigned)((g.Wp + PRE_COLS - 1) / PRE_COLS));
        if (vec)
            to_padded_nhwc_kernel<true><<<pre_grid, PRE_THREADS, 0, stream>>>(
                (const uint16_t *)in[0].data, c->xp, g, (int)(n_hi * g.Hp));
        else
            to_padded_nhwc_kernel<false><<<pre_grid, PRE_THREADS, 0, stream>>>(
                (const uint16_t *)in[0].data, c->xp, g, (int)(n_hi * g.Hp));
        if (!cuda_ok(cudaGetLastError(), "to_padded_nhwc_kernel launch") ||
            !cuda_ok(cudaEventRecord(c->ev_pre[k], stream), "record a part's pre-pass"))
            return 1;
        long long t_hi = k + 1 < parts ? tiles_inside(g, n_hi * g.HpWp) : g.tiles;
        if (t_hi < t_lo) t_hi = t_lo;
        cudaStream_t sk = c->side[k % 2];
        if (!cuda_ok(cudaStreamWaitEvent(sk, c->ev_pre[k], 0), "a part's GEMM waits for its pre-pass"))
            return 1;
        if (t_hi > t_lo) {
            const unsigned blocks = (unsigned)((t_hi - t_lo) * g.kblocks);
            conv3x3_bn_relu_kernel<<<blocks, THREADS, c->smem_bytes, sk>>>(
                c->xp, (const uint16_t *)c->wp, c->bn, y, g, pair_store,
                (unsigned)(t_lo * g.kblocks));
            if (!cuda_ok(cudaGetLastError(), "conv3x3_bn_relu_kernel launch")) return 1;
        }
        t_lo = t_hi;
    }
    for (int i = 0; i < 2; i++)
        if (!cuda_ok(cudaEventRecord(c->ev_done[i], c->side[i]), "record the GEMMs' end") ||
            !cuda_ok(cudaStreamWaitEvent(stream, c->ev_done[i], 0), "the call waits for its GEMMs"))
            return 1;
    return 0;
}
#endif /* __CUDACC__ */
