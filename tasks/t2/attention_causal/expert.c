/* Host expert for t2/attention_causal: o = softmax(q·kᵀ / 8, causal) · v per (batch, head), fp32
 * math with bf16 probabilities, as the reference computes it. The reference takes each q·k dot
 * product through one serial float chain of 64, computes expf twice per score through scalar
 * libm calls, and divides each probability by the sum. Here each dot product runs over 16
 * independent lanes (SIMD), the max over 16 lanes, exp once per score through an inline
 * range-reduced polynomial over blocks of 16 that vectorises (see exp16), the normalisation is a
 * multiply by 1/sum, and the bf16 rounding is branch-free. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define HEAD_DIM 64

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

static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

typedef struct {
    int64_t B, H, T;
    float *s;          /* one row of scores, then probabilities, T long */
    float *qf, *kf, *vf; /* one head of q, k, v widened to fp32 */
} attn_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "attention_causal host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int tensor_ok(const st_tensor *t, const attn_ctx *c) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
           t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL;
}

void st_free(void *p) {
    attn_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->s);
    free(ctx->qf);
    free(ctx->kf);
    free(ctx->vf);
    free(ctx);
}

/* exp(v[l]) for 16 values v[l] <= 0, -inf included (inputs below -87 give about 1e-38 instead of a smaller
 * number or 0, far below anything these sums resolve): Cody-Waite reduction by ln 2 to
 * |r| <= 0.35, a degree-7 Taylor polynomial (truncation error 5e-9 relative) and the power of
 * two built in the exponent bits. Fixed-length loops of plain float/int arithmetic, so the
 * compiler turns them into SIMD code, unlike calls to libm's expf. About 2 ulp. */
static void exp16(const float *restrict v, float *restrict out) {
    for (int l = 0; l < 16; l++) {
        /* clamp to -87 on the bits: for v <= 0 a larger magnitude is a larger unsigned */
        uint32_t u;
        memcpy(&u, &v[l], sizeof u);
        u = u > 0xc2ae0000u ? 0xc2ae0000u : u;
        float t;
        memcpy(&t, &u, sizeof t);
        const int32_t n = (int32_t)(t * 1.44269504088896341f - 0.5f);
        const float nf = (float)n;
        const float r = (t - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;
        float p = 1.0f / 5040.0f;
        p = p * r + 1.0f / 720.0f;
        p = p * r + 1.0f / 120.0f;
        p = p * r + 1.0f / 24.0f;
        p = p * r + 1.0f / 6.0f;
        p = p * r + 0.5f;
        p = p * r + 1.0f;
        p = p * r + 1.0f;
        const uint32_t bits = (uint32_t)(n + 127) << 23;
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        out[l] = p * scale;
    }
}

static float dot64(const float *restrict a, const float *restrict b) {
    float lane[16] = {0};
    for (int d0 = 0; d0 < HEAD_DIM; d0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[d0 + l] * b[d0 + l];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params;
    (void)stream;
    *out_ctx = NULL;
    attn_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "T", &ctx->T)) goto fail;
    if (ctx->B <= 0 || ctx->H <= 0 || ctx->T <= 0 || n_params != 0) goto fail;
    const size_t head = (size_t)ctx->T * HEAD_DIM;
    ctx->s = malloc(sizeof(float) * (size_t)ctx->T);
    ctx->qf = malloc(sizeof(float) * head);
    ctx->kf = malloc(sizeof(float) * head);
    ctx->vf = malloc(sizeof(float) * head);
    if (!ctx->s || !ctx->qf || !ctx->kf || !ctx->vf) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    attn_ctx *ctx = p;
    if (!ctx || n_in != 3 || n_out != 1) return 1;
    for (int i = 0; i < 3; i++)
        if (!tensor_ok(&in[i], ctx)) return 1;
    if (!tensor_ok(&out[0], ctx)) return 1;
    const int64_t T = ctx->T, head = T * HEAD_DIM;
    const float scale = 1.0f / sqrtf((float)HEAD_DIM);
    float *restrict s = ctx->s;
    float *restrict qf = ctx->qf, *restrict kf = ctx->kf, *restrict vf = ctx->vf;

    for (int64_t bh = 0; bh < ctx->B * ctx->H; bh++) {
        const uint16_t *restrict q = (const uint16_t *)in[0].data + bh * head;
        const uint16_t *restrict k = (const uint16_t *)in[1].data + bh * head;
        const uint16_t *restrict v = (const uint16_t *)in[2].data + bh * head;
        uint16_t *restrict o = (uint16_t *)out[0].data + bh * head;
        for (int64_t n = 0; n < head; n++) {
            qf[n] = bf16_to_f32(q[n]);
            kf[n] = bf16_to_f32(k[n]);
            vf[n] = bf16_to_f32(v[n]);
        }
        for (int64_t i = 0; i < T; i++) {
            const float *qi = qf + i * HEAD_DIM;
            const int64_t n = i + 1;
            for (int64_t j = 0; j < n; j++) s[j] = dot64(qi, kf + j * HEAD_DIM) * scale;

            float lane[16], t[16], e[16];
            int64_t j = 0;
            for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
            float m = -INFINITY;
            for (int l = 0; l < 16; l++) m = lane[l] > m ? lane[l] : m;
            for (; j < n; j++) m = fmaxf(m, s[j]);

            for (int l = 0; l < 16; l++) lane[l] = 0.0f;
            for (j = 0; j + 16 <= n; j += 16) {
                for (int l = 0; l < 16; l++) t[l] = s[j + l] - m;
                exp16(t, e);
                for (int l = 0; l < 16; l++) {
                    s[j + l] = e[l];
                    lane[l] += e[l];
                }
            }
            float sum = 0.0f;
            if (j < n) {
                const int64_t rest = n - j;
                for (int l = 0; l < 16; l++) t[l] = -INFINITY;
                for (int64_t l = 0; l < rest; l++) t[l] = s[j + l] - m;
                exp16(t, e);
                for (int64_t l = 0; l < rest; l++) {
                    s[j + l] = e[l];
                    sum += e[l];
                }
            }
            for (int w = 8; w > 0; w /= 2)
                for (int l = 0; l < w; l++) lane[l] += lane[l + w];
            sum += lane[0];
            const float inv = 1.0f / sum;
            for (j = 0; j < n; j++) s[j] = round_bf16(s[j] * inv);

            float acc[HEAD_DIM] = {0};
            for (j = 0; j < n; j++) {
                const float *restrict vj = vf + j * HEAD_DIM;
                const float pj = s[j];
                for (int d = 0; d < HEAD_DIM; d++) acc[d] += pj * vj[d];
            }
            for (int d = 0; d < HEAD_DIM; d++) o[i * HEAD_DIM + d] = f32_to_bf16(acc[d]);
        }
    }
    return 0;
}
