/* Host expert for t2/conv_bn_relu: 3x3 convolution (zero padding 1, bf16 in), conv rounded to
 * bf16, batch norm with the running statistics rounded to bf16, ReLU. The reference walks output
 * pixels and every (c, r, s) tap with two bounds checks and two bf16 conversions per multiply-add.
 * Here the weights are widened to float once in st_init; each image is widened once per call
 * into a zero-padded float copy (rows of W + 2), so no tap needs a bounds check; each output
 * channel is accumulated as a whole plane by one contiguous axpy per (c, r, s) tap, which
 * vectorises; and the batch-norm epilogue runs once per plane with its per-channel constants
 * hoisted. Each pixel still sums its taps in (c, r, s) order in float, as the reference does. */
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

typedef struct {
    int64_t N, C, K, H, W;
    const float *gamma, *beta, *mean, *var, *eps;
    float *wf;   /* weight widened to float, [K, C, 9] */
    float *xpad; /* one image widened and zero-padded: [C, H + 2, W + 2] */
    float *acc;  /* one output plane with padded rows: [H, W + 2] */
} cbr_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "conv_bn_relu host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_tensor(const st_tensor *t, const char *what, st_dtype dt, int ndim, int64_t d0,
                        int64_t d1, int64_t d2, int64_t d3) {
    const int64_t d[4] = {d0, d1, d2, d3};
    int ok = t->dtype == dt && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "conv_bn_relu host reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

void st_free(void *p) {
    cbr_ctx *ctx = p;
    if (ctx) {
        free(ctx->wf);
        free(ctx->xpad);
        free(ctx->acc);
    }
    free(ctx);
}

/* y[i] += a * x[i]; blocks of 16 so that -O2's cheap vectoriser turns them into SIMD code */
static void axpy(float *restrict y, const float *restrict x, float a, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[i];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    cbr_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "N", &ctx->N) || cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "K", &ctx->K) ||
        cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "W", &ctx->W))
        goto fail;
    if (ctx->N < 1 || ctx->C < 1 || ctx->K < 1 || ctx->H < 1 || ctx->W < 1) goto fail;
    if (n_params != 6) {
        fprintf(stderr, "conv_bn_relu host expert: expected 6 params, got %d\n", n_params);
        goto fail;
    }
    const int64_t K = ctx->K, C = ctx->C, H = ctx->H, W = ctx->W;
    if (check_tensor(&params[0], "weight", ST_BF16, 4, K, ctx->C, 3, 3) ||
        check_tensor(&params[1], "gamma", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[2], "beta", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[3], "running_mean", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[4], "running_var", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[5], "eps", ST_F32, 1, 1, -1, -1, -1))
        goto fail;
    ctx->gamma = params[1].data;
    ctx->beta = params[2].data;
    ctx->mean = params[3].data;
    ctx->var = params[4].data;
    ctx->eps = params[5].data;
    ctx->wf = malloc(sizeof(float) * (size_t)(K * C * 9));
    ctx->xpad = calloc((size_t)(C * (H + 2) * (W + 2)), sizeof(float));
    ctx->acc = malloc(sizeof(float) * (size_t)(H * (W + 2)));
    if (!ctx->wf || !ctx->xpad || !ctx->acc) goto fail;
    const uint16_t *w = params[0].data;
    for (int64_t i = 0; i < K * C * 9; i++) ctx->wf[i] = bf16_to_f32(w[i]);
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const cbr_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "conv_bn_relu host expert: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    const int64_t N = ctx->N, C = ctx->C, K = ctx->K, H = ctx->H, W = ctx->W;
    if (check_tensor(&in[0], "x", ST_BF16, 4, N, C, H, W) ||
        check_tensor(&out[0], "y", ST_BF16, 4, N, K, H, W))
        return 1;
    const uint16_t *restrict x = in[0].data;
    uint16_t *restrict y = out[0].data;
    const float *restrict wf = ctx->wf;
    float *restrict xpad = ctx->xpad, *restrict acc = ctx->acc;
    const int64_t PW = W + 2, plane = (H + 2) * PW;
    const int64_t len = H * PW - 2; /* the last row's 2 pad columns would read past the image */

    for (int64_t n = 0; n < N; n++) {
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++) {
                const uint16_t *src = x + ((n * C + ch) * H + h) * W;
                float *dst = xpad + ch * plane + (h + 1) * PW + 1;
                for (int64_t ww = 0; ww < W; ww++) dst[ww] = bf16_to_f32(src[ww]);
            }
        for (int64_t k = 0; k < K; k++) {
            for (int64_t i = 0; i < len; i++) acc[i] = 0.0f;
            for (int64_t ch = 0; ch < C; ch++) {
                const float *wc = wf + (k * C + ch) * 9;
                for (int r = 0; r < 3; r++)
                    for (int s = 0; s < 3; s++) {
                        const float wv = wc[r * 3 + s];
                        const float *restrict xs = xpad + ch * plane + r * PW + s;
                        axpy(acc, xs, wv, len);
                    }
            }
            const float std = sqrtf(ctx->var[k] + ctx->eps[0]);
            const float mk = ctx->mean[k], gk = ctx->gamma[k], bk = ctx->beta[k];
            uint16_t *yk = y + (n * K + k) * H * W;
            for (int64_t h = 0; h < H; h++)
                for (int64_t ww = 0; ww < W; ww++) {
                    const float conv = bf16_to_f32(f32_to_bf16(acc[h * PW + ww]));
                    const float bn = (conv - mk) / std * gk + bk;
                    const float v = bf16_to_f32(f32_to_bf16(bn));
                    yk[h * W + ww] = f32_to_bf16(v > 0.0f ? v : 0.0f);
                }
        }
    }
    return 0;
}
