/* Host reference for t1/conv2d: y = conv3x3(x, w), stride 1, zero padding 1, no bias, NCHW, bf16
 * in and out: y[n, k, h, w] = sum over c, r, s of w[k, c, r, s] * x[n, c, h + r - 1, w + s - 1]
 * (taps outside the image are zero), summed in float in (c, r, s) order and rounded once to bf16.
 * The bf16 conversions are written out (round to nearest even). The obvious loop nest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct conv_ctx {
    int64_t N, C, H, W, K;
    const uint16_t *w;  /* host copy owned by the harness, unchanged until st_free */
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
    c->w = params[0].data;
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
    const uint16_t *x = in[0].data, *w = c->w;
    uint16_t *y = out[0].data;

    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < H; oh++)
                for (int64_t ow = 0; ow < W; ow++) {
                    float acc = 0.0f;
                    for (int64_t ch = 0; ch < C; ch++) {
                        const uint16_t *xc = x + (n * C + ch) * H * W;
                        const uint16_t *wc = w + (k * C + ch) * 9;
                        for (int r = 0; r < 3; r++) {
                            const int64_t ih = oh + r - 1;
                            if (ih < 0 || ih >= H) continue;
                            for (int s = 0; s < 3; s++) {
                                const int64_t iw = ow + s - 1;
                                if (iw < 0 || iw >= W) continue;
                                acc += bf16_to_float(wc[r * 3 + s]) * bf16_to_float(xc[ih * W + iw]);
                            }
                        }
                    }
                    y[((n * K + k) * H + oh) * W + ow] = float_to_bf16(acc);
                }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
