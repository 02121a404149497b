/* Host expert for t2/lstm: per step, gates = x_t·W_ih^T + h_{t-1}·W_hh^T + b, then sigmoid/tanh,
 * c_t and h_t, as the reference computes them. The reference takes every gate's two dot
 * products through serial float chains (one dependent add per weight), so the core runs at the
 * add latency. Here each dot product runs over 16 independent lanes that the compiler turns
 * into SIMD multiply-adds, and two gate rows are computed together so each x_t / h_{t-1}
 * element is loaded once for both; restrict pointers throughout. Float error of the shorter
 * chains is smaller than the reference's, far inside the 1.5e-3 tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t T, B, I, H;
    const float *W_ih, *W_hh, *b; /* owned by the harness, live until st_free */
    float *gates;                 /* [4H], one batch row at a time */
} lstm_ctx;

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "lstm host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    const int64_t d[3] = {d0, d1, d2};
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "lstm host reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

void st_free(void *p) {
    lstm_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->gates);
    free(ctx);
}

/* dot products of v with rows a and b (length n) over 16 lanes each */
static void dot2(const float *restrict v, const float *restrict a, const float *restrict b,
                 int64_t n, float *ra, float *rb) {
    float la[16] = {0}, lb[16] = {0};
    int64_t k = 0;
    for (; k + 16 <= n; k += 16)
        for (int l = 0; l < 16; l++) {
            la[l] += v[k + l] * a[k + l];
            lb[l] += v[k + l] * b[k + l];
        }
    for (; k < n; k++) {
        la[0] += v[k] * a[k];
        lb[0] += v[k] * b[k];
    }
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) {
            la[l] += la[l + w];
            lb[l] += lb[l + w];
        }
    *ra = la[0];
    *rb = lb[0];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    lstm_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "I", &ctx->I) ||
        cfg_get(cfg, "H", &ctx->H))
        goto fail;
    if (ctx->T < 1 || ctx->B < 1 || ctx->I < 1 || ctx->H < 1) goto fail;
    if (n_params != 3) {
        fprintf(stderr, "lstm host reference: expected 3 params, got %d\n", n_params);
        goto fail;
    }
    const int64_t H = ctx->H;
    if (check_tensor(&params[0], "W_ih", 2, 4 * H, ctx->I, 0) ||
        check_tensor(&params[1], "W_hh", 2, 4 * H, H, 0) || check_tensor(&params[2], "b", 1, 4 * H, 0, 0))
        goto fail;
    ctx->W_ih = params[0].data;
    ctx->W_hh = params[1].data;
    ctx->b = params[2].data;
    ctx->gates = malloc(sizeof(float) * (size_t)(4 * H));
    if (!ctx->gates) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    lstm_ctx *ctx = p;
    if (n_in != 3 || n_out != 2) {
        fprintf(stderr, "lstm host expert: expected 3 inputs and 2 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t T = ctx->T, B = ctx->B, I = ctx->I, H = ctx->H;
    if (check_tensor(&in[0], "x", 3, T, B, I) || check_tensor(&in[1], "h0", 2, B, H, 0) ||
        check_tensor(&in[2], "c0", 2, B, H, 0) || check_tensor(&out[0], "h_seq", 3, T, B, H) ||
        check_tensor(&out[1], "c_final", 2, B, H, 0))
        return 1;
    const float *x = in[0].data, *h0 = in[1].data, *c0 = in[2].data;
    float *h_seq = out[0].data, *c_final = out[1].data;
    float *restrict z = ctx->gates;
    const float *restrict Wih = ctx->W_ih, *restrict Whh = ctx->W_hh, *restrict bias = ctx->b;

    memcpy(c_final, c0, sizeof(float) * (size_t)(B * H)); /* c_final is the running cell state */
    for (int64_t t = 0; t < T; t++) {
        const float *h_prev = t == 0 ? h0 : h_seq + (t - 1) * B * H;
        for (int64_t b = 0; b < B; b++) {
            const float *xb = x + (t * B + b) * I, *hb = h_prev + b * H;
            int64_t r = 0;
            for (; r + 2 <= 4 * H; r += 2) {
                float a0, a1, c0v, c1v;
                dot2(xb, Wih + r * I, Wih + (r + 1) * I, I, &a0, &a1);
                dot2(hb, Whh + r * H, Whh + (r + 1) * H, H, &c0v, &c1v);
                z[r] = a0 + c0v + bias[r];
                z[r + 1] = a1 + c1v + bias[r + 1];
            }
            /* 4H is even: no row is left over */
            float *cb = c_final + b * H, *hout = h_seq + (t * B + b) * H;
            for (int64_t j = 0; j < H; j++) {
                const float i = sigmoidf(z[j]), f = sigmoidf(z[H + j]);
                const float g = tanhf(z[2 * H + j]), o = sigmoidf(z[3 * H + j]);
                const float c = f * cb[j] + i * g;
                cb[j] = c;
                hout[j] = o * tanhf(c);
            }
        }
    }
    return 0;
}
