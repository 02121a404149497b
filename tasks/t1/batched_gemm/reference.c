/* Host reference for t1/batched_gemm: C[b] = A[b]·B[b] with A [batch, M, K], B [batch, K, N],
 * C [batch, M, N], all bf16 and row-major, accumulated in float in k order. The bf16 conversions
 * are written out here (round to nearest even) so the host backend needs no CUDA headers. The
 * obviously-correct loop nest, meant for the small and hidden sizes (eval is ~1.7e10
 * multiply-adds). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct bgemm_ctx {
    int64_t batch, M, N, K;
} bgemm_ctx;

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    /* round to nearest, ties to even: add just under half an ulp, plus the kept lsb */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t batch, int64_t rows, int64_t cols) {
    return t->dtype == ST_BF16 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == rows &&
           t->shape[2] == cols && t->data != NULL;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t batch, M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) ||
        cfg_get(cfg, "K", &K))
        return 1;
    if (batch < 1 || M < 1 || N < 1 || K < 1) return 1;
    bgemm_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->batch = batch;
    c->M = M;
    c->N = N;
    c->K = K;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const bgemm_ctx *c = ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    const int64_t batch = c->batch, M = c->M, N = c->N, K = c->K;
    if (!tensor_ok(&in[0], batch, M, K) || !tensor_ok(&in[1], batch, K, N) ||
        !tensor_ok(&out[0], batch, M, N))
        return 1;

    for (int64_t b = 0; b < batch; b++) {
        const uint16_t *A = (const uint16_t *)in[0].data + b * M * K;
        const uint16_t *B = (const uint16_t *)in[1].data + b * K * N;
        uint16_t *C = (uint16_t *)out[0].data + b * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += bf16_to_float(A[i * K + k]) * bf16_to_float(B[k * N + j]);
                C[i * N + j] = float_to_bf16(acc);
            }
        }
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
