/* Host solution for the KernelBench small CNN (tests/kernelbench/cnn.py) in fp32 with plain loops:
 * conv3x3 -> BatchNorm -> ReLU -> 2x2 max pool -> conv3x3 -> BatchNorm -> ReLU -> global average
 * pool -> Linear. The model runs in train mode, so BatchNorm normalises with the statistics of the
 * batch itself (biased variance, two passes) and the running-stat params go unused. Sums
 * accumulate in double and round to fp32 where PyTorch rounds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* the sizes cnn.py fixes: batch, channels of each stage, image side before and after the pool */
enum { N = 8, C0 = 3, C1 = 16, C2 = 32, CLASSES = 10, S0 = 32, S1 = 16 };
#define BN_EPS 1e-5

typedef struct {
    /* owned by the harness, live until st_free */
    const float *conv1_w, *conv1_b, *bn1_w, *bn1_b;
    const float *conv2_w, *conv2_b, *bn2_w, *bn2_b;
    const float *fc_w, *fc_b;
    /* activations between the stages */
    float conv1[N * C1 * S0 * S0];
    float pool1[N * C1 * S1 * S1];
    float conv2[N * C2 * S1 * S1];
    float pooled[N * C2];
} cnn_ctx;

static const st_tensor *find_param(const st_tensor *params, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (params[i].name && strcmp(params[i].name, name) == 0) return &params[i];
    fprintf(stderr, "kernelbench cnn: param '%s' missing\n", name);
    return NULL;
}

/* Only the first ndim of d0..d3 count; a NULL tensor was already reported by find_param. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                     int64_t d2, int64_t d3) {
    if (!t) return 1;
    const int64_t want[4] = {d0, d1, d2, d3};
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        fprintf(stderr, "kernelbench cnn: %s: expected f32 of shape [", what);
        for (int i = 0; i < ndim; i++) fprintf(stderr, i ? ", %lld" : "%lld", (long long)want[i]);
        fprintf(stderr, "]\n");
    }
    return !ok;
}

/* Conv2d(cin, cout, 3, padding=1) on [N, cin, s, s] -> [N, cout, s, s]; w is [cout, cin, 3, 3]. */
static void conv3x3(const float *in, int cin, int cout, int s, const float *w, const float *b,
                    float *out) {
    for (int n = 0; n < N; n++)
        for (int co = 0; co < cout; co++)
            for (int y = 0; y < s; y++)
                for (int x = 0; x < s; x++) {
                    double acc = b[co];
                    for (int ci = 0; ci < cin; ci++) {
                        const float *plane = in + ((size_t)n * cin + ci) * s * s;
                        const float *k = w + ((size_t)co * cin + ci) * 9;
                        for (int ky = 0; ky < 3; ky++) {
                            int iy = y + ky - 1;
                            if (iy < 0 || iy >= s) continue;
                            for (int kx = 0; kx < 3; kx++) {
                                int ix = x + kx - 1;
                                if (ix < 0 || ix >= s) continue;
                                acc += (double)plane[iy * s + ix] * k[ky * 3 + kx];
                            }
                        }
                    }
                    out[(((size_t)n * cout + co) * s + y) * s + x] = (float)acc;
                }
}

/* Train-mode BatchNorm of channel c of [N, C, s, s] is bn(x) = (x - mean)*scale + beta, with the
 * mean and the biased variance taken over the batch and both spatial dims and
 * scale = gamma / sqrt(var + eps). Two passes, because the one-pass E[x²] - E[x]² loses digits
 * when the mean is large next to the spread. */
static void bn_channel(const float *x, int channels, int c, int s, float gamma, double *mean_out,
                       double *scale) {
    const size_t plane = (size_t)s * s;
    const double count = (double)N * plane;
    double sum = 0.0;
    for (int n = 0; n < N; n++) {
        const float *p = x + ((size_t)n * channels + c) * plane;
        for (size_t i = 0; i < plane; i++) sum += p[i];
    }
    const double mean = sum / count;
    double sq = 0.0;
    for (int n = 0; n < N; n++) {
        const float *p = x + ((size_t)n * channels + c) * plane;
        for (size_t i = 0; i < plane; i++) sq += (p[i] - mean) * (p[i] - mean);
    }
    *mean_out = mean;
    *scale = gamma / sqrt(sq / count + BN_EPS);
}

static float bn_relu(float v, double mean, double scale, float beta) {
    float y = (float)((v - mean) * scale + beta);
    return y < 0.0f ? 0.0f : y; /* NaN passes, as in torch.relu */
}

void st_free(void *p) { free(p); }

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    cnn_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) return 1;
#define PARAM(field, key, ...) do { \
        const st_tensor *t_ = find_param(params, n_params, key); \
        if (check_f32(t_, key, __VA_ARGS__)) goto fail; \
        ctx->field = t_->data; \
    } while (0)
    PARAM(conv1_w, "conv1.weight", 4, C1, C0, 3, 3);
    PARAM(conv1_b, "conv1.bias", 1, C1, 0, 0, 0);
    PARAM(bn1_w, "bn1.weight", 1, C1, 0, 0, 0);
    PARAM(bn1_b, "bn1.bias", 1, C1, 0, 0, 0);
    PARAM(conv2_w, "conv2.weight", 4, C2, C1, 3, 3);
    PARAM(conv2_b, "conv2.bias", 1, C2, 0, 0, 0);
    PARAM(bn2_w, "bn2.weight", 1, C2, 0, 0, 0);
    PARAM(bn2_b, "bn2.bias", 1, C2, 0, 0, 0);
    PARAM(fc_w, "fc.weight", 2, CLASSES, C2, 0, 0);
    PARAM(fc_b, "fc.bias", 1, CLASSES, 0, 0, 0);
#undef PARAM
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    cnn_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "kernelbench cnn: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 4, N, C0, S0, S0) || check_f32(&out[0], "y0", 2, N, CLASSES, 0, 0))
        return 1;
    const float *x = in[0].data;
    float *y = out[0].data;

    /* stage 1: conv, BatchNorm, ReLU, then the max over each 2x2 window */
    conv3x3(x, C0, C1, S0, ctx->conv1_w, ctx->conv1_b, ctx->conv1);
    for (int c = 0; c < C1; c++) {
        double mean, scale;
        const float beta = ctx->bn1_b[c];
        bn_channel(ctx->conv1, C1, c, S0, ctx->bn1_w[c], &mean, &scale);
        for (int n = 0; n < N; n++) {
            const float *src = ctx->conv1 + ((size_t)n * C1 + c) * S0 * S0;
            float *dst = ctx->pool1 + ((size_t)n * C1 + c) * S1 * S1;
            for (int py = 0; py < S1; py++)
                for (int px = 0; px < S1; px++) {
                    const float *win = src + (2 * py) * S0 + 2 * px;
                    float best = bn_relu(win[0], mean, scale, beta);
                    for (int j = 1; j < 4; j++) {
                        float v = bn_relu(win[(j / 2) * S0 + j % 2], mean, scale, beta);
                        if (v > best || isnan(v)) best = v; /* NaN wins, as in nn.MaxPool2d */
                    }
                    dst[py * S1 + px] = best;
                }
        }
    }

    /* stage 2: conv, BatchNorm, ReLU, then the mean over each whole plane */
    conv3x3(ctx->pool1, C1, C2, S1, ctx->conv2_w, ctx->conv2_b, ctx->conv2);
    for (int c = 0; c < C2; c++) {
        double mean, scale;
        const float beta = ctx->bn2_b[c];
        bn_channel(ctx->conv2, C2, c, S1, ctx->bn2_w[c], &mean, &scale);
        for (int n = 0; n < N; n++) {
            const float *src = ctx->conv2 + ((size_t)n * C2 + c) * S1 * S1;
            double sum = 0.0;
            for (int i = 0; i < S1 * S1; i++) sum += bn_relu(src[i], mean, scale, beta);
            ctx->pooled[n * C2 + c] = (float)(sum / (S1 * S1));
        }
    }

    /* classifier: nn.Linear weight is [classes, features] */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < CLASSES; k++) {
            double acc = ctx->fc_b[k];
            for (int c = 0; c < C2; c++) acc += (double)ctx->pooled[n * C2 + c] * ctx->fc_w[k * C2 + c];
            y[n * CLASSES + k] = (float)acc;
        }
    return 0;
}
