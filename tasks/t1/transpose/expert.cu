/* Expert for t1/transpose: out[c, r] = in[r, c] for an f32 matrix [rows, cols], out of place.
 * A transpose moves no more data than a copy, so the goal is copy bandwidth: every byte read and
 * written once, in full 128-byte lines. Each block of 256 threads moves one 64 x 64 tile through
 * shared memory: it reads rows of the tile and writes rows of the transposed tile, so both global
 * sides are coalesced. Where a side is 16-byte aligned (pointer aligned and its row length a
 * multiple of 4) that side moves float4s, otherwise floats; the four combinations are four
 * instances of one kernel. The shared tile is padded to 65 columns, and the thread-to-element
 * maps below are chosen so that no access to it, scalar or gathered into a float4, has a bank
 * conflict. Tiles on the ragged right and bottom edges are bounds-checked element by element. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TILE 64
#define THREADS 256                 /* 8 warps */
#define WARPS (THREADS / 32)

typedef struct transpose_ctx {
    int64_t rows, cols;
    int64_t tiles_x;                /* tiles across cols */
    int64_t tiles;
} transpose_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

/* Tile (ty, tx) covers in[r0 .. r0+63][c0 .. c0+63]; the grid is flat so that neither dimension
 * is limited to 65535 tiles. Vector maps: a warp moves 4 rows x 32 floats (four full 128-byte
 * lines), lane l takes row l/8 and float4 l%8; scalar maps: a warp moves 1 row x 32 floats.
 * With a 65-float row pitch, element (r, c) of the tile sits in bank (r + c) % 32, and each map
 * gives the 32 lanes distinct values of r + c. */
/* 8 resident blocks (2048 threads, 130 KiB of tiles) keep ~128 KiB of loads in flight per SM;
 * that caps the float4-read instances at 32 registers. The scalar-read ones hold 16 loads per
 * thread and get 40 (6 blocks) rather than spill. */
template <bool VEC_IN, bool VEC_OUT>
__global__ void __launch_bounds__(THREADS, VEC_IN ? 8 : 6)
transpose_tile_kernel(const float *__restrict__ in, float *__restrict__ out, int64_t rows,
                      int64_t cols, int64_t tiles_x) {
    __shared__ float tile[TILE][TILE + 1];
    const int64_t r0 = (int64_t)(blockIdx.x / tiles_x) * TILE;
    const int64_t c0 = (int64_t)(blockIdx.x % tiles_x) * TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    /* read: issue every load of the thread before the first shared store so they overlap */
    if (VEC_IN) {
        float4 v[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = warp + WARPS * i;                      /* 0..31 */
            const int r = 4 * (u >> 1) + (lane >> 3);
            const int c = 32 * (u & 1) + 4 * (lane & 7);
            /* cols % 4 == 0 here, so a float4 is either wholly inside or wholly outside */
            if (r0 + r < rows && c0 + c < cols)
                v[i] = *(const float4 *)(in + (r0 + r) * cols + c0 + c);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = warp + WARPS * i;
            const int r = 4 * (u >> 1) + (lane >> 3);
            const int c = 32 * (u & 1) + 4 * (lane & 7);
            if (r0 + r < rows && c0 + c < cols) {
                tile[r][c] = v[i].x;
                tile[r][c + 1] = v[i].y;
                tile[r][c + 2] = v[i].z;
                tile[r][c + 3] = v[i].w;
            }
        }
    } else {
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int u = warp + WARPS * i;                      /* 0..127 */
            const int r = u >> 1, c = 32 * (u & 1) + lane;
            if (r0 + r < rows && c0 + c < cols) v[i] = in[(r0 + r) * cols + c0 + c];
        }
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int u = warp + WARPS * i;
            const int r = u >> 1, c = 32 * (u & 1) + lane;
            if (r0 + r < rows && c0 + c < cols) tile[r][c] = v[i];
        }
    }
    __syncthreads();

    /* write: out row c0 + j (a column j of the tile), out columns r0 + k (tile rows k) */
    if (VEC_OUT) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = warp + WARPS * i;
            const int j = 4 * (u >> 1) + (lane >> 3);
            const int k = 32 * (u & 1) + 4 * (lane & 7);
            if (c0 + j < cols && r0 + k < rows) {                /* rows % 4 == 0 here */
                const float4 v = make_float4(tile[k][j], tile[k + 1][j], tile[k + 2][j],
                                             tile[k + 3][j]);
                *(float4 *)(out + (c0 + j) * rows + r0 + k) = v;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int u = warp + WARPS * i;
            const int j = u >> 1, k = 32 * (u & 1) + lane;
            if (c0 + j < cols && r0 + k < rows) out[(c0 + j) * rows + r0 + k] = tile[k][j];
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

static bool tensor_ok(const st_tensor *t, int64_t rows, int64_t cols) {
    return t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL && ((uintptr_t)t->data & 3) == 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1) return 1;
    const int64_t tiles_x = (cols + TILE - 1) / TILE, tiles_y = (rows + TILE - 1) / TILE;
    if (tiles_x > INT32_MAX / tiles_y) return 1;  /* one block per tile on a flat grid */

    transpose_ctx *c = (transpose_ctx *)malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    c->tiles_x = tiles_x;
    c->tiles = tiles_x * tiles_y;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const transpose_ctx *c = (const transpose_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->rows, c->cols) || !tensor_ok(&out[0], c->cols, c->rows)) return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;

    /* pointers may move between calls, so the vector paths are chosen per call */
    const bool vin = ((uintptr_t)x & 15) == 0 && c->cols % 4 == 0;
    const bool vout = ((uintptr_t)y & 15) == 0 && c->rows % 4 == 0;
    const unsigned grid = (unsigned)c->tiles;
    const int64_t rows = c->rows, cols = c->cols, tx = c->tiles_x;
    if (vin && vout)
        transpose_tile_kernel<true, true><<<grid, THREADS, 0, stream>>>(x, y, rows, cols, tx);
    else if (vin)
        transpose_tile_kernel<true, false><<<grid, THREADS, 0, stream>>>(x, y, rows, cols, tx);
    else if (vout)
        transpose_tile_kernel<false, true><<<grid, THREADS, 0, stream>>>(x, y, rows, cols, tx);
    else
        transpose_tile_kernel<false, false><<<grid, THREADS, 0, stream>>>(x, y, rows, cols, tx);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
