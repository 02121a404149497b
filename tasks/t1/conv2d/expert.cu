/* Expert for t1/conv2d: 3x3 convolution, stride 1, zero padding 1, NCHW bf16, fp32
 * accumulation. In a zero-bordered, channels-last layout an output pixel is a linear position
 * g = (n, h, w) of the padded image grid and tap (r, s) reads position g + r*(W+2) + s, so every
 * tap of a block's tile is the same window shifted. Two main kernels:
 * - sm_90a, C <= 64 and the window in shared memory (the eval shape): one persistent wgmma
 *   kernel a call, one block an SM. The kernel block's weights stay resident in shared memory
 *   (one bulk copy); a producer warpgroup builds each 16-channel chunk's window of a tile of 256
 *   consecutive padded positions into a ring of stages counted on mbarriers: where W is a
 *   multiple of 8 and x 16-byte aligned it reads x itself (16 bytes, 8 columns of a channel, a
 *   load), transposes 8 channels x 8 columns by byte permutes and writes the window, pads
 *   included, as two planes of 8 channels, so that 8 consecutive positions from any start are
 *   one 128-byte core matrix of the unswizzled K-major layout and a tap's shift is a shift of the
 *   descriptor's start; elsewhere the pre-pass below writes xp in those planes and one thread
 *   brings each window by two bulk copies. Two consumer warpgroups take the block's tiles in
 *   turn, each tap of a chunk one wgmma m64n256k16 from shared memory, and write a finished tile
 *   through shared memory (128-byte stores of a channel) while the other computes.
 * - elsewhere: a memory-bound pre-pass rewrites x into xp[chunk][n][H+2][W+2][16 channels]; the
 *   main kernel is an implicit GEMM on mma.sync m16n8k16 (sm_80+) with no bounds checks in its
 *   loop. A block takes 256 consecutive output pixels (or, where that would make the window too
 *   long, 256 consecutive padded positions, those on pad rows and columns computed and
 *   discarded), which read three runs of consecutive padded pixels from the first one's position
 *   on (one contiguous window when rows are short): every operand row is a 32-byte cp.async
 *   pair, every ldmatrix row one shifted smem row. Block: 64 out channels x 256 positions, 4
 *   warps of 64 x 64 (one ldmatrix wavefront per MMA), 3-stage cp.async pipeline over 16-channel
 *   chunks, XOR-swizzled smem rows.
 * Weights are repacked once in st_init for the kernel chosen there. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
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
#define STAGES 3
#define SEG (BN + 2)                /* padded pixels a kernel row reads for a padded tile */
#define W_ROWS (TAPS * BM)          /* weight rows per chunk: (tap, out channel) */
#define W_ELEMS (W_ROWS * CK)
#define PRE_THREADS 256
#define PRE_COLS 64                 /* padded columns per pre-pass block */
#define PRE_HW 17                   /* 32-bit words per pre-pass smem pixel (16 + 1 pad) */
#define EP_STRIDE 72                /* bf16 elements per staged output row (64 + 8 pad) */
#define REAL_SMEM_MAX (110 * 1024)  /* shared memory a block can have with two an SM (sm_90) */
#define WG_STAGES 6                 /* window stages in the wgmma kernel's ring */
#define WG_EP_STRIDE (BN + 8)       /* bf16 a staged output row: 264 (132 words) is conflict-free */
#define WG_EP_BYTES (BM * WG_EP_STRIDE * 2) /* one consumer warpgroup's staged tile */
#define WG_THREADS 384              /* two consumer warpgroups and one producer warpgroup */
#define WG_PRODUCERS 128            /* threads of the producer warpgroup */
#define WG_MAX_CHUNKS 4             /* resident weights: at most 4 chunks (72 KiB) */
#define WG_TAP_BYTES (BM * CK * 2)  /* one tap's weights in the wgmma layout */
#define WG_CHUNK_BYTES (TAPS * WG_TAP_BYTES)
/* descriptor offsets (bytes) of the unswizzled K-major operands: the weights' k halves 128 apart
 * and 8-row groups 256; the window's k halves a plane apart and 8-position groups 128 */
#define WG_A_LBO 128
#define WG_A_SBO 256
#define WG_B_SBO 128

/* The wgmma path's body exists where the compiler targets sm_90a (wgmma is not in sm_100a's
 * set); elsewhere the kernel is empty and st_init never chooses it. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONV_WG 1
#else
#define CONV_WG 0
#endif

/* Sizes and the derived scratch geometry; passed by value to both kernels. */
typedef struct geom {
    int N, C, H, W, K;
    int Hp, Wp, chunks, kblocks, tiles;
    int real;                       /* tiles of output pixels (1) or of padded positions (0) */
    int planes;                     /* wgmma path: xp as [chunk][half][G][8], else [chunk][G][16] */
    int seg;                        /* padded pixels one kernel row r reads for a block */
    int RS;                         /* smem rows between the runs of kernel rows r and r+1 */
    int xrows;                      /* smem rows of one stage's input window: 2*RS + seg */
    long long HW, NHW;              /* output pixels per image and in the batch */
    long long HpWp, G;              /* padded pixels per image; per chunk in xp (with slack) */
} geom;

typedef struct conv_ctx {
    geom g;
    int smem_bytes;
    int wg_grid;                    /* the wgmma kernel's persistent grid's x (where g.planes) */
    __nv_bfloat16 *wp;              /* [kblock][chunk][tap][64 out][16 in] */
    uint16_t *xp;                   /* the pre-pass output, laid out as g.planes says */
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
    const long long pos = (long long)nh * g.Wp + wp0 + px;
    if (g.planes) return (((long long)(chunk0 + cc) * 2 + half) * g.G + pos) * 8;
    return ((long long)(chunk0 + cc) * g.G + pos) * CK + 8 * half;
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


#if CONV_WG
/* ------------------------------------------------------------------------------------------ */
/* the sm_90a path: PTX wrappers */

/* Matrix descriptor (PTX ISA, wgmma's matrix descriptor format): bits 0-13 start address >> 4,
 * 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset >> 4, 62-63
 * swizzle mode (0: none). In the unswizzled K-major layout a core matrix is 8 rows of 16
 * contiguous bytes; the leading offset is the distance between the two core matrices along K
 * (channels 0-7 and 8-15 of a k16 step), the stride offset the distance to the next 8 rows. */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
}

/* D (+)= A·B, m64n256k16, A (64 out channels x 16) and B (256 positions x 16) from shared memory,
 * both K-major, fp32 D; D is overwritten where accumulate is 0. */
__device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db,
                                           int accumulate) {
    asm volatile("{\n.reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
                 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
                 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
                 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                   "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                   "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                   "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
                   "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                   "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                   "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
                   "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                   "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]),
                   "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
                   "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                   "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),
                   "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
                   "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
                   "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
                   "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]),
                   "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),
                   "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(accumulate));
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

/* Keeps the compiler from moving accumulator reads or writes across the wgmma's wait. */
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
    for (int i = 0; i < 128; i++) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes) : "memory");
}

/* Returns once the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}\n" ::"r"(bar), "r"(parity) : "memory");
}

/* One bulk copy (TMA) of `bytes` (a multiple of 16, both ends 16-byte aligned), completing on bar */
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes,
                                          uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
#endif /* CONV_WG */

/* ------------------------------------------------------------------------------------------ */
/* kernels */

/* wp[kb][chunk][tap][m][c] = w[kb*64 + m][chunk*16 + c][tap], zero where the out channel or the
 * input channel does not exist, so the main kernel copies whole tiles without bounds checks.
 * For the wgmma path (wg) a tap's 64 x 16 is ordered [m/8][c/8][m%8][c%8]: 128-byte core
 * matrices of 8 out channels x 8 input channels, the two k halves of a group side by side. */
__global__ void prep_weights_kernel(const __nv_bfloat16 *__restrict__ w,
                                    __nv_bfloat16 *__restrict__ wp, int C, int K, int chunks,
                                    size_t total, int wg) {
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const int c = wg ? (int)(e % 8) + 8 * (int)(e / 64 % 2) : (int)(e % CK);
        const int m = wg ? (int)(e / 8 % 8) + 8 * (int)(e / 128 % 8) : (int)(e / CK % BM);
        const int t = (int)(e / (CK * BM) % TAPS);
        const size_t kc = e / W_ELEMS;  /* kb * chunks + chunk */
        const int chunk = (int)(kc % chunks), kb = (int)(kc / chunks);
        const int k = kb * BM + m, ci = chunk * CK + c;
        wp[e] = k < K && ci < C ? w[((size_t)k * C + ci) * TAPS + t] : __float2bfloat16(0.0f);
    }
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
to_padded_nhwc_kernel(const uint16_t *__restrict__ x, uint16_t *__restrict__ xp, geom g) {
    __shared__ uint32_t s[PRE_COLS * PRE_HW];
    uint16_t *sh = (uint16_t *)s;
    const int t = threadIdx.x, nh = g.N * g.Hp - 1 - blockIdx.x, wp0 = blockIdx.y * PRE_COLS;
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

/* Tile b's positions p and p + 1 from staged rows (out channel m's at rows + m*stride, these two
 * positions at column col) to y, a channel at a time: 4-byte pairs where pair_store (store_tile
 * says when a pair is whole), else the elements that are not discarded. */
__device__ __forceinline__ void store_staged_pair(const geom &g, const uint16_t *rows, int stride,
                                                  int col, __nv_bfloat16 *__restrict__ y, int b,
                                                  int kb, int p, int pair_store) {
    const long long o0 = out_pos(g, b, p), o1 = out_pos(g, b, p + 1);
    if (o0 < 0 && o1 < 0) return;
    const long long HW = (long long)g.H * g.W;
    const int mmax = g.K - kb * BM < BM ? g.K - kb * BM : BM;
    for (int m = 0; m < mmax; m++) {
        const uint32_t v = *(const uint32_t *)(rows + m * stride + col);
        const long long koff = (long long)(kb * BM + m) * HW;
        if (pair_store) {
            *(uint32_t *)(y + o0 + koff) = v;
        } else {
            if (o0 >= 0) *(uint16_t *)(y + o0 + koff) = (uint16_t)v;
            if (o1 >= 0) *(uint16_t *)(y + o1 + koff) = (uint16_t)(v >> 16);
        }
    }
}

/* Accumulator (i, j, e) is out channel 16i + lane/4 (+8 for e >= 2), position
 * WN*warp + 8j + 2*(lane%4) (+1 for odd e). Written to smem first so that each warp store covers
 * 64 consecutive positions of one channel (128 contiguous bytes but for image breaks, and row
 * breaks with padded tiles) instead of 16-byte pieces of 8 channels. Lane l stores positions 2l
 * and 2l+1 of its warp's 64. With pair_store both are in one image (real tiles, H*W even: the
 * pair's first pixel index is even) or, with padded tiles and W even, one image row or both
 * discarded (the tile start and 2l are even and so are W+2 and (H+2)(W+2), so the pair starts on
 * an even column and W-1 is odd). */
__device__ __forceinline__ void store_tile(const geom &g, const float (&acc)[4][8][4],
                                           uint16_t *stage, __nv_bfloat16 *__restrict__ y,
                                           int b, int kb, int warp, int lane, int pair_store) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int m = 16 * i + (lane >> 2) + 8 * half, px = 8 * j + 2 * (lane & 3);
                *(__nv_bfloat162 *)(stage + ep_slot(warp, m, px)) =
                    __floats2bfloat162_rn(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
            }
    __syncwarp();
    store_staged_pair(g, stage + ep_slot(warp, 0, 0), EP_STRIDE, 2 * lane, y, b, kb,
                      WN * warp + 2 * lane, pair_store);
}

/* One block: tile b's 256 positions (output pixels or padded positions), out channels
 * kb*64 .. +63.
 * Warp w owns positions 64w .. 64w+63 for all 64 channels: 4 m16 x 8 n8 accumulators. */
__global__ void __launch_bounds__(THREADS, 2)
conv3x3_nhwc_kernel(const uint16_t *__restrict__ xp, const uint16_t *__restrict__ wp,
                    __nv_bfloat16 *__restrict__ y, geom g, int pair_store) {
    extern __shared__ __align__(128) uint16_t smem[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int b = blockIdx.x, kb = blockIdx.y, base = tile_base(g, b);
    const uint16_t *wpk = wp + (size_t)kb * g.chunks * W_ELEMS;
    const uint32_t smem_base = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t stage_bytes = (uint32_t)(g.xrows * CK + W_ELEMS) * 2;

    int brow[4];
#pragma unroll
    for (int pg = 0; pg < 4; pg++) brow[pg] = pos_row(g, b, base, b_lane_pos(warp, pg, lane));
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
    store_tile(g, acc, smem, y, b, kb, warp, lane, pair_store);
}

/* ------------------------------------------------------------------------------------------ */
/* the sm_90a kernel */

/* Bytes of one stage of the wgmma kernel's ring: the window's two planes (xrows positions x 16
 * bytes each), rounded up to 128 bytes. */
__host__ __device__ __forceinline__ uint32_t wg_stage_bytes(const geom &g) {
    return ((uint32_t)g.xrows * 32u + 127u) & ~127u;
}

#if CONV_WG
/* Warp q of a consumer warpgroup writes tile `tile` through the warpgroup's staging area (rows of
 * WG_EP_STRIDE bf16 a channel): wgmma's D fragment for m64nN puts accumulator 4c + 2i + j of lane
 * l at out channel 16q + l/4 + 8i, position 8c + 2(l%4) + j; once the warpgroup has staged all of
 * it, warp q stores positions 64q .. 64q + 63 a channel at a time (lane l positions 2l, 2l + 1),
 * 128 contiguous bytes a store but for padded-row breaks, instead of 16-byte pieces of 8
 * channels. Named barrier 1 + cw: the warpgroup's 128 threads. */
__device__ __forceinline__ void wg_store_staged(const geom &g, const float (&d)[128],
                                                uint32_t ep, __nv_bfloat16 *__restrict__ y,
                                                int tile, int kb, int cw, int q, int lane,
                                                int pair_store) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cw) : "memory"); /* the last tile's reads done */
#pragma unroll
    for (int c = 0; c < BN / 8; c++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int m = 16 * q + (lane >> 2) + 8 * i, px = 8 * c + 2 * (lane & 3);
            const __nv_bfloat162 v = __floats2bfloat162_rn(d[4 * c + 2 * i], d[4 * c + 2 * i + 1]);
            asm volatile("st.shared.b32 [%0], %1;\n"
                         ::"r"(ep + (uint32_t)(m * WG_EP_STRIDE + px) * 2),
                         "r"(*(const uint32_t *)&v) : "memory");
        }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cw) : "memory");
    const int p = WN * q + 2 * lane;
    store_staged_pair(g, (const uint16_t *)__cvta_shared_to_generic(ep), WG_EP_STRIDE, p, y, tile,
                      kb, p, pair_store);
}

/* The producer (one thread): for each of the block's tiles in order (tile = blockIdx.x +
 * k*gridDim.x) and each chunk the window's two planes into the next stage of the ring, once the
 * consumer that read it last has released it. */
__device__ __forceinline__ void wg_produce(const geom &g, const uint16_t *__restrict__ xp,
                                           uint32_t stages, uint32_t full0, uint32_t empty0) {
    const uint32_t plane = (uint32_t)g.xrows * 16u, sbytes = wg_stage_bytes(g);
    int it = 0;
    for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
        for (int ch = 0; ch < g.chunks; ch++, it++) {
            const int s = it % WG_STAGES;
            mbar_wait(empty0 + 8 * s, ((it / WG_STAGES) & 1) ^ 1);
            mbar_expect(full0 + 8 * s, 2 * plane);
            const uint16_t *src = xp + ((long long)ch * 2 * g.G + (long long)tile * BN) * 8;
            bulk_copy(stages + s * sbytes, src, plane, full0 + 8 * s);
            bulk_copy(stages + s * sbytes + plane, src + g.G * 8, plane, full0 + 8 * s);
        }
    }
}

/* The fused producer's part of one stage: window positions [0, xrows) of tile `tile`, chunk ch,
 * i.e. padded positions tile*256 + i, written as the two planes from x directly. A unit is
 * (padded row r of the window, half, column group q): q < W/8 is 8 real columns of 8 channels
 * (8 loads of 16 bytes, transposed by byte permutes into 8 rows of 16 bytes; zeros on pad rows,
 * past the batch and past C), q = W/8 the row's two pad columns. Units are dealt to the 128
 * producer threads column group fastest, so a warp's loads of one channel are runs of an x row
 * (its stores then meet in the same banks). */
struct fused_unit {
    uint4 v[8];
    int pos, q, half; /* window position of the unit's first column, its column group, its plane */
};

__device__ __forceinline__ void fused_load(const geom &g, const uint16_t *__restrict__ x,
                                           int tile, int ch, int u, int rows, fused_unit &f) {
    const int G8 = g.W >> 3, q = u % (G8 + 1), half = (u / (G8 + 1)) & 1, r = u / (G8 + 1) >> 1;
    f.half = half;
    const int base = tile * BN, rp = base / g.Wp + r, n = rp / g.Hp, hp = rp - n * g.Hp;
    f.pos = rp * g.Wp - base;
    f.q = q;
#pragma unroll
    for (int k = 0; k < 8; k++) f.v[k] = make_uint4(0, 0, 0, 0);
    if (q == G8) return;
    f.pos += 1 + 8 * q;
    if (n >= g.N || hp < 1 || hp > g.H) return;
    const int c0 = ch * CK + 8 * half;
    const uint16_t *src = x + (((long long)n * g.C + c0) * g.H + hp - 1) * g.W + 8 * q;
    const long long cs = (long long)g.H * g.W;
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (c0 + k < g.C) f.v[k] = __ldg((const uint4 *)(src + k * cs));
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Writes a unit: column j's 8 channels are 16 bytes at plane f.half, window position pos + j. */
__device__ __forceinline__ void fused_store(const geom &g, uint32_t xs, int G8,
                                            const fused_unit &f) {
    const uint32_t plane = (uint32_t)g.xrows * 16u, pb = xs + f.half * plane;
    if (f.q == G8) { /* the two pad columns */
        const int a = f.pos, b = f.pos + g.Wp - 1;
        if (a >= 0 && a < g.xrows)
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(pb + a * 16u), "r"(0));
        if (b >= 0 && b < g.xrows)
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(pb + b * 16u), "r"(0));
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int p = f.pos + j;
        if (p < 0 || p >= g.xrows) continue;
        const uint32_t sel = (j & 1) ? 0x7632 : 0x5410;
        const uint32_t w0 = __byte_perm(word_of(f.v[0], j >> 1), word_of(f.v[1], j >> 1), sel);
        const uint32_t w1 = __byte_perm(word_of(f.v[2], j >> 1), word_of(f.v[3], j >> 1), sel);
        const uint32_t w2 = __byte_perm(word_of(f.v[4], j >> 1), word_of(f.v[5], j >> 1), sel);
        const uint32_t w3 = __byte_perm(word_of(f.v[6], j >> 1), word_of(f.v[7], j >> 1), sel);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(pb + p * 16u), "r"(w0),
                     "r"(w1), "r"(w2), "r"(w3));
    }
}

/* The fused producer warpgroup: per tile its chunks in pairs, every unit's loads of both chunks
 * issued before any store (16 loads a thread in flight); each stage waited free before its
 * stores, then made visible to the async proxy (wgmma reads through it) and arrived on by all
 * 128 threads. */
__device__ __forceinline__ void wg_produce_fused(const geom &g, const uint16_t *__restrict__ x,
                                                 int p, uint32_t stages, uint32_t full0,
                                                 uint32_t empty0) {
    const uint32_t sbytes = wg_stage_bytes(g);
    const int G8 = g.W >> 3;
    int it = 0;
    for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
        const int base = tile * BN, rows = (base + g.xrows - 1) / g.Wp - base / g.Wp + 1;
        const int units = rows * 2 * (G8 + 1);
        for (int ch = 0; ch < g.chunks; ch += 2, it += 2) {
            const bool two = ch + 1 < g.chunks;
            for (int u0 = 0; u0 < units; u0 += WG_PRODUCERS) {
                const int u = u0 + p;
                fused_unit a, b;
                if (u < units) {
                    fused_load(g, x, tile, ch, u, rows, a);
                    if (two) fused_load(g, x, tile, ch + 1, u, rows, b);
                }
                if (u0 == 0) { /* both stages free before the first store into either */
                    mbar_wait(empty0 + 8 * (it % WG_STAGES), ((it / WG_STAGES) & 1) ^ 1);
                    if (two)
                        mbar_wait(empty0 + 8 * ((it + 1) % WG_STAGES),
                                  (((it + 1) / WG_STAGES) & 1) ^ 1);
                }
                if (u < units) {
                    fused_store(g, stages + (it % WG_STAGES) * sbytes, G8, a);
                    if (two) fused_store(g, stages + ((it + 1) % WG_STAGES) * sbytes, G8, b);
                }
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(full0 + 8 * (it % WG_STAGES));
            if (two) mbar_arrive(full0 + 8 * ((it + 1) % WG_STAGES));
            else it--; /* one stage used: it += 2 below counts one */
        }
    }
}

/* Consumer warpgroup cw takes the block's tiles k = cw, cw + 2, ...: per chunk one wgmma a tap
 * (the first of a tile overwrites D), the chunk before's stage released once its wgmmas are done
 * (one arrival a warp), then the tile written out while the other warpgroup computes. */
__device__ __forceinline__ void wg_consume(const geom &g, __nv_bfloat16 *__restrict__ y, int kb,
                                           int cw, int q, int lane, int pair_store, uint32_t wsm,
                                           uint32_t stages, uint32_t full0, uint32_t empty0,
                                           uint32_t wbar) {
    const uint32_t plane = (uint32_t)g.xrows * 16u, sbytes = wg_stage_bytes(g);
    const uint32_t ep = stages + WG_STAGES * sbytes + cw * WG_EP_BYTES;
    float d[128];
    mbar_wait(wbar, 0);
    int k = cw;
    for (int tile = blockIdx.x + cw * gridDim.x; tile < g.tiles; tile += 2 * gridDim.x, k += 2) {
        int it = k * g.chunks;
        for (int ch = 0; ch < g.chunks; ch++, it++) {
            const int s = it % WG_STAGES;
            mbar_wait(full0 + 8 * s, (it / WG_STAGES) & 1);
            const uint32_t xs = stages + s * sbytes, ws = wsm + ch * WG_CHUNK_BYTES;
            wgmma_fence();
#pragma unroll
            for (int t = 0; t < TAPS; t++)
                wgmma_n256(d, wg_desc(ws + t * WG_TAP_BYTES, WG_A_LBO, WG_A_SBO),
                           wg_desc(xs + (uint32_t)((t / 3) * g.Wp + t % 3) * 16u, plane, WG_B_SBO),
                           t > 0 || ch > 0);
            wgmma_commit();
            if (ch > 0) {
                wgmma_wait<1>();
                if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % WG_STAGES));
            }
        }
        wgmma_wait<0>();
        fence_acc(d);
        if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % WG_STAGES));
        wg_store_staged(g, d, ep, y, tile, kb, cw, q, lane, pair_store);
    }
}
#endif /* CONV_WG */

/* Persistent: block (x, kb) takes tiles x, x + gridDim.x, ... of 256 padded positions for out
 * channels kb*64 .. +63. Dynamic shared memory: the weights (chunks x 18 KiB), then the ring,
 * then each consumer warpgroup's staged output tile.
 * FUSED: src is x and the producer warpgroup builds the windows; else src is the pre-pass's xp
 * and one thread brings them by bulk copies. */
template <bool FUSED>
__global__ void __launch_bounds__(WG_THREADS, 1)
conv3x3_wg_kernel(const uint16_t *__restrict__ src, const uint16_t *__restrict__ wq,
                  __nv_bfloat16 *__restrict__ y, geom g, int pair_store) {
#if CONV_WG
    __shared__ __align__(8) uint64_t bars[2 * WG_STAGES + 1]; /* full, empty, weights */
    extern __shared__ __align__(128) unsigned char wg_smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const uint32_t wsm = (uint32_t)__cvta_generic_to_shared(wg_smem);
    const uint32_t stages = wsm + (uint32_t)g.chunks * WG_CHUNK_BYTES;
    const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(bars);
    const uint32_t empty0 = full0 + 8 * WG_STAGES, wbar = full0 + 16 * WG_STAGES;
    if (tid == 0) {
        for (int i = 0; i < WG_STAGES; i++) {
            mbar_init(full0 + 8 * i, FUSED ? WG_PRODUCERS : 1);
            mbar_init(empty0 + 8 * i, 4); /* one arrival a warp of the consumer warpgroup */
        }
        mbar_init(wbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp >= 8) {
        /* registers move from the producer warpgroup (its loads of two units need about 100) to
         * the consumers (128 accumulators and the staged epilogue's addresses) */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 104;\n" ::: "memory");
        if (tid == 256) { /* the kernel block's weights, once */
            const uint32_t wbytes = (uint32_t)g.chunks * WG_CHUNK_BYTES;
            mbar_expect(wbar, wbytes);
            bulk_copy(wsm, wq + (size_t)blockIdx.y * g.chunks * W_ELEMS, wbytes, wbar);
        }
        if (FUSED)
            wg_produce_fused(g, src, tid - 256, stages, full0, empty0);
        else if (tid == 256)
            wg_produce(g, src, stages, full0, empty0);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 200;\n" ::: "memory");
    wg_consume(g, y, blockIdx.y, warp >> 2, warp & 3, lane, pair_store, wsm, stages, full0,
               empty0, wbar);
#else
    (void)src, (void)wq, (void)y, (void)g, (void)pair_store;
#endif
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

/* Fills g from the sizes; returns 0, or -1 when a size overflows the int arithmetic used.
 * Tiles are 256 output pixels each (real) where allow_real, that takes fewer tiles than 256
 * padded positions and its longer window still leaves room for two blocks an SM: at the eval
 * size 784 tiles instead of 841, three whole waves of 264 blocks on 132 SMs instead of 3.19.
 * The wgmma path asks for padded tiles (its operand rows must be evenly spaced). */
static int make_geom(geom *g, long long N, long long C, long long H, long long W, long long K,
                     int allow_real) {
    memset(g, 0, sizeof(*g));
    const long long Hp = H + 2, Wp = W + 2, chunks = (C + CK - 1) / CK;
    const long long HpWp = Hp * Wp, tiles = (N * HpWp + BN - 1) / BN;
    if (N * Hp > INT32_MAX || (Wp + PRE_COLS - 1) / PRE_COLS > 65535 ||
        tiles * BN + 2 * Wp + 2 > INT32_MAX / 2 || (K + BM - 1) / BM > 65535 ||
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
    const int seg = allow_real && real_tiles < tiles ? real_seg(g) : 0;
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

static bool cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "conv2d expert: %s: %s\n", what, cudaGetErrorString(e));
    return false;
}

extern "C" void st_free(void *ctx) {
    conv_ctx *c = (conv_ctx *)ctx;
    if (c == NULL) return;
    cudaFree(c->wp);
    cudaFree(c->xp);
    free(c);
}

/* Allocations, the weight repack and the one-time attributes. The scratch is zeroed once only
 * for its slack rows past the batch, which feed discarded positions; the pre-pass rewrites
 * everything else on every call. */
static bool init_device(conv_ctx *c, const __nv_bfloat16 *w, cudaStream_t stream) {
    const geom *g = &c->g;
    const size_t wtotal = (size_t)g->kblocks * g->chunks * W_ELEMS;
    const size_t xtotal = (size_t)g->chunks * g->G * CK;
    int dev = 0, max_smem = 0;
    if (!cuda_ok(cudaGetDevice(&dev), "cudaGetDevice") ||
        !cuda_ok(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                 "cudaDeviceGetAttribute"))
        return false;
    if (c->smem_bytes > max_smem) {
        fprintf(stderr, "conv2d expert: %d bytes of shared memory needed, %d available\n",
                c->smem_bytes, max_smem);
        return false;
    }
    if (!cuda_ok(cudaMalloc(&c->wp, wtotal * 2), "cudaMalloc(wp)") ||
        !cuda_ok(cudaMalloc(&c->xp, xtotal * 2), "cudaMalloc(xp)") ||
        !cuda_ok(cudaMemsetAsync(c->xp, 0, xtotal * 2, stream), "cudaMemsetAsync") ||
        !cuda_ok(cudaFuncSetAttribute(g->planes ? (const void *)conv3x3_wg_kernel<false>
                                            : (const void *)conv3x3_nhwc_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, c->smem_bytes),
                 "cudaFuncSetAttribute") ||
        (g->planes && !cuda_ok(cudaFuncSetAttribute(conv3x3_wg_kernel<true>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                c->smem_bytes),
                           "cudaFuncSetAttribute")))
        return false;
    const size_t blocks = (wtotal + 255) / 256;
    prep_weights_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(
        w, c->wp, g->C, g->K, g->chunks, wtotal, g->planes);
    return cuda_ok(cudaGetLastError(), "prep_weights_kernel launch") &&
           cuda_ok(cudaStreamSynchronize(stream), "st_init sync");
}

/* Switches c to the wgmma path where it can run here: an sm_90 device, the kernel's body compiled
 * (an sm_90a build: ptxVersion 90 or more and its static barriers; a plain sm_90 or an sm_80
 * build JIT-compiled for an H100 has neither), the window one contiguous run (W + 2 < SEG), at
 * most WG_MAX_CHUNKS chunks of resident weights, and the shared memory for them and the ring.
 * Otherwise c keeps the mma.sync path. */
static void wg_choose(conv_ctx *c, long long N, long long C, long long H, long long W, long long K) {
    int dev = 0, major = 0, n_sms = 0, max_smem = 0;
    cudaFuncAttributes fa;
    geom g;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
            cudaSuccess ||
        cudaFuncGetAttributes(&fa, conv3x3_wg_kernel<true>) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    if (major != 9 || fa.ptxVersion < 90 || fa.sharedSizeBytes == 0 || n_sms < 1 ||
        make_geom(&g, N, C, H, W, K, 0) != 0 || g.Wp >= SEG || g.chunks > WG_MAX_CHUNKS)
        return;
    const long long smem = (long long)g.chunks * WG_CHUNK_BYTES + WG_STAGES * wg_stage_bytes(g) +
                           2 * WG_EP_BYTES;
    if (smem + (long long)fa.sharedSizeBytes > max_smem) return;
    g.planes = 1;
    c->g = g;
    c->smem_bytes = (int)smem;
    const int per_kb = n_sms / g.kblocks > 1 ? n_sms / g.kblocks : 1;
    c->wg_grid = g.tiles < per_kb ? g.tiles : per_kb;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    int64_t N, C, H, W, K;
    if (cfg == NULL || ctx == NULL || n_params != 1) return 1;
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "H", &H) ||
        cfg_get(cfg, "W", &W) || cfg_get(cfg, "K", &K)) {
        fprintf(stderr, "conv2d expert: config lacks one of N, C, H, W, K\n");
        return 1;
    }
    if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || !tensor_ok(&params[0], K, C, 3, 3)) {
        fprintf(stderr, "conv2d expert: bad sizes or weight tensor\n");
        return 1;
    }
    conv_ctx *c = (conv_ctx *)calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    if (make_geom(&c->g, N, C, H, W, K, 1) != 0) {
        fprintf(stderr, "conv2d expert: sizes too large\n");
        free(c);
        return 1;
    }
    c->smem_bytes = stage_smem(c->g.xrows);
    if (c->smem_bytes < ep_slot(THREADS / 32, 0, 0) * 2) /* the staged epilogue; never at CK 16 */
        c->smem_bytes = ep_slot(THREADS / 32, 0, 0) * 2;
    wg_choose(c, N, C, H, W, K);
    if (!init_device(c, (const __nv_bfloat16 *)params[0].data, stream)) {
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
        fprintf(stderr, "conv2d expert: tensor shapes differ from the config\n");
        return 1;
    }
    __nv_bfloat16 *y = (__nv_bfloat16 *)out[0].data;
    /* pairs of positions share an image row (padded tiles, W even) or an image (real, HW even) */
    const int pair_store = (g.real ? g.HW % 2 == 0 : g.W % 2 == 0) && ((uintptr_t)y & 3) == 0;
    const dim3 pre_grid((unsigned)(g.N * g.Hp), (unsigned)((g.Wp + PRE_COLS - 1) / PRE_COLS));
    const bool vec = g.W % 8 == 0 && ((uintptr_t)in[0].data & 15) == 0;
    if (g.planes && vec) { /* no pre-pass: the kernel reads x */
        conv3x3_wg_kernel<true><<<dim3((unsigned)c->wg_grid, (unsigned)g.kblocks), WG_THREADS,
                                  c->smem_bytes, stream>>>((const uint16_t *)in[0].data,
                                                           (const uint16_t *)c->wp, y, g,
                                                           pair_store);
        return cuda_ok(cudaGetLastError(), "conv3x3_wg_kernel<true> launch") ? 0 : 1;
    }
    if (vec)
        to_padded_nhwc_kernel<true><<<pre_grid, PRE_THREADS, 0, stream>>>((const uint16_t *)in[0].data,
                                                                c->xp, g);
    else
        to_padded_nhwc_kernel<false><<<pre_grid, PRE_THREADS, 0, stream>>>((const uint16_t *)in[0].data,
                                                                c->xp, g);
    if (!cuda_ok(cudaGetLastError(), "to_padded_nhwc_kernel launch")) return 1;
    if (g.planes) {
        conv3x3_wg_kernel<false><<<dim3((unsigned)c->wg_grid, (unsigned)g.kblocks), WG_THREADS,
                                   c->smem_bytes, stream>>>(c->xp, (const uint16_t *)c->wp, y, g,
                                                            pair_store);
        return cuda_ok(cudaGetLastError(), "conv3x3_wg_kernel<false> launch") ? 0 : 1;
    }
    const dim3 grid((unsigned)g.tiles, (unsigned)g.kblocks);
    conv3x3_nhwc_kernel<<<grid, THREADS, c->smem_bytes, stream>>>(
        c->xp, (const uint16_t *)c->wp, y, g, pair_store);
    return cuda_ok(cudaGetLastError(), "conv3x3_nhwc_kernel launch") ? 0 : 1;
}
#endif /* __CUDACC__ */
