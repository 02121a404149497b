/* Host reference for t1/gemm_tf32: C = A·B with A [M, K], B [K, N], C [M, N], all float32 and
 * row-major, accumulated in float in k order with no TF32 rounding, like the GPU reference. The
 * obviously-correct triple loop, meant for the small and hidden sizes: at eval size it is
 * ~1.4e11 multiply-adds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct gemm_ctx {
    int64_t M, N, K;
} gemm_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t rows, int64_t cols) {
    return t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) || cfg_get(cfg, "K", &K)) return 1;
    if (M < 1 || N < 1 || K < 1) return 1;
    gemm_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->M = M;
    c->N = N;
    c->K = K;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const gemm_ctx *c = ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    const int64_t M = c->M, N = c->N, K = c->K;
    if (!tensor_ok(&in[0], M, K) || !tensor_ok(&in[1], K, N) || !tensor_ok(&out[0], M, N))
        return 1;
    const float *A = in[0].data, *B = in[1].data;
    float *C = out[0].data;

    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
