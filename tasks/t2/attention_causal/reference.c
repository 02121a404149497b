/* Host reference for t2/attention_causal: for each head and query, fp32 scores against the keys
 * up to the query (scaled by 1/8 after the dot product, as the GPU reference's GEMM alpha does),
 * a max-subtracted softmax, probabilities rounded to bf16 (as the GPU reference stores them) and
 * the fp32 weighted sum of v rows, rounded to bf16. */
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
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
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
    float *s = ctx->s;

    for (int64_t bh = 0; bh < ctx->B * ctx->H; bh++) {
        const uint16_t *q = (const uint16_t *)in[0].data + bh * head;
        const uint16_t *k = (const uint16_t *)in[1].data + bh * head;
        const uint16_t *v = (const uint16_t *)in[2].data + bh * head;
        uint16_t *o = (uint16_t *)out[0].data + bh * head;
        for (int64_t n = 0; n < head; n++) {
            ctx->qf[n] = bf16_to_f32(q[n]);
            ctx->kf[n] = bf16_to_f32(k[n]);
            ctx->vf[n] = bf16_to_f32(v[n]);
        }
        for (int64_t i = 0; i < T; i++) {
            const float *qi = ctx->qf + i * HEAD_DIM;
            float m = -INFINITY;
            for (int64_t j = 0; j <= i; j++) {
                const float *kj = ctx->kf + j * HEAD_DIM;
                float dot = 0.0f;
                for (int d = 0; d < HEAD_DIM; d++) dot += qi[d] * kj[d];
                s[j] = dot * scale;
                m = fmaxf(m, s[j]);
            }
            float sum = 0.0f;
            for (int64_t j = 0; j <= i; j++) sum += expf(s[j] - m);
            for (int64_t j = 0; j <= i; j++) s[j] = round_bf16(expf(s[j] - m) / sum);
            float acc[HEAD_DIM] = {0};
            for (int64_t j = 0; j <= i; j++) {
                const float *vj = ctx->vf + j * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; d++) acc[d] += s[j] * vj[d];
            }
            for (int d = 0; d < HEAD_DIM; d++) o[i * HEAD_DIM + d] = f32_to_bf16(acc[d]);
        }
    }
    return 0;
}
