/* Host reference for t2/moe_router: per token, fp32 router logits, softmax, the top 2 experts
 * (ties: lower index), renormalised gates, then the two chosen experts' products (each rounded to
 * bf16, like the GPU reference's temporary) added into an fp32 row in expert-index order and
 * rounded to bf16. The GPU reference adds zero-weighted products of the other experts too, which
 * changes nothing, so this loop reproduces its numbers up to fp32 summation order while doing
 * only the useful work. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define MAX_EXPERTS 64

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
    int64_t T, C, F, E;
    const uint16_t *Wr, *W; /* owned by the harness, live until st_free */
    float *prod, *acc;      /* one row each, F long */
} moe_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "moe_router host reference: size '%s' missing from the config\n", name);
    return 1;
}

/* dims beyond ndim are ignored */
static int tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    return t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim < 2 || t->shape[1] == d1) && (ndim < 3 || t->shape[2] == d2) && t->data != NULL;
}

void st_free(void *p) {
    moe_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->prod);
    free(ctx->acc);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    moe_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "F", &ctx->F) ||
        cfg_get(cfg, "E", &ctx->E))
        goto fail;
    if (ctx->T <= 0 || ctx->C <= 0 || ctx->F <= 0 || ctx->E < 2 || ctx->E > MAX_EXPERTS) goto fail;
    if (n_params != 2 || !tensor_ok(&params[0], 2, ctx->C, ctx->E, 0) ||
        !tensor_ok(&params[1], 3, ctx->E, ctx->C, ctx->F)) {
        fprintf(stderr, "moe_router host reference: expected params Wr [C, E] and W [E, C, F] in bf16\n");
        goto fail;
    }
    ctx->Wr = params[0].data;
    ctx->W = params[1].data;
    ctx->prod = malloc(sizeof(float) * (size_t)ctx->F);
    ctx->acc = malloc(sizeof(float) * (size_t)ctx->F);
    if (!ctx->prod || !ctx->acc) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    moe_ctx *ctx = p;
    if (!ctx || n_in != 1 || n_out != 1) return 1;
    const int64_t T = ctx->T, C = ctx->C, F = ctx->F, E = ctx->E;
    if (!tensor_ok(&in[0], 2, T, C, 0) || !tensor_ok(&out[0], 2, T, F, 0)) return 1;
    const uint16_t *x = in[0].data;
    uint16_t *y = out[0].data;

    for (int64_t t = 0; t < T; t++) {
        const uint16_t *xt = x + t * C;
        /* router: exact in fp32 for this task's inputs, whatever the order */
        float l[MAX_EXPERTS] = {0}, pr[MAX_EXPERTS] = {0};
        for (int64_t e = 0; e < E; e++) l[e] = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const float xv = bf16_to_f32(xt[c]);
            for (int64_t e = 0; e < E; e++) l[e] += xv * bf16_to_f32(ctx->Wr[c * E + e]);
        }
        float m = l[0], sum = 0.0f;
        for (int64_t e = 1; e < E; e++) m = fmaxf(m, l[e]);
        for (int64_t e = 0; e < E; e++) {
            pr[e] = expf(l[e] - m);
            sum += pr[e];
        }
        for (int64_t e = 0; e < E; e++) pr[e] /= sum;
        /* strict comparisons keep the lower index on equal values */
        int64_t a = 0;
        for (int64_t e = 1; e < E; e++)
            if (l[e] > l[a]) a = e;
        int64_t b = a == 0 ? 1 : 0;
        for (int64_t e = 0; e < E; e++)
            if (e != a && l[e] > l[b]) b = e;
        const float ga = pr[a] / (pr[a] + pr[b]), gb = pr[b] / (pr[a] + pr[b]);

        /* the chosen experts in index order, as the dense sum over e meets them */
        const int64_t sel[2] = {a < b ? a : b, a < b ? b : a};
        const float gate[2] = {a < b ? ga : gb, a < b ? gb : ga};
        for (int64_t f = 0; f < F; f++) ctx->acc[f] = 0.0f;
        for (int s = 0; s < 2; s++) {
            const uint16_t *We = ctx->W + sel[s] * C * F;
            for (int64_t f = 0; f < F; f++) ctx->prod[f] = 0.0f;
            for (int64_t c = 0; c < C; c++) {
                const float xv = bf16_to_f32(xt[c]);
                for (int64_t f = 0; f < F; f++) ctx->prod[f] += xv * bf16_to_f32(We[c * F + f]);
            }
            for (int64_t f = 0; f < F; f++) ctx->acc[f] += gate[s] * round_bf16(ctx->prod[f]);
        }
        for (int64_t f = 0; f < F; f++) y[t * F + f] = f32_to_bf16(ctx->acc[f]);
    }
    return 0;
}
