/* Reference for t1/batched_gemm: C[b] = A[b]·B[b] for b < batch, with A [batch, M, K],
 * B [batch, K, N], C [batch, M, N], bf16, contiguous and row-major, float accumulation. The
 * textbook shared-memory tiled kernel of t1/gemm_bf16 with the batch on the grid's z axis: a 32x32
 * block stages 32x32 tiles of A[b] and B[b] (widened to float) and each thread sums one element
 * of C[b] in k order. Bounds-checked for any sizes. Plain and obviously correct; no tensor cores. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TILE 32
#define MAX_GRID_Z 65535

typedef struct bgemm_ctx {
    int batch, M, N, K;
} bgemm_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

__global__ void bgemm_tiled_kernel(const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                                   __nv_bfloat16 *C, int batch, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    /* the grid's z axis is capped, so a block may serve several matrices of the batch */
    for (int b = blockIdx.z; b < batch; b += gridDim.z) {
        const __nv_bfloat16 *Ab = A + (size_t)b * M * K;
        const __nv_bfloat16 *Bb = B + (size_t)b * K * N;
        float acc = 0.0f;
        for (int k0 = 0; k0 < K; k0 += TILE) {
            /* zeros outside the matrices add nothing to the sum */
            As[ty][tx] = row < M && k0 + tx < K ? __bfloat162float(Ab[(size_t)row * K + k0 + tx])
                                                : 0.0f;
            Bs[ty][tx] = k0 + ty < K && col < N ? __bfloat162float(Bb[(size_t)(k0 + ty) * N + col])
                                                : 0.0f;
            __syncthreads();
            for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
        if (row < M && col < N)
            C[(size_t)b * M * N + (size_t)row * N + col] = __float2bfloat16(acc);
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

static bool tensor_ok(const st_tensor *t, int batch, int rows, int cols) {
    return t->dtype == ST_BF16 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == rows &&
           t->shape[2] == cols && t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t batch, M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) ||
        cfg_get(cfg, "K", &K))
        return 1;
    if (batch < 1 || M < 1 || N < 1 || K < 1 || batch > INT32_MAX || M > INT32_MAX ||
        N > INT32_MAX || K > INT32_MAX)
        return 1;
    if ((M + TILE - 1) / TILE > 65535) return 1;  /* the grid's y dimension covers M */

    bgemm_ctx *c = (bgemm_ctx *)malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->batch = (int)batch;
    c->M = (int)M;
    c->N = (int)N;
    c->K = (int)K;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const bgemm_ctx *c = (const bgemm_ctx *)ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->batch, c->M, c->K) || !tensor_ok(&in[1], c->batch, c->K, c->N) ||
        !tensor_ok(&out[0], c->batch, c->M, c->N))
        return 1;

    dim3 grid((c->N + TILE - 1) / TILE, (c->M + TILE - 1) / TILE,
              c->batch < MAX_GRID_Z ? c->batch : MAX_GRID_Z);
    dim3 block(TILE, TILE);
    bgemm_tiled_kernel<<<grid, block, 0, stream>>>((const __nv_bfloat16 *)in[0].data,
                                                   (const __nv_bfloat16 *)in[1].data,
                                                   (__nv_bfloat16 *)out[0].data, c->batch, c->M,
                                                   c->N, c->K);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
