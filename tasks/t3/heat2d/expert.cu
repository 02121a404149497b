/* Expert for t3/heat2d: S Jacobi sweeps for the 2-D Poisson problem with temporal blocking. One
 * pass of the blocked kernel does up to K = 8 sweeps: each block loads a 128 x 64 region of u and
 * b, sweeps it K times on chip and writes back only the 112 x 48 core, whose values stay exact
 * because errors from the region's cut edges travel one cell per sweep. So the grid crosses DRAM
 * once per 8 sweeps instead of once per sweep, at the price of recomputing the 8-cell halos
 * (1.5x the arithmetic). Each thread owns a 16-cell piece of one column: its values stay in
 * registers and are updated in place, so vertical neighbours inside the piece come from registers
 * and only the row neighbours, b and the piece's two ends are read from shared memory (3 + 2/16
 * loads and one store per update). ceil(S / 8) passes ping-pong between a scratch grid and the
 * output. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define K 8                     /* sweeps per pass: halo width */
#define BW 128                  /* region width = threads per block row */
#define BH 4                    /* thread rows per block */
#define R 16                    /* grid rows per thread */
#define H (BH * R)              /* region height */
#define OX (BW - 2 * K)         /* core written back: 112 x 48 */
#define OY (H - 2 * K)
#define SMEM_BYTES (2 * H * BW * sizeof(float))

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

/* `sweeps` (1..K) Jacobi sweeps from src into dst, one block per 112 x 48 core (a flat grid, so
 * no dimension limit). Cells outside the grid are zero and, like the boundary, never updated; the
 * region's outer ring sees zeros beyond it, which corrupts at most `sweeps` cells inward, all
 * outside the core. Shared memory holds u and b of the region ([H][BW] each, 64 KiB): b lives
 * there rather than in registers, which would spill at two blocks per SM. */
__global__ void __launch_bounds__(BW * BH, 2)
blocked_kernel(const float *__restrict__ src, const float *__restrict__ b, float *__restrict__ dst,
               int ny, int nx, int tiles_x, int sweeps) {
    extern __shared__ float smem[];
    float(*su)[BW] = (float(*)[BW])smem;
    float(*sb)[BW] = (float(*)[BW])(smem + H * BW);
    const int c = threadIdx.x, row0 = threadIdx.y * R;
    const int gx = (int)(blockIdx.x % tiles_x) * OX - K + c;
    const int gy0 = (int)(blockIdx.x / tiles_x) * OY - K + row0;
    const bool col_in = gx >= 0 && gx < nx;
    /* rows [lo, hi) of the piece are interior grid points; the rest stay fixed */
    int lo = max(0, 1 - gy0), hi = min(R, ny - 1 - gy0);
    if (gx < 1 || gx >= nx - 1 || hi < lo) lo = hi = 0;
    const bool full = lo == 0 && hi == R;

    float v[R];
    long long k = (long long)gy0 * nx + gx; /* one running offset rather than R live addresses */
#pragma unroll
    for (int r = 0; r < R; r++, k += nx) {
        const bool in = col_in && gy0 + r >= 0 && gy0 + r < ny;
        v[r] = in ? __ldg(src + k) : 0.0f;
        su[row0 + r][c] = v[r];
        sb[row0 + r][c] = in ? __ldg(b + k) : 0.0f;
    }
    __syncthreads();
    for (int sweep = 0; sweep < sweeps; sweep++) {
        /* in place, top down: v[r + 1] is still old when row r reads it, and `prev` carries the
         * old v[r - 1] */
        float prev = row0 > 0 ? su[row0 - 1][c] : 0.0f;
        const float below = row0 + R < H ? su[row0 + R][c] : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float left = c > 0 ? su[row0 + r][c - 1] : 0.0f;
            const float right = c < BW - 1 ? su[row0 + r][c + 1] : 0.0f;
            const float down = r < R - 1 ? v[r + 1] : below;
            const float x = 0.25f * (prev + down + left + right + sb[row0 + r][c]);
            prev = v[r];
            v[r] = x;
        }
        /* Pieces that touch the boundary or leave the grid (a thin rim of blocks) put their fixed
         * cells back; shared memory still holds the old values until the barrier below. A
         * per-row test inside the loop above would cost registers (and spill) everywhere. */
        if (!full) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < lo || r >= hi) v[r] = su[row0 + r][c];
        }
        __syncthreads(); /* every read of this sweep is done */
#pragma unroll
        for (int r = 0; r < R; r++) su[row0 + r][c] = v[r];
        __syncthreads();
    }
    /* the core: rows [K, H - K) of the region, inside the grid */
    const int out_lo = max(0, K - row0), out_hi = min(min(R, H - K - row0), ny - gy0);
    if (col_in && c >= K && c < BW - K) {
        k = (long long)gy0 * nx + gx;
#pragma unroll
        for (int r = 0; r < R; r++, k += nx)
            if (r >= out_lo && r < out_hi) dst[k] = v[r];
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
    if (cudaMalloc(&ctx->tmp, sizeof(float) * (size_t)ny * (size_t)nx) != cudaSuccess ||
        cudaFuncSetAttribute(blocked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES) !=
            cudaSuccess) {
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
    const dim3 block(BW, BH);
    const int passes = (c->sweeps + K - 1) / K;
    /* pass p writes u when passes - 1 - p is even, so the last one lands in the output */
    const float *src = u0;
    for (int p = 0; p < passes; p++) {
        float *dst = (passes - 1 - p) % 2 == 0 ? u : c->tmp;
        const int n = c->sweeps - p * K < K ? c->sweeps - p * K : K;
        blocked_kernel<<<(unsigned)tiles, block, SMEM_BYTES, stream>>>(src, b, dst, c->ny, c->nx, (int)tiles_x, n);
        CUDA_CHECK(cudaGetLastError());
        src = dst;
    }
    return 0;
}
