/* Host expert for t2/rope_qkv: qkv = x·Wqkv + bqkv (rounded to bf16 after the GEMM and after the
 * bias), split into heads, rotate-half RoPE on q and k, as the reference computes it. The
 * reference runs the GEMM one token at a time, widening every bf16 weight once per token. Here
 * tokens go 4 at a time: each weight row is widened once into a float scratch row and then
 * added into the 4 tokens' accumulators by contiguous axpys in blocks of 16 that -O2 vectorises,
 * so the weights are read and widened a quarter as often. Each output still sums over c in
 * order in float, as the reference does, and the bias, rounding and rotation are unchanged. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define ROPE_THETA 10000.0

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

#define TILE 4

typedef struct {
    int64_t T, H, D, C;
    const uint16_t *W, *b;  /* owned by the harness, live until st_free */
    float *acc;             /* TILE rows of qkv, 3C long each */
    float *wrow;            /* one row of Wqkv widened, 3C long */
    float *cos_t, *sin_t;   /* [T, D/2] */
} rope_ctx;

/* y[i] += a * x[i]; blocks of 16 with restrict parameters so -O2 vectorises it */
static void axpy(float *restrict y, const float *restrict x, float a, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[i];
}

static void widen(float *restrict dst, const uint16_t *restrict src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            const uint32_t u = (uint32_t)src[i + l] << 16;
            memcpy(&dst[i + l], &u, sizeof u);
        }
    for (; i < n; i++) {
        const uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "rope_qkv host reference: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored */
static int tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    return t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) && t->data != NULL;
}

void st_free(void *p) {
    rope_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->acc);
    free(ctx->wrow);
    free(ctx->cos_t);
    free(ctx->sin_t);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    rope_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "D", &ctx->D)) goto fail;
    ctx->C = ctx->H * ctx->D;
    if (ctx->T <= 0 || ctx->H <= 0 || ctx->D <= 0 || ctx->D % 2) goto fail;
    if (n_params != 2 || !tensor_ok(&params[0], 2, ctx->C, 3 * ctx->C, 0) ||
        !tensor_ok(&params[1], 1, 3 * ctx->C, 0, 0)) {
        fprintf(stderr, "rope_qkv host expert: expected params Wqkv [C, 3C] and bqkv [3C] in bf16\n");
        goto fail;
    }
    ctx->W = params[0].data;
    ctx->b = params[1].data;
    const int64_t half = ctx->D / 2;
    ctx->acc = malloc(sizeof(float) * (size_t)(TILE * 3 * ctx->C));
    ctx->wrow = malloc(sizeof(float) * (size_t)(3 * ctx->C));
    ctx->cos_t = malloc(sizeof(float) * (size_t)(ctx->T * half));
    ctx->sin_t = malloc(sizeof(float) * (size_t)(ctx->T * half));
    if (!ctx->acc || !ctx->wrow || !ctx->cos_t || !ctx->sin_t) goto fail;
    for (int64_t i = 0; i < half; i++) {
        const double theta = pow(ROPE_THETA, -2.0 * (double)i / (double)ctx->D);
        for (int64_t t = 0; t < ctx->T; t++) {
            ctx->cos_t[t * half + i] = (float)cos((double)t * theta);
            ctx->sin_t[t * half + i] = (float)sin((double)t * theta);
        }
    }
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    rope_ctx *ctx = p;
    if (!ctx || n_in != 1 || n_out != 3) return 1;
    const int64_t T = ctx->T, H = ctx->H, D = ctx->D, C = ctx->C, half = D / 2, C3 = 3 * C;
    if (!tensor_ok(&in[0], 2, T, C, 0)) return 1;
    for (int i = 0; i < 3; i++)
        if (!tensor_ok(&out[i], 3, H, T, D)) return 1;
    const uint16_t *x = in[0].data;
    uint16_t *dst[3] = {out[0].data, out[1].data, out[2].data};
    float *wrow = ctx->wrow;

    for (int64_t t0 = 0; t0 < T; t0 += TILE) {
        const int64_t nt = T - t0 < TILE ? T - t0 : TILE;
        for (int64_t j = 0; j < nt * C3; j++) ctx->acc[j] = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            widen(wrow, ctx->W + c * C3, C3);
            for (int64_t u = 0; u < nt; u++)
                axpy(ctx->acc + u * C3, wrow, bf16_to_f32(x[(t0 + u) * C + c]), C3);
        }
        for (int64_t u = 0; u < nt; u++) {
            const int64_t t = t0 + u;
            float *acc = ctx->acc + u * C3;
            /* qkv row: bf16(bf16(x·W) + b) */
            for (int64_t j = 0; j < C3; j++) acc[j] = round_bf16(round_bf16(acc[j]) + bf16_to_f32(ctx->b[j]));
            /* split into heads; rotate q and k */
            for (int s = 0; s < 3; s++)
                for (int64_t h = 0; h < H; h++) {
                    const float *uu = acc + s * C + h * D;
                    uint16_t *o = dst[s] + (h * T + t) * D;
                    if (s == 2) {
                        for (int64_t d = 0; d < D; d++) o[d] = f32_to_bf16(uu[d]);
                        continue;
                    }
                    for (int64_t i = 0; i < half; i++) {
                        const float cs = ctx->cos_t[t * half + i], sn = ctx->sin_t[t * half + i];
                        o[i] = f32_to_bf16(uu[i] * cs - uu[i + half] * sn);
                        o[i + half] = f32_to_bf16(uu[i + half] * cs + uu[i] * sn);
                    }
                }
        }
    }
    return 0;
}
