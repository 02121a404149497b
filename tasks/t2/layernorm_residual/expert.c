/* Host expert for t2/layernorm_residual: h = bf16(x + residual), then LayerNorm of each row of h
 * with fp32 statistics, y = bf16(normalised h * gamma + beta). The reference converts gamma and
 * beta from bf16 on every element of every row, re-widens h in each of its three passes, and
 * sums through one serial float chain. Here gamma and beta are widened once in st_init, each
 * row's h is kept widened in a float scratch row, the mean and variance sums run over 16
 * independent float lanes (SIMD, more accurate than one chain), and the bf16 rounding is
 * branch-free, so every pass vectorises. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define LN_EPS 1e-5f

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* round to nearest even; NaN stays NaN (a quiet one) instead of rounding up into Inf */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

#define LANES 16

static float lane_sum(const float *restrict v, int64_t n) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += v[i + l];
    for (; i < n; i++) acc[0] += v[i];
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

typedef struct {
    int64_t T, C;
    float *gamma, *beta; /* widened once */
    float *row;          /* scratch: one row of h, widened */
} ln_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "layernorm_residual host reference: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static int tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
}

/* The elementwise passes, in blocks of 16 with restrict parameters so -O2 vectorises them */
static void residual(uint16_t *restrict h, float *restrict hf, const uint16_t *restrict x,
                     const uint16_t *restrict r, int64_t n) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int l = 0; l < 16; l++) {
            const uint16_t hb = f32_to_bf16(bf16_to_f32(x[c + l]) + bf16_to_f32(r[c + l]));
            h[c + l] = hb;
            hf[c + l] = bf16_to_f32(hb);
        }
    for (; c < n; c++) {
        const uint16_t hb = f32_to_bf16(bf16_to_f32(x[c]) + bf16_to_f32(r[c]));
        h[c] = hb;
        hf[c] = bf16_to_f32(hb);
    }
}

static void ln_out(uint16_t *restrict y, const float *restrict hf, const float *restrict gamma,
                   const float *restrict beta, float mean, float rstd, int64_t n) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int l = 0; l < 16; l++)
            y[c + l] = f32_to_bf16(((hf[c + l] - mean) * rstd) * gamma[c + l] + beta[c + l]);
    for (; c < n; c++) y[c] = f32_to_bf16(((hf[c] - mean) * rstd) * gamma[c] + beta[c]);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    int64_t T, C;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "C", &C)) return 1;
    if (T <= 0 || C <= 0) return 1;
    if (n_params != 2 || !tensor_ok(&params[0], 1, C, 0) || !tensor_ok(&params[1], 1, C, 0)) {
        fprintf(stderr, "layernorm_residual host expert: expected params gamma, beta: bf16 [C]\n");
        return 1;
    }
    ln_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) return 1;
    ctx->T = T;
    ctx->C = C;
    ctx->gamma = malloc(sizeof(float) * (size_t)C);
    ctx->beta = malloc(sizeof(float) * (size_t)C);
    ctx->row = malloc(sizeof(float) * (size_t)C);
    if (!ctx->gamma || !ctx->beta || !ctx->row) {
        st_free(ctx);
        return 1;
    }
    const uint16_t *g = params[0].data, *b = params[1].data;
    for (int64_t c = 0; c < C; c++) {
        ctx->gamma[c] = bf16_to_f32(g[c]);
        ctx->beta[c] = bf16_to_f32(b[c]);
    }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const ln_ctx *ctx = p;
    if (!ctx || n_in != 2 || n_out != 2) return 1;
    const int64_t T = ctx->T, C = ctx->C;
    for (int i = 0; i < 2; i++)
        if (!tensor_ok(&in[i], 2, T, C) || !tensor_ok(&out[i], 2, T, C)) {
            fprintf(stderr, "layernorm_residual host expert: tensors must be bf16 [T, C]\n");
            return 1;
        }
    const float *restrict gamma = ctx->gamma, *restrict beta = ctx->beta;
    float *restrict hf = ctx->row;

    for (int64_t t = 0; t < T; t++) {
        const uint16_t *restrict x = (const uint16_t *)in[0].data + t * C;
        const uint16_t *restrict r = (const uint16_t *)in[1].data + t * C;
        uint16_t *restrict h = (uint16_t *)out[0].data + t * C;
        uint16_t *restrict y = (uint16_t *)out[1].data + t * C;
        residual(h, hf, x, r, C);
        const float mean = lane_sum(hf, C) / (float)C;
        float var_sum;
        {
            float acc[LANES] = {0};
            int64_t i = 0;
            for (; i + LANES <= C; i += LANES)
                for (int l = 0; l < LANES; l++) {
                    const float d = hf[i + l] - mean;
                    acc[l] += d * d;
                }
            for (; i < C; i++) {
                const float d = hf[i] - mean;
                acc[0] += d * d;
            }
            for (int w = LANES / 2; w > 0; w /= 2)
                for (int l = 0; l < w; l++) acc[l] += acc[l + w];
            var_sum = acc[0];
        }
        const float rstd = 1.0f / sqrtf(var_sum / (float)C + LN_EPS);
        ln_out(y, hf, gamma, beta, mean, rstd, C);
    }
    return 0;
}

void st_free(void *p) {
    ln_ctx *ctx = p;
    if (ctx) {
        free(ctx->gamma);
        free(ctx->beta);
        free(ctx->row);
    }
    free(ctx);
}
