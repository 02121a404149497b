/* Host expert for t2/moe_router: per token the fp32 router logits, softmax, top 2 experts (ties:
 * lower index) and renormalised gates, then the two chosen experts' products (each rounded to
 * bf16) added in expert-index order and rounded to bf16, as the reference computes them. The
 * reference multiplies each token by its experts' weights one token at a time, widening every
 * bf16 weight for every token. Here the weights (router and experts) are widened to float once in
 * st_init; all tokens are routed first, then each expert, in index order, processes the tokens
 * that chose it 4 at a time, each weight row loaded once for the 4 and added by vectorised
 * axpys (blocks of 16, restrict parameters). Every output sums over c in order and adds the two
 * experts in index order into an fp32 row, exactly the reference's float operations. */
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

#define TILE 4

typedef struct {
    int64_t T, C, F, E;
    float *Wr, *W;      /* router [C, E] and experts [E, C, F], widened once */
    float *prod;        /* TILE rows, F long */
    float *acc;         /* [T, F]: the fp32 output rows */
    int32_t *sel;       /* [T, 2]: chosen experts, lower index first */
    float *gate;        /* [T, 2]: their gates */
    int32_t *list;      /* [T]: tokens of one expert; negative = -(t+1) for slot 1 */
} moe_ctx;

/* y[i] += a * x[i]; blocks of 16 with restrict parameters so -O2 vectorises it */
static void axpy(float *restrict y, const float *restrict x, float a, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[i];
}

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
    free(ctx->Wr);
    free(ctx->W);
    free(ctx->prod);
    free(ctx->acc);
    free(ctx->sel);
    free(ctx->gate);
    free(ctx->list);
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
    if (ctx->T > INT32_MAX / 2) goto fail;
    if (n_params != 2 || !tensor_ok(&params[0], 2, ctx->C, ctx->E, 0) ||
        !tensor_ok(&params[1], 3, ctx->E, ctx->C, ctx->F)) {
        fprintf(stderr, "moe_router host expert: expected params Wr [C, E] and W [E, C, F] in bf16\n");
        goto fail;
    }
    const int64_t T = ctx->T, C = ctx->C, F = ctx->F, E = ctx->E;
    ctx->Wr = malloc(sizeof(float) * (size_t)(C * E));
    ctx->W = malloc(sizeof(float) * (size_t)(E * C * F));
    ctx->prod = malloc(sizeof(float) * (size_t)(TILE * F));
    ctx->acc = malloc(sizeof(float) * (size_t)(T * F));
    ctx->sel = malloc(sizeof(int32_t) * (size_t)(2 * T));
    ctx->gate = malloc(sizeof(float) * (size_t)(2 * T));
    ctx->list = malloc(sizeof(int32_t) * (size_t)T);
    if (!ctx->Wr || !ctx->W || !ctx->prod || !ctx->acc || !ctx->sel || !ctx->gate || !ctx->list)
        goto fail;
    const uint16_t *wr = params[0].data, *w = params[1].data;
    for (int64_t i = 0; i < C * E; i++) ctx->Wr[i] = bf16_to_f32(wr[i]);
    for (int64_t i = 0; i < E * C * F; i++) ctx->W[i] = bf16_to_f32(w[i]);
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

    /* route every token: the reference's float operations, on the pre-widened router */
    for (int64_t t = 0; t < T; t++) {
        const uint16_t *xt = x + t * C;
        float l[MAX_EXPERTS] = {0}, pr[MAX_EXPERTS] = {0};
        for (int64_t c = 0; c < C; c++) {
            const float xv = bf16_to_f32(xt[c]);
            const float *wr = ctx->Wr + c * E;
            for (int64_t e = 0; e < E; e++) l[e] += xv * wr[e];
        }
        float m = l[0], sum = 0.0f;
        for (int64_t e = 1; e < E; e++) m = fmaxf(m, l[e]);
        for (int64_t e = 0; e < E; e++) {
            pr[e] = expf(l[e] - m);
            sum += pr[e];
        }
        for (int64_t e = 0; e < E; e++) pr[e] /= sum;
        int64_t a = 0;
        for (int64_t e = 1; e < E; e++)
            if (l[e] > l[a]) a = e;
        int64_t b = a == 0 ? 1 : 0;
        for (int64_t e = 0; e < E; e++)
            if (e != a && l[e] > l[b]) b = e;
        const float ga = pr[a] / (pr[a] + pr[b]), gb = pr[b] / (pr[a] + pr[b]);
        ctx->sel[2 * t] = (int32_t)(a < b ? a : b);
        ctx->sel[2 * t + 1] = (int32_t)(a < b ? b : a);
        ctx->gate[2 * t] = a < b ? ga : gb;
        ctx->gate[2 * t + 1] = a < b ? gb : ga;
    }

    /* experts in index order: a token meets its lower expert (slot 0) first, as in the
     * reference's sum; slot 0 starts the row from 0, slot 1 adds to it */
    for (int64_t e = 0; e < E; e++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++) {
            if (ctx->sel[2 * t] == e) ctx->list[n++] = (int32_t)t;
            else if (ctx->sel[2 * t + 1] == e) ctx->list[n++] = (int32_t)(-t - 1);
        }
        const float *We = ctx->W + e * C * F;
        for (int64_t i0 = 0; i0 < n; i0 += TILE) {
            const int64_t nt = n - i0 < TILE ? n - i0 : TILE;
            int64_t tok[TILE];
            for (int64_t u = 0; u < nt; u++) {
                const int32_t v = ctx->list[i0 + u];
                tok[u] = v >= 0 ? v : -(int64_t)v - 1;
            }
            for (int64_t j = 0; j < nt * F; j++) ctx->prod[j] = 0.0f;
            for (int64_t c = 0; c < C; c++)
                for (int64_t u = 0; u < nt; u++)
                    axpy(ctx->prod + u * F, We + c * F, bf16_to_f32(x[tok[u] * C + c]), F);
            for (int64_t u = 0; u < nt; u++) {
                const int slot = ctx->list[i0 + u] >= 0 ? 0 : 1;
                const float g = ctx->gate[2 * tok[u] + slot];
                const float *pu = ctx->prod + u * F;
                float *acc = ctx->acc + tok[u] * F;
                if (slot == 0)
                    for (int64_t f = 0; f < F; f++) acc[f] = 0.0f + g * round_bf16(pu[f]);
                else
                    for (int64_t f = 0; f < F; f++) acc[f] += g * round_bf16(pu[f]);
            }
        }
    }
    for (int64_t i = 0; i < T * F; i++) y[i] = f32_to_bf16(ctx->acc[i]);
    return 0;
}
