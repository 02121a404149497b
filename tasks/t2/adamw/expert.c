/* Host expert for t2/adamw: one AdamW step. The reference makes six passes over memory (decay p,
 * update m, update v, bias-correct m and v into two [n] temporaries, apply the step), reading
 * and writing each array several times. Here it is one fused pass: each element's p, g, m, v are
 * read once and p_new, m_new, v_new written once, with no temporaries; the per-element float
 * operations and their order are the reference's, so the results match it bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define LR 1e-3
#define BETA1 0.9
#define BETA2 0.999
#define EPS 1e-8
#define WEIGHT_DECAY 0.01

typedef struct {
    int64_t n, t;
    float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc1, bc2, lr, eps;
    float *m_hat, *v_hat; /* [n] temporaries */
} adamw_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "adamw host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == n && t->data != NULL;
    if (!ok)
        fprintf(stderr, "adamw host reference: %s: expected f32 of shape [%lld]\n", what, (long long)n);
    return !ok;
}

void st_free(void *p) {
    adamw_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->m_hat);
    free(ctx->v_hat);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    adamw_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "n", &ctx->n) || cfg_get(cfg, "t", &ctx->t)) goto fail;
    if (ctx->n < 1 || ctx->t < 1 || n_params != 0) {
        fprintf(stderr, "adamw host reference: bad sizes or params (n=%lld t=%lld, %d params)\n",
                (long long)ctx->n, (long long)ctx->t, n_params);
        goto fail;
    }
    ctx->decay = (float)(1.0 - LR * WEIGHT_DECAY);
    ctx->beta1 = (float)BETA1;
    ctx->one_minus_beta1 = (float)(1.0 - BETA1);
    ctx->beta2 = (float)BETA2;
    ctx->one_minus_beta2 = (float)(1.0 - BETA2);
    ctx->bc1 = (float)(1.0 - pow(BETA1, (double)ctx->t));
    ctx->bc2 = (float)(1.0 - pow(BETA2, (double)ctx->t));
    ctx->lr = (float)LR;
    ctx->eps = (float)EPS;
    ctx->m_hat = malloc(sizeof(float) * (size_t)ctx->n);
    ctx->v_hat = malloc(sizeof(float) * (size_t)ctx->n);
    if (!ctx->m_hat || !ctx->v_hat) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    adamw_ctx *ctx = p;
    if (n_in != 4 || n_out != 3) {
        fprintf(stderr, "adamw host expert: expected 4 inputs and 3 outputs, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    const int64_t n = ctx->n;
    if (check_vec(&in[0], "p", n) || check_vec(&in[1], "g", n) || check_vec(&in[2], "m", n) ||
        check_vec(&in[3], "v", n) || check_vec(&out[0], "p_new", n) ||
        check_vec(&out[1], "m_new", n) || check_vec(&out[2], "v_new", n))
        return 1;
    const float *restrict P = in[0].data, *restrict G = in[1].data, *restrict M = in[2].data,
                          *restrict V = in[3].data;
    float *restrict P_new = out[0].data, *restrict M_new = out[1].data,
                   *restrict V_new = out[2].data;
    const float decay = ctx->decay, beta1 = ctx->beta1, omb1 = ctx->one_minus_beta1,
                beta2 = ctx->beta2, omb2 = ctx->one_minus_beta2, bc1 = ctx->bc1, bc2 = ctx->bc2,
                lr = ctx->lr, eps = ctx->eps;
    for (int64_t i = 0; i < n; i++) {
        const float g = G[i];
        const float m = beta1 * M[i] + omb1 * g;
        const float v = beta2 * V[i] + omb2 * g * g;
        M_new[i] = m;
        V_new[i] = v;
        const float m_hat = m / bc1, v_hat = v / bc2;
        P_new[i] = P[i] * decay - lr * m_hat / (sqrtf(v_hat) + eps);
    }
    return 0;
}
