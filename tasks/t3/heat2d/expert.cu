/* Expert for t3/heat2d: S Jacobi sweeps for the 2-D Poisson problem, streamed. One pass of the
 * kernel does up to K = 12 sweeps while each warp walks down its own strip of the grid one row a
 * step: the row it loads is sweep 0, and in the same step sweep m + 1 of the row m + 1 above it is
 * computed from sweep m's rows, so after a ramp of K rows every step writes one finished row (a
 * wavefront in time). Loads run three rows ahead by cp.async and overlap the sweeps, and the grid
 * crosses DRAM once per K sweeps. A warp's strip is 128 columns (4 a lane, in registers; the two
 * outer ones come from the next lanes by shuffle); errors from its cut edges travel one column a
 * sweep, so it writes only the middle 128 - 2K, and rows are split into segments that start K
 * rows early for the same reason. Warps never wait for each other: no barrier anywhere. ceil(S / K)
 * passes ping-pong between a scratch grid and the output. K = 12 with 12 warps an SM beat K = 16
 * with the 8 its registers allow (NOTES.md): the warps' latency, not the passes, binds. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utility>
#include "stitch/solution.h"

#define K 12                    /* sweeps per pass at most: each side's halo (a multiple of CW) */
#define WARPS_PER_SM 12         /* warps an SM the grid is sized for: fewer, longer segments */
#define CW 4                    /* columns per lane */
#define SW (32 * CW)            /* strip width: one warp's row */
#define CORE (SW - 2 * K)       /* columns a strip writes */
#define WPB 4                   /* warps per block */
#define PF 3                    /* rows loaded ahead of the one in use */
#define UR (PF + 1)             /* rows of u a warp keeps: the one in use and those in flight */

/* rows of b a warp keeps: the K a step reads, the one arriving and those in flight, rounded up to
 * a power of two so that a level's slot is a mask away */
__host__ __device__ static constexpr int pow2_above(int n) { return n < 1 ? 1 : 2 * pow2_above(n / 2); }
#define BR pow2_above(K + PF)
#define SMEM_BYTES (WPB * (BR + UR) * 32 * sizeof(float4))
#define MIN_BLOCKS 3            /* 12 warps an SM: 168 registers (166 for the eval path), no spills there */
#define FULL 0xffffffffu

static_assert(K % CW == 0, "the core must start at a lane boundary");
static_assert(BR > K + PF && (BR & (BR - 1)) == 0, "b ring too small");

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "heat2d expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int ny, nx, sweeps;
    int nstrips, rows, blocks; /* the strip kernel's grid (st_init: sizes and device only) */
    int small;                 /* every offset a kernel forms fits an int */
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

__device__ __forceinline__ void cp_async16(float4 *s, const float *g, int bytes) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(g), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async4(float *s, const float *g, int bytes) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(g), "r"(bytes) : "memory");
}

/* The lane's 4 columns of one row: where they start in the row and how many bytes each copy
 * reads (0: outside the grid, zero-filled; the address is then the row's first column, so it is
 * always a valid one). VEC: nx % 4 == 0 and the grids 16-byte aligned, so the 4 columns are one
 * aligned float4 wholly inside or outside the grid. */
template <bool VEC>
struct lane_cols {
    int col[VEC ? 1 : CW], bytes[VEC ? 1 : CW];
    __device__ lane_cols(int gx, int nx) {
#pragma unroll
        for (int j = 0; j < (VEC ? 1 : CW); j++) {
            const bool in = gx + j >= 0 && gx + j < nx;
            col[j] = in ? gx + j : 0;
            bytes[j] = in ? (VEC ? 16 : 4) : 0;
        }
    }
    /* starts the copy of the row at offset o of u and b into the ring slots us and bs */
    template <typename OFF>
    __device__ __forceinline__ void load(float4 *us, float4 *bs, const float *__restrict__ u,
                                         const float *__restrict__ b, OFF o) const {
#pragma unroll
        for (int j = 0; j < (VEC ? 1 : CW); j++) {
            if (VEC) {
                cp_async16(us, u + (o + col[j]), bytes[j]);
                cp_async16(bs, b + (o + col[j]), bytes[j]);
            } else {
                cp_async4((float *)us + j, u + (o + col[j]), bytes[j]);
                cp_async4((float *)bs + j, b + (o + col[j]), bytes[j]);
            }
        }
    }
};

/* One step of the wavefront, row t of u just arrived in D. For sweep m (0..KK-1), X[m] holds the
 * lane's columns of row t-m-1 after m sweeps and P[m] that row's partial sum for sweep m+1: the
 * row above it plus its left and right neighbours. D enters as row t-m after m sweeps, so sweep
 * m+1 of row t-m-1 needs only P[m] + D, then a quarter and b/4 (b prescaled, row r in slot r % BR
 * of the lane's ring bl). The row that leaves D after sweep KK is row t-KK, finished. SLOW: some
 * row of this step is fixed (the boundary, or outside the grid) or some column of the strip is
 * (keep: bit q for column q), and fixed cells keep their value. Rows t-m-1 < the first loaded row
 * compute garbage from zeroed registers and unwritten ring slots; it reaches row j after sweep m
 * only for j < first + m, never the output. */
template <int KK, bool SLOW>
__device__ __forceinline__ void strip_step(float (&X)[KK][CW], float (&P)[KK][CW], float (&D)[CW],
                                           const char *bl, int t, int ny, unsigned keep) {
    const unsigned tb = (unsigned)t * (32 * sizeof(float4));
#pragma unroll
    for (int m = 0; m < KK; m++) {
        const float4 bq = *(const float4 *)(bl + ((tb - (m + 1) * 32 * sizeof(float4)) &
                                                  ((BR - 1) * 32 * sizeof(float4))));
        float Y[CW] = {fmaf(0.25f, P[m][0] + D[0], bq.x), fmaf(0.25f, P[m][1] + D[1], bq.y),
                       fmaf(0.25f, P[m][2] + D[2], bq.z), fmaf(0.25f, P[m][3] + D[3], bq.w)};
        if (SLOW) {
            const int i = t - m - 1;
            const unsigned kp = i < 1 || i > ny - 2 ? 0xfu : keep;
#pragma unroll
            for (int q = 0; q < CW; q++)
                if (kp >> q & 1u) Y[q] = X[m][q];
        }
        /* lanes 0 and 31 get their own value back: any finite value beyond the strip's edge does,
         * as the core is K columns away from it */
        const float l = __shfl_up_sync(FULL, D[CW - 1], 1), r = __shfl_down_sync(FULL, D[0], 1);
        P[m][0] = (X[m][0] + l) + D[1];
        P[m][1] = (X[m][1] + D[0]) + D[2];
        P[m][2] = (X[m][2] + D[1]) + D[3];
        P[m][3] = (X[m][3] + D[2]) + r;
#pragma unroll
        for (int q = 0; q < CW; q++) {
            X[m][q] = D[q];
            D[q] = Y[q];
        }
    }
}

/* KK (1..K) sweeps from src into dst. Warp w takes strip w % nstrips (columns [s*CORE - K,
 * s*CORE + SW - K) computed, the middle CORE written) and rows [seg*rows, seg*rows + rows) of it,
 * seg = w / nstrips; it streams rows from KK before its first to KK after its last (fewer at the
 * grid's edges), so its rows see no cut. The u ring holds rows by their distance from the first
 * streamed row, the b ring by their index modulo BR. */
template <int KK, bool VEC, typename OFF>
__global__ void __launch_bounds__(32 * WPB, MIN_BLOCKS)
strip_kernel(const float *__restrict__ src, const float *__restrict__ b, float *__restrict__ dst,
             int ny, int nx, int nstrips, int rows) {
    extern __shared__ float4 smem4[];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const long long w = (long long)blockIdx.x * WPB + wib;
    const long long seg = w / nstrips;
    if (seg * rows >= ny) return;
    const int r0 = (int)(seg * rows), r1 = min(ny, r0 + rows);
    const int gx = (int)(w % nstrips) * CORE - K + CW * lane;
    float4 *bring = smem4 + wib * (BR + UR) * 32 + lane, *uring = bring + BR * 32;
    const int ts = max(r0 - KK, 0), te = min(r1 - 1 + KK, ny - 1), tl = r1 - 1 + KK;

    unsigned keep = 0;
#pragma unroll
    for (int q = 0; q < CW; q++)
        if (gx + q < 1 || gx + q > nx - 2) keep |= 1u << q;
    const bool rim = __any_sync(FULL, keep != 0);
    const lane_cols<VEC> lc(gx, nx);

    /* o: the offset of row t; OFF is int where ny * nx fits one */
    OFF o = (OFF)ts * nx;
#pragma unroll
    for (int p = 0; p < PF; p++) {
        if (ts + p <= te) lc.load(uring + 32 * p, bring + 32 * ((ts + p) & (BR - 1)), src, b, o + (OFF)p * nx);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    float X[KK][CW], P[KK][CW], D[CW] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int m = 0; m < KK; m++)
#pragma unroll
        for (int q = 0; q < CW; q++) X[m][q] = P[m][q] = 0.f;

    /* stores: this lane's columns are in the core and the grid; rows from r0 on */
    const bool store = CW * lane >= K && CW * lane < SW - K && gx < nx;

    const int tf0 = max(ts, KK + 1), tf1 = rim ? tf0 - 1 : min(tl, ny - 1), tst = r0 + KK;
    int us = 0; /* u's ring slot of row t */
    for (int t = ts; t <= tl; t++, o += nx) {
        const int un = us + PF < UR ? us + PF : us + PF - UR, bs = t & (BR - 1), bn = (t + PF) & (BR - 1);
        if (t + PF <= te) lc.load(uring + 32 * un, bring + 32 * bn, src, b, o + (OFF)PF * nx);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        asm volatile("cp.async.wait_group %0;\n" ::"n"(PF) : "memory");
        if (t <= te) { /* past the grid's last row D keeps any finite value: those rows are fixed */
            const float4 u4 = uring[32 * us], b4 = bring[32 * bs];
            bring[32 * bs] = make_float4(0.25f * b4.x, 0.25f * b4.y, 0.25f * b4.z, 0.25f * b4.w);
            D[0] = u4.x; D[1] = u4.y; D[2] = u4.z; D[3] = u4.w;
        }
        /* rows t-1 .. t-KK all interior, and no column of the strip fixed */
        if (t >= tf0 && t <= tf1)
            strip_step<KK, false>(X, P, D, (const char *)bring, t, ny, 0u);
        else
            strip_step<KK, true>(X, P, D, (const char *)bring, t, ny, keep);
        us = us + 1 < UR ? us + 1 : 0;
        if (!store || t < tst) continue;
        float *po = dst + (o - (OFF)KK * nx + gx);
        if (VEC) {
            *(float4 *)po = make_float4(D[0], D[1], D[2], D[3]);
        } else {
#pragma unroll
            for (int q = 0; q < CW; q++)
                if (gx + q < nx) po[q] = D[q];
        }
    }
}

typedef void (*strip_fn)(const float *, const float *, float *, int, int, int, int);

/* strip_kernel<1..K, VEC, OFF>: the scalar forms with 64-bit offsets, then the float4 forms with
 * 64-bit and with 32-bit offsets. A pass of k sweeps runs the one with k levels, so every level's
 * registers are fixed at compile time (a runtime count costs a copy of the state at each possible
 * exit); 32-bit offsets keep the grid's bases in the kernel's parameters, not in registers. */
template <int... I>
static const strip_fn *strip_table(std::integer_sequence<int, I...>) {
    static const strip_fn f[] = {strip_kernel<I + 1, false, long long>..., strip_kernel<I + 1, true, long long>...,
                                 strip_kernel<I + 1, true, int>...};
    return f;
}

static const strip_fn *strip_kernels(void) { return strip_table(std::make_integer_sequence<int, K>{}); }

extern "C" void st_free(void *p) {
    heat_ctx *ctx = (heat_ctx *)p;
    if (!ctx) return;
    cudaFree(ctx->tmp);
    free(ctx);
}

/* The strip kernel's grid: one wave of WARPS_PER_SM warps an SM (fewer if fewer fit), so that as
 * few rows are streamed twice as that parallelism allows. 1: more blocks than a launch takes. */
static int grid_geometry(heat_ctx *c, int sms, int blocks_per_sm) {
    const long long nstrips = (c->nx + CORE - 1) / CORE;
    const int per_sm = blocks_per_sm * WPB < WARPS_PER_SM ? blocks_per_sm * WPB : WARPS_PER_SM;
    long long nseg = (long long)sms * per_sm / nstrips;
    if (nseg < 1) nseg = 1;
    if (nseg > c->ny) nseg = c->ny;
    const int rows = (int)((c->ny + nseg - 1) / nseg);
    nseg = (c->ny + rows - 1) / rows;
    const long long blocks = (nstrips * nseg + WPB - 1) / WPB;
    if (blocks > INT32_MAX) return 1;
    c->nstrips = (int)nstrips;
    c->rows = rows;
    c->blocks = (int)blocks;
    /* every offset a kernel forms (row * nx + column, rows past the grid's end by K + PF included) */
    c->small = ((long long)c->ny + K + PF + 1) * c->nx + SW < INT32_MAX;
    return 0;
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
    int dev = 0, sms = 0, blocks_per_sm = 0;
    cudaError_t e = cudaMalloc(&ctx->tmp, sizeof(float) * (size_t)ny * (size_t)nx);
    const char *what = "cudaMalloc of the scratch grid";
    for (int k = 0; k < 3 * K && e == cudaSuccess; k++) {
        e = cudaFuncSetAttribute(strip_kernels()[k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES);
        what = "cudaFuncSetAttribute (shared memory)";
    }
    if (e == cudaSuccess) {
        e = cudaGetDevice(&dev);
        what = "cudaGetDevice";
    }
    if (e == cudaSuccess) {
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        what = "cudaDeviceGetAttribute (SM count)";
    }
    if (e == cudaSuccess) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, strip_kernels()[2 * K - 1], 32 * WPB,
                                                          SMEM_BYTES);
        what = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
    }
    if (e == cudaSuccess && blocks_per_sm < 1) {
        e = cudaErrorInvalidConfiguration;
        what = "occupancy (no block of the strip kernel fits an SM)";
    }
    if (e == cudaSuccess && grid_geometry(ctx, sms, blocks_per_sm)) {
        e = cudaErrorInvalidConfiguration;
        what = "grid of the strip kernel (more blocks than a launch takes)";
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
    /* vec: every lane's 4 columns one aligned float4 (see lane_cols) */
    const int vec = c->nx % 4 == 0 && ((uintptr_t)u0 | (uintptr_t)b | (uintptr_t)u | (uintptr_t)c->tmp) % 16 == 0;
    const int passes = (c->sweeps + K - 1) / K;
    /* pass p writes u when passes - 1 - p is even, so the last one lands in the output; the
     * sweeps are spread evenly over the passes */
    const float *src = u0;
    for (int p = 0; p < passes; p++) {
        float *dst = (passes - 1 - p) % 2 == 0 ? u : c->tmp;
        const int n = c->sweeps / passes + (p < c->sweeps % passes);
        strip_kernels()[n - 1 + (vec ? (c->small ? 2 * K : K) : 0)]<<<(unsigned)c->blocks, 32 * WPB, SMEM_BYTES,
                                                                         stream>>>(src, b, dst, c->ny, c->nx,
                                                                                   c->nstrips, c->rows);
        CUDA_CHECK(cudaGetLastError());
        src = dst;
    }
    return 0;
}
