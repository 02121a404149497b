/* Host reference for t2/layernorm_residual: h = x + residual (rounded to bf16), then LayerNorm of
 * each row of h with fp32 statistics (mean, then the variance around it) and y = normalised h
 * times gamma plus beta, rounded to bf16. The same steps and roundings as the GPU reference, in
 * plain loops, so the host backend reproduces its numbers up to fp32 summation order. */
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
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

typedef struct {
    int64_t T, C;
    const uint16_t *gamma, *beta; /* owned by the harness, live until st_free */
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

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    int64_t T, C;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "C", &C)) return 1;
    if (T <= 0 || C <= 0) return 1;
    if (n_params != 2 || !tensor_ok(&params[0], 1, C, 0) || !tensor_ok(&params[1], 1, C, 0)) {
        fprintf(stderr, "layernorm_residual host reference: expected params gamma, beta: bf16 [C]\n");
        return 1;
    }
    ln_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) return 1;
    ctx->T = T;
    ctx->C = C;
    ctx->gamma = params[0].data;
    ctx->beta = params[1].data;
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
            fprintf(stderr, "layernorm_residual host reference: tensors must be bf16 [T, C]\n");
            return 1;
        }
    const uint16_t *x = in[0].data, *r = in[1].data;
    uint16_t *h = out[0].data, *y = out[1].data;

    for (int64_t t = 0; t < T; t++) {
        const int64_t o = t * C;
        float sum = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            h[o + c] = f32_to_bf16(bf16_to_f32(x[o + c]) + bf16_to_f32(r[o + c]));
            sum += bf16_to_f32(h[o + c]);
        }
        const float mean = sum / (float)C;
        float sq = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const float d = bf16_to_f32(h[o + c]) - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf(sq / (float)C + LN_EPS);
        for (int64_t c = 0; c < C; c++) {
            const float v = (bf16_to_f32(h[o + c]) - mean) * rstd;
            y[o + c] = f32_to_bf16(v * bf16_to_f32(ctx->gamma[c]) + bf16_to_f32(ctx->beta[c]));
        }
    }
    return 0;
}

void st_free(void *p) {
    free(p);
}
