/* Host expert for t4/gemm_fp8: C = A·B^T with A f8e4m3 [M, K], B f8e4m3 [N, K] and C bf16 [M, N],
 * accumulated in float. The reference decodes both bytes through the lookup table for every
 * multiply-add and runs each dot product as one serial float chain. Here B is decoded in panels
 * of 64 rows (at most 64 K floats, so it stays in cache) and each A row once per panel, by the
 * same table; then every A row is multiplied against 4 panel rows at a time, each dot product
 * over 8 independent float lanes (32 accumulators, fixed-length loops that -O2 vectorises), so
 * each decoded A value is loaded once for 4 outputs. Only the float summation order differs
 * from the reference, far inside the 0.25 + 2% tolerance. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define PANEL 64

typedef struct gemm_ctx {
    int64_t M, N, K;
    float e4m3[256];  /* value of every byte */
    float *bp;        /* PANEL rows of B decoded, [PANEL, K] */
    float *ar;        /* one row of A decoded, [K] */
} gemm_ctx;

static void decode(float *restrict dst, const uint8_t *restrict src, const float *restrict lut,
                   int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = lut[src[i]];
}

static float hsum8(const float *v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* out[0..3] = a · b0..b3, over 8 lanes each */
static void dot4(const float *restrict a, const float *restrict b0, const float *restrict b1,
                 const float *restrict b2, const float *restrict b3, int64_t K, float *out) {
    float s0[8] = {0}, s1[8] = {0}, s2[8] = {0}, s3[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int l = 0; l < 8; l++) {
            const float av = a[k + l];
            s0[l] += av * b0[k + l];
            s1[l] += av * b1[k + l];
            s2[l] += av * b2[k + l];
            s3[l] += av * b3[k + l];
        }
    for (; k < K; k++) {
        s0[0] += a[k] * b0[k];
        s1[0] += a[k] * b1[k];
        s2[0] += a[k] * b2[k];
        s3[0] += a[k] * b3[k];
    }
    out[0] = hsum8(s0);
    out[1] = hsum8(s1);
    out[2] = hsum8(s2);
    out[3] = hsum8(s3);
}

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
    c->bp = malloc(sizeof(float) * (size_t)(PANEL * K));
    c->ar = malloc(sizeof(float) * (size_t)K);
    if (c->bp == NULL || c->ar == NULL) {
        free(c->bp);
        free(c->ar);
        free(c);
        return 1;
    }
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
    float *bp = c->bp, *ar = c->ar;

    for (int64_t j0 = 0; j0 < N; j0 += PANEL) {
        const int64_t nb = N - j0 < PANEL ? N - j0 : PANEL;
        decode(bp, B + j0 * K, c->e4m3, nb * K);
        for (int64_t i = 0; i < M; i++) {
            decode(ar, A + i * K, c->e4m3, K);
            uint16_t *crow = C + i * N + j0;
            int64_t j = 0;
            for (; j + 4 <= nb; j += 4) {
                float r[4];
                dot4(ar, bp + j * K, bp + (j + 1) * K, bp + (j + 2) * K, bp + (j + 3) * K, K, r);
                for (int u = 0; u < 4; u++) crow[j + u] = float_to_bf16(r[u]);
            }
            for (; j < nb; j++) {
                float r[4];
                const float *bj = bp + j * K;
                dot4(ar, bj, bj, bj, bj, K, r);
                crow[j] = float_to_bf16(r[0]);
            }
        }
    }
    return 0;
}

void st_free(void *ctx) {
    gemm_ctx *c = ctx;
    if (c != NULL) {
        free(c->bp);
        free(c->ar);
    }
    free(c);
}
