/* Host reference for t4/gemm_fp8: C = A·B^T with A f8e4m3 [M, K], B f8e4m3 [N, K] (row-major,
 * K contiguous) and C bf16 [M, N] row-major, accumulated in float in k order. The e4m3 bytes
 * are decoded by hand (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, subnormals when the
 * exponent field is 0, NaN only for S.1111.111, no infinities) into a 256-entry table; the bf16
 * rounding (nearest, ties to even) is written out too, so the host backend needs no CUDA
 * headers. The obviously-correct triple loop, meant for the small and hidden sizes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct gemm_ctx {
    int64_t M, N, K;
    float e4m3[256];  /* value of every byte */
} gemm_ctx;

static float e4m3_decode(uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
    float v;
    if (exp == 15 && man == 7)
        v = NAN;
    else if (exp == 0)
        v = ldexpf((float)man, -9);              /* subnormal: man/8 * 2^(1-7) */
    else
        v = ldexpf((float)(8 + man), exp - 10);  /* (1 + man/8) * 2^(exp-7) */
    return sign ? -v : v;
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

static int tensor_ok(const st_tensor *t, st_dtype dtype, int64_t rows, int64_t cols) {
    return t->dtype == dtype && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
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
    for (int b = 0; b < 256; b++) c->e4m3[b] = e4m3_decode((uint8_t)b);
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const gemm_ctx *c = ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    const int64_t M = c->M, N = c->N, K = c->K;
    if (!tensor_ok(&in[0], ST_F8E4M3, M, K) || !tensor_ok(&in[1], ST_F8E4M3, N, K) ||
        !tensor_ok(&out[0], ST_BF16, M, N))
        return 1;
    const uint8_t *A = in[0].data, *B = in[1].data;
    uint16_t *C = out[0].data;

    for (int64_t i = 0; i < M; i++) {
        const uint8_t *a = A + i * K;
        for (int64_t j = 0; j < N; j++) {
            const uint8_t *b = B + j * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += c->e4m3[a[k]] * c->e4m3[b[k]];
            C[i * N + j] = float_to_bf16(acc);
        }
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
