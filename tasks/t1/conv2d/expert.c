/* Host expert for t1/conv2d: y = conv3x3(x, w), stride 1, zero padding 1, NCHW, bf16 in and out.
 * The reference walks output pixels and, per pixel, every (c, r, s) tap with two bounds checks
 * and two bf16 conversions per multiply-add. Here w is widened to float once in st_init; each
 * image is widened once per call into a zero-padded float copy (rows of W + 2), so no tap needs
 * a bounds check; and each output channel is accumulated as a whole plane: for every (c, r, s)
 * one long contiguous axpy acc[i] += w * xpad[c][i + r*(W+2) + s] over the padded plane, which
 * vectorises (the 2 pad columns per row are computed and dropped). Each pixel still sums its taps
 * in (c, r, s) order in float, as the reference does (adding a padded zero changes nothing). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct conv_ctx {
    int64_t N, C, H, W, K;
    float *wf;   /* w widened to float, [K, C, 9] */
    float *xpad; /* one image widened and zero-padded: [C, H + 2, W + 2] */
    float *acc;  /* one output plane with padded rows: [H, W + 2] */
} conv_ctx;

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

static int tensor_ok(const st_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->shape[2] == d2 && t->shape[3] == d3 && t->data != NULL;
}

/* y[i] += a * x[i]; blocks of 16 so that -O2's cheap vectoriser turns them into SIMD code */
static void axpy(float *restrict y, const float *restrict x, float a, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[i];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t N, C, H, W, K;
    if (cfg == NULL || ctx == NULL || n_params != 1) return 1;
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "H", &H) ||
        cfg_get(cfg, "W", &W) || cfg_get(cfg, "K", &K))
        return 1;
    if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1) return 1;
    if (!tensor_ok(&params[0], K, C, 3, 3)) return 1;
    conv_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->N = N;
    c->C = C;
    c->H = H;
    c->W = W;
    c->K = K;
    c->wf = malloc((size_t)(K * C * 9) * sizeof(float));
    c->xpad = calloc((size_t)(C * (H + 2) * (W + 2)), sizeof(float));
    c->acc = malloc((size_t)(H * (W + 2)) * sizeof(float));
    if (c->wf == NULL || c->xpad == NULL || c->acc == NULL) {
        free(c->wf);
        free(c->xpad);
        free(c->acc);
        free(c);
        return 1;
    }
    const uint16_t *w = params[0].data;
    for (int64_t i = 0; i < K * C * 9; i++) c->wf[i] = bf16_to_float(w[i]);
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const conv_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    const int64_t N = c->N, C = c->C, H = c->H, W = c->W, K = c->K;
    if (!tensor_ok(&in[0], N, C, H, W) || !tensor_ok(&out[0], N, K, H, W)) return 1;
    const uint16_t *restrict x = in[0].data;
    uint16_t *restrict y = out[0].data;
    const float *restrict wf = c->wf;
    float *restrict xpad = c->xpad, *restrict acc = c->acc;
    const int64_t PW = W + 2, plane = (H + 2) * PW;
    /* The padded plane is computed over rows 0..H-1 of width PW, minus the last row's 2 pad
     * columns, so every read stays inside the channel's padded image. */
    const int64_t len = H * PW - 2;

    for (int64_t n = 0; n < N; n++) {
        /* the pad border stays zero from calloc; only the interior is rewritten */
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t h = 0; h < H; h++) {
                const uint16_t *src = x + ((n * C + ch) * H + h) * W;
                float *dst = xpad + ch * plane + (h + 1) * PW + 1;
                for (int64_t ww = 0; ww < W; ww++) dst[ww] = bf16_to_float(src[ww]);
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
            uint16_t *yk = y + (n * K + k) * H * W;
            for (int64_t h = 0; h < H; h++)
                for (int64_t ww = 0; ww < W; ww++) yk[h * W + ww] = float_to_bf16(acc[h * PW + ww]);
        }
    }
    return 0;
}

void st_free(void *ctx) {
    conv_ctx *c = ctx;
    if (c != NULL) {
        free(c->wf);
        free(c->xpad);
        free(c->acc);
    }
    free(c);
}
