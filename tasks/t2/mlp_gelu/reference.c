/* Host reference for t2/mlp_gelu: Y = GELU(X·W1 + b1)·W2 + b2 with plain loops, rounding to bf16
 * after every step exactly where the GPU reference does (GEMM, bias, GELU, GEMM, bias), so the
 * host backend reproduces its numbers up to fp32 summation order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

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

static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

typedef struct {
    int64_t T, D, H;
    const uint16_t *W1, *b1, *W2, *b2; /* owned by the harness, live until st_free */
    float *acc;                        /* one row of fp32 accumulators, max(D, H) long */
    float *hid;                        /* one row of the intermediate, H long */
} mlp_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mlp_gelu host reference: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok && ndim == 1)
        fprintf(stderr, "mlp_gelu host reference: %s: expected bf16 of shape [%lld]\n", what, (long long)d0);
    else if (!ok)
        fprintf(stderr, "mlp_gelu host reference: %s: expected bf16 of shape [%lld, %lld]\n", what,
                (long long)d0, (long long)d1);
    return !ok;
}

void st_free(void *p) {
    mlp_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->acc);
    free(ctx->hid);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    mlp_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "D", &ctx->D) || cfg_get(cfg, "H", &ctx->H))
        goto fail;
    if (ctx->T <= 0 || ctx->D <= 0 || ctx->H <= 0) goto fail;
    if (n_params != 4) {
        fprintf(stderr, "mlp_gelu host reference: expected 4 params, got %d\n", n_params);
        goto fail;
    }
    if (check_tensor(&params[0], "W1", 2, ctx->D, ctx->H) || check_tensor(&params[1], "b1", 1, ctx->H, 0) ||
        check_tensor(&params[2], "W2", 2, ctx->H, ctx->D) || check_tensor(&params[3], "b2", 1, ctx->D, 0))
        goto fail;
    ctx->W1 = params[0].data;
    ctx->b1 = params[1].data;
    ctx->W2 = params[2].data;
    ctx->b2 = params[3].data;
    ctx->acc = malloc(sizeof(float) * (size_t)(ctx->D > ctx->H ? ctx->D : ctx->H));
    ctx->hid = malloc(sizeof(float) * (size_t)ctx->H);
    if (!ctx->acc || !ctx->hid) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    mlp_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "mlp_gelu host reference: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "X", 2, ctx->T, ctx->D) || check_tensor(&out[0], "Y", 2, ctx->T, ctx->D))
        return 1;
    const uint16_t *X = in[0].data;
    uint16_t *Y = out[0].data;
    const int64_t T = ctx->T, D = ctx->D, H = ctx->H;
    float *acc = ctx->acc, *hid = ctx->hid;

    for (int64_t t = 0; t < T; t++) {
        /* hid = bf16(gelu(bf16(bf16(x·W1) + b1))), one token at a time */
        for (int64_t h = 0; h < H; h++) acc[h] = 0.0f;
        for (int64_t d = 0; d < D; d++) {
            float x = bf16_to_f32(X[t * D + d]);
            for (int64_t h = 0; h < H; h++) acc[h] += x * bf16_to_f32(ctx->W1[d * H + h]);
        }
        for (int64_t h = 0; h < H; h++) {
            float v = round_bf16(round_bf16(acc[h]) + bf16_to_f32(ctx->b1[h]));
            hid[h] = round_bf16(gelu_tanh(v));
        }
        /* y = bf16(bf16(hid·W2) + b2) */
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
        for (int64_t h = 0; h < H; h++) {
            float g = hid[h];
            for (int64_t d = 0; d < D; d++) acc[d] += g * bf16_to_f32(ctx->W2[h * D + d]);
        }
        for (int64_t d = 0; d < D; d++)
            Y[t * D + d] = f32_to_bf16(round_bf16(acc[d]) + bf16_to_f32(ctx->b2[d]));
    }
    return 0;
}
