/* Reference for t4/gemm_fp8: C = A·B^T with A f8e4m3 [M, K], B f8e4m3 [N, K] (both row-major,
 * K contiguous), C bf16 [M, N] row-major, float accumulation. A textbook shared-memory tiled
 * kernel: a 16x16 block computes a 128x128 tile of C, eight by eight elements a thread, staging
 * 128x16 slices of A and B as float; every C element is summed in k order. The fp8 bytes are
 * decoded by the CUDA fp8 type (exact: every e4m3 value is a float). Zero padding makes it
 * correct for any M, N, K. No tensor cores; the 8x8 register tile only keeps the eval size
 * within a few tens of milliseconds. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TILE 128  /* C tile edge */
#define BK 16     /* k slice staged per step */
#define SUB 8     /* C elements a thread owns along each edge: TILE = 16 * SUB */

typedef struct gemm_ctx {
    int M, N, K;
} gemm_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

__device__ __forceinline__ float fp8_to_float(uint8_t byte) {
    __nv_fp8_e4m3 v;
    v.__x = byte;
    return (float)v;
}

/* Thread (tx, ty) owns C rows ty + 16*i and columns tx + 16*j of the tile, so a warp's smem
 * reads are broadcasts or consecutive words and its stores to C are coalesced. */
__global__ void gemm_fp8_tiled_kernel(const uint8_t *A, const uint8_t *B, __nv_bfloat16 *C,
                                      int M, int N, int K) {
    /* [k][row]; the +1 keeps the 16 k values that a half-warp writes in 16 banks */
    __shared__ float As[BK][TILE + 1];
    __shared__ float Bs[BK][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

    float acc[SUB][SUB];
#pragma unroll
    for (int i = 0; i < SUB; i++)
        for (int j = 0; j < SUB; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        /* 128 rows x 16 k of A and of B: 2048 elements each, eight per thread */
#pragma unroll
        for (int r = 0; r < TILE * BK / 256; r++) {
            const int e = tid + 256 * r, i = e / BK, kk = e % BK;
            const int a_row = row0 + i, b_row = col0 + i, k = k0 + kk;
            /* zeros outside the matrices add nothing to the sums */
            As[kk][i] = a_row < M && k < K ? fp8_to_float(A[(size_t)a_row * K + k]) : 0.0f;
            Bs[kk][i] = b_row < N && k < K ? fp8_to_float(B[(size_t)b_row * K + k]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float a[SUB], b[SUB];
#pragma unroll
            for (int i = 0; i < SUB; i++) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < SUB; j++) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < SUB; i++)
#pragma unroll
                for (int j = 0; j < SUB; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < SUB; i++) {
        const int row = row0 + ty + 16 * i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < SUB; j++) {
            const int col = col0 + tx + 16 * j;
            if (col < N) C[(size_t)row * N + col] = __float2bfloat16(acc[i][j]);
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

static bool tensor_ok(const st_tensor *t, st_dtype dtype, int rows, int cols) {
    return t->dtype == dtype && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) || cfg_get(cfg, "K", &K)) return 1;
    if (M < 1 || N < 1 || K < 1 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return 1;
    if ((M + TILE - 1) / TILE > 65535) return 1;  /* the grid's y dimension covers M */

    gemm_ctx *c = (gemm_ctx *)malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->M = (int)M;
    c->N = (int)N;
    c->K = (int)K;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const gemm_ctx *c = (const gemm_ctx *)ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], ST_F8E4M3, c->M, c->K) || !tensor_ok(&in[1], ST_F8E4M3, c->N, c->K) ||
        !tensor_ok(&out[0], ST_BF16, c->M, c->N))
        return 1;

    dim3 grid((c->N + TILE - 1) / TILE, (c->M + TILE - 1) / TILE);
    dim3 block(16, 16);
    gemm_fp8_tiled_kernel<<<grid, block, 0, stream>>>((const uint8_t *)in[0].data,
                                                      (const uint8_t *)in[1].data,
                                                      (__nv_bfloat16 *)out[0].data, c->M, c->N,
                                                      c->K);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
