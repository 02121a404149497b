/* Expert for t3/heat2d: S Jacobi sweeps for the 2-D Poisson problem with temporal blocking. One
 * pass of the blocked kernel does up to K = 12 sweeps: each block loads a 128 x 96 region of u and
 * b, sweeps it K times on chip and writes back only the 104 x 72 core, whose values stay exact
 * because errors from the region's cut edges travel one cell per sweep. So the grid crosses DRAM
 * once per 12 sweeps instead of once per sweep, at the price of recomputing the 12-cell halos
 * (1.64x the arithmetic). A warp owns a band of 8 rows of the region and each lane 4 adjacent
 * columns of it, all in registers: a lane's row neighbours come from its own registers or, at its
 * two outer columns, from the next lanes by shuffle, so the hot loop reads only b from shared
 * memory (one 16-byte load per 4 updates); the bands trade their end rows through shared memory
 * once a sweep. ceil(S / K) passes ping-pong between a scratch grid and the output. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define K 12                    /* sweeps per pass: halo width (a multiple of CW) */
#define CW 4                    /* columns per lane */
#define BW (32 * CW)            /* region width: one warp's row */
#define NW 12                   /* warps per block, one band each */
#define R 8                     /* rows per band */
#define H (NW * R)              /* region height */
#define OX (BW - 2 * K)         /* core written back: 104 x 72 */
#define OY (H - 2 * K)
#define XCH_FLOATS (2 * NW * 2 * BW) /* [sweep parity][band][first, last row][BW] */
#define SMEM_BYTES ((H * BW + XCH_FLOATS) * sizeof(float))

static_assert(K % CW == 0, "the core must start at a lane boundary");

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "heat2d expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int ny, nx, sweeps;
    float *tmp; /* [ny, nx] */
} heat_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "heat2d expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const heat_ctx *c) {
    int ok = t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == c->ny && t->shape[1] == c->nx && t->data;
    if (!ok) fprintf(stderr, "heat2d expert: %s: expected f32 [%d, %d]\n", t->name, c->ny, c->nx);
    return !ok;
}

/* A lane's 4 x R piece of the region: registers v[r][j] hold row r, column j of its columns. */
typedef float piece[R][CW];

/* Loads the lane's piece of u (cells outside the grid are zero) and its b into shared memory.
 * vec: nx % 4 == 0 and the grids 16-byte aligned, so a lane's 4 columns are one aligned float4
 * that lies wholly inside or wholly outside the grid. */
__device__ __forceinline__ void piece_load(piece &v, float (*sb)[BW], const float *__restrict__ src,
                                           const float *__restrict__ b, int ny, int nx, int gy0, int gx,
                                           int row0, int col0, bool vec) {
    long long k = (long long)gy0 * nx + gx;
#pragma unroll
    for (int r = 0; r < R; r++, k += nx) {
        const bool row_in = gy0 + r >= 0 && gy0 + r < ny;
        float4 u4 = make_float4(0.f, 0.f, 0.f, 0.f), b4 = u4;
        if (vec) {
            if (row_in && gx >= 0 && gx < nx) {
                u4 = __ldg((const float4 *)(src + k));
                b4 = __ldg((const float4 *)(b + k));
            }
        } else if (row_in) {
            float *uu = &u4.x, *bb = &b4.x;
#pragma unroll
            for (int j = 0; j < CW; j++)
                if (gx + j >= 0 && gx + j < nx) {
                    uu[j] = __ldg(src + k + j);
                    bb[j] = __ldg(b + k + j);
                }
        }
        v[r][0] = u4.x; v[r][1] = u4.y; v[r][2] = u4.z; v[r][3] = u4.w;
        *(float4 *)&sb[row0 + r][col0] = b4;
    }
}

/* One sweep of the lane's piece, in place and top down: v[r + 1] is still old when row r reads
 * it and `up` carries the old row above. up0/down0 are the rows just outside the band (old values,
 * zero at the region's edge). EDGE:
 * the piece holds fixed cells (boundary, or outside the grid), which keep their values: rows
 * [lo, hi) and the columns in `cols` (bit j: column j) are the updated ones. */
template <bool EDGE>
__device__ __forceinline__ void piece_sweep(piece &v, const float (*sb)[BW], const float *up0,
                                            const float *down0, int row0, int col0, int lo, int hi,
                                            unsigned cols) {
    float up[CW];
#pragma unroll
    for (int j = 0; j < CW; j++) up[j] = up0[j];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float4 b4 = *(const float4 *)&sb[row0 + r][col0];
        const float bb[CW] = {b4.x, b4.y, b4.z, b4.w};
        /* lanes 0 and 31 get their own value back: any finite value beyond the region's edge
         * does, as the core is K cells away from it */
        const float left = __shfl_up_sync(0xffffffffu, v[r][CW - 1], 1);
        const float right = __shfl_down_sync(0xffffffffu, v[r][0], 1);
        float x[CW];
#pragma unroll
        for (int j = 0; j < CW; j++) {
            const float l = j > 0 ? v[r][j - 1] : left;
            const float rt = j < CW - 1 ? v[r][j + 1] : right;
            const float d = r < R - 1 ? v[r + 1][j] : down0[j];
            x[j] = 0.25f * (up[j] + d + l + rt + bb[j]);
        }
#pragma unroll
        for (int j = 0; j < CW; j++) {
            up[j] = v[r][j];
            v[r][j] = !EDGE || (r >= lo && r < hi && (cols >> j & 1u)) ? x[j] : v[r][j];
        }
    }
}

/* `sweeps` (1..K) Jacobi sweeps of the lane's piece; the bands trade their first and last rows
 * through xch, double-buffered by sweep parity so that one barrier a sweep suffices (a band
 * writes parity p's rows only after every band passed the barrier that ends the reads of p's
 * previous use). */
template <bool EDGE>
__device__ __forceinline__ void piece_sweeps(piece &v, const float (*sb)[BW], float *xch, int sweeps,
                                             int w, int lane, int lo, int hi, unsigned cols) {
    const int row0 = w * R, col0 = lane * CW;
    for (int s = 0; s < sweeps; s++) {
        float(*x)[NW][2][BW] = (float(*)[NW][2][BW])xch;
        const int p = s & 1;
        *(float4 *)&x[p][w][0][col0] = make_float4(v[0][0], v[0][1], v[0][2], v[0][3]);
        *(float4 *)&x[p][w][1][col0] = make_float4(v[R - 1][0], v[R - 1][1], v[R - 1][2], v[R - 1][3]);
        __syncthreads();
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f), d = a;
        if (w > 0) a = *(const float4 *)&x[p][w - 1][1][col0];
        if (w < NW - 1) d = *(const float4 *)&x[p][w + 1][0][col0];
        const float up0[CW] = {a.x, a.y, a.z, a.w}, down0[CW] = {d.x, d.y, d.z, d.w};
        piece_sweep<EDGE>(v, sb, up0, down0, row0, col0, lo, hi, cols);
    }
}

/* `sweeps` (1..K) Jacobi sweeps from src into dst, one block per OX x OY core (a flat grid, so
 * no dimension limit). Cells outside the grid are zero and, like the boundary, never updated; the
 * region's outer ring sees zeros beyond it, which corrupts at most `sweeps` cells inward, all
 * outside the core. Blocks whose region holds no fixed cell (all but a thin rim) run the sweep
 * without the per-cell keep test. */
__global__ void __launch_bounds__(32 * NW, 2)
blocked_kernel(const float *__restrict__ src, const float *__restrict__ b, float *__restrict__ dst,
               int ny, int nx, int tiles_x, int sweeps, int vec) {
    extern __shared__ float smem[];
    float(*sb)[BW] = (float(*)[BW])smem;
    float *xch = smem + H * BW;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, row0 = w * R, col0 = lane * CW;
    const int rx = (int)(blockIdx.x % tiles_x) * OX - K, ry = (int)(blockIdx.x / tiles_x) * OY - K;
    const int gx = rx + col0, gy0 = ry + row0;

    piece v;
    piece_load(v, sb, src, b, ny, nx, gy0, gx, row0, col0, vec != 0);
    const bool edge_block = rx < 1 || ry < 1 || rx + BW > nx - 1 || ry + H > ny - 1;
    if (!edge_block) {
        piece_sweeps<false>(v, sb, xch, sweeps, w, lane, 0, R, 0xfu);
    } else {
        /* rows [lo, hi) and the columns in `cols` of the piece are interior grid points */
        int lo = max(0, 1 - gy0), hi = min(R, ny - 1 - gy0);
        unsigned cols = 0;
        for (int j = 0; j < CW; j++)
            if (gx + j >= 1 && gx + j < nx - 1) cols |= 1u << j;
        if (hi < lo) lo = hi = 0;
        piece_sweeps<true>(v, sb, xch, sweeps, w, lane, lo, hi, cols);
    }
    /* the core: rows [K, H - K) and columns [K, BW - K) of the region, inside the grid */
    if (col0 < K || col0 >= BW - K || gx >= nx) return;
    const int out_lo = max(0, K - row0), out_hi = min(min(R, H - K - row0), ny - gy0);
    long long k = (long long)gy0 * nx + gx;
#pragma unroll
    for (int r = 0; r < R; r++, k += nx) {
        if (r < out_lo || r >= out_hi) continue;
        if (vec) {
            *(float4 *)(dst + k) = make_float4(v[r][0], v[r][1], v[r][2], v[r][3]);
        } else {
#pragma unroll
            for (int j = 0; j < CW; j++)
                if (gx + j < nx) dst[k + j] = v[r][j];
        }
    }
}

extern "C" void st_free(void *p) {
    heat_ctx *ctx = (heat_ctx *)p;
    if (!ctx) return;
    cudaFree(ctx->tmp);
    free(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t ny, nx, sweeps;
    if (cfg_get(cfg, "ny", &ny) || cfg_get(cfg, "nx", &nx) || cfg_get(cfg, "S", &sweeps)) return 1;
    if (n_params != 0 || ny < 1 || nx < 1 || ny > INT32_MAX / 2 || nx > INT32_MAX / 2 || sweeps < 0 ||
        sweeps > INT32_MAX) {
        fprintf(stderr, "heat2d expert: bad sizes (ny=%lld nx=%lld S=%lld)\n", (long long)ny,
                (long long)nx, (long long)sweeps);
        return 1;
    }
    heat_ctx *ctx = (heat_ctx *)calloc(1, sizeof(heat_ctx));
    if (!ctx) return 1;
    ctx->ny = (int)ny;
    ctx->nx = (int)nx;
    ctx->sweeps = (int)sweeps;
    cudaError_t e = cudaMalloc(&ctx->tmp, sizeof(float) * (size_t)ny * (size_t)nx);
    const char *what = "cudaMalloc of the scratch grid";
    if (e == cudaSuccess) {
        e = cudaFuncSetAttribute(blocked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES);
        what = "cudaFuncSetAttribute (shared memory)";
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "heat2d expert: st_init: %s: %s\n", what, cudaGetErrorString(e));
        st_free(ctx);
        return 1;
    }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const heat_ctx *c = (const heat_ctx *)p;
    if (n_in != 2 || n_out != 1 || check(&in[0], c) || check(&in[1], c) || check(&out[0], c)) return 1;
    const float *u0 = (const float *)in[0].data, *b = (const float *)in[1].data;
    float *u = (float *)out[0].data;
    if (c->sweeps == 0) {
        CUDA_CHECK(cudaMemcpyAsync(u, u0, sizeof(float) * (size_t)c->ny * c->nx, cudaMemcpyDeviceToDevice, stream));
        return 0;
    }
    const long long tiles_x = (c->nx + OX - 1) / OX, tiles = tiles_x * ((c->ny + OY - 1) / OY);
    if (tiles > INT32_MAX) {
        fprintf(stderr, "heat2d expert: grid too large (%lld tiles)\n", tiles);
        return 1;
    }
    const dim3 block(32 * NW);
    /* vec: every lane's 4 columns one aligned float4 (see piece_load) */
    const int vec = c->nx % 4 == 0 && ((uintptr_t)u0 | (uintptr_t)b | (uintptr_t)u | (uintptr_t)c->tmp) % 16 == 0;
    const int passes = (c->sweeps + K - 1) / K;
    /* pass p writes u when passes - 1 - p is even, so the last one lands in the output */
    const float *src = u0;
    for (int p = 0; p < passes; p++) {
        float *dst = (passes - 1 - p) % 2 == 0 ? u : c->tmp;
        const int n = c->sweeps - p * K < K ? c->sweeps - p * K : K;
        blocked_kernel<<<(unsigned)tiles, block, SMEM_BYTES, stream>>>(src, b, dst, c->ny, c->nx, (int)tiles_x, n, vec);
        CUDA_CHECK(cudaGetLastError());
        src = dst;
    }
    return 0;
}
