/* Host reference for t4/flash_attention: causal attention forward, bf16 Q, K, V, O of shape
 * [B, H, T, 128], row-major. For every head and query i: s_j = (q_i·k_j)/sqrt(128) for keys
 * j <= i, p_j = exp(s_j - max)/sum, o_i = sum_j p_j v_j, rounded to bf16. Sums in double: the
 * plainest way to be more accurate than any GPU solution. The bf16 conversions are written out
 * (round to nearest even) so the host backend needs no CUDA headers. Meant for the small and
 * hidden sizes; eval is ~1.4e11 multiply-adds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define HEAD_DIM 128

typedef struct attn_ctx {
    int64_t B, H, T;
    double *p;   /* one row of scores / probabilities, T long */
    float *qf;   /* the query row widened, HEAD_DIM long */
    double *acc; /* one output row, HEAD_DIM long */
} attn_ctx;

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

static int tensor_ok(const st_tensor *t, const attn_ctx *c) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
           t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL;
}

void st_free(void *ctx) {
    attn_ctx *c = ctx;
    if (c == NULL) return;
    free(c->p);
    free(c->qf);
    free(c->acc);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t B, H, T;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "B", &B) || cfg_get(cfg, "H", &H) || cfg_get(cfg, "T", &T)) return 1;
    if (B < 1 || H < 1 || T < 1) return 1;
    attn_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->B = B;
    c->H = H;
    c->T = T;
    c->p = malloc((size_t)T * sizeof(double));
    c->qf = malloc(HEAD_DIM * sizeof(float));
    c->acc = malloc(HEAD_DIM * sizeof(double));
    if (c->p == NULL || c->qf == NULL || c->acc == NULL) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    attn_ctx *c = ctx;
    if (c == NULL || n_in != 3 || n_out != 1) return 1;
    for (int i = 0; i < 3; i++)
        if (!tensor_ok(&in[i], c)) return 1;
    if (!tensor_ok(&out[0], c)) return 1;
    const int64_t T = c->T, heads = c->B * c->H;
    const double scale = 1.0 / sqrt((double)HEAD_DIM);

    for (int64_t h = 0; h < heads; h++) {
        const uint16_t *q = (const uint16_t *)in[0].data + h * T * HEAD_DIM;
        const uint16_t *k = (const uint16_t *)in[1].data + h * T * HEAD_DIM;
        const uint16_t *v = (const uint16_t *)in[2].data + h * T * HEAD_DIM;
        uint16_t *o = (uint16_t *)out[0].data + h * T * HEAD_DIM;
        for (int64_t i = 0; i < T; i++) {
            for (int d = 0; d < HEAD_DIM; d++) c->qf[d] = bf16_to_float(q[i * HEAD_DIM + d]);
            double m = -INFINITY;
            for (int64_t j = 0; j <= i; j++) {  /* causal: keys up to and including i */
                double s = 0.0;
                for (int d = 0; d < HEAD_DIM; d++)
                    s += (double)c->qf[d] * bf16_to_float(k[j * HEAD_DIM + d]);
                c->p[j] = s * scale;
                if (c->p[j] > m) m = c->p[j];
            }
            double sum = 0.0;
            for (int64_t j = 0; j <= i; j++) {
                c->p[j] = exp(c->p[j] - m);
                sum += c->p[j];
            }
            for (int d = 0; d < HEAD_DIM; d++) c->acc[d] = 0.0;
            for (int64_t j = 0; j <= i; j++)
                for (int d = 0; d < HEAD_DIM; d++)
                    c->acc[d] += c->p[j] * bf16_to_float(v[j * HEAD_DIM + d]);
            for (int d = 0; d < HEAD_DIM; d++)
                o[i * HEAD_DIM + d] = float_to_bf16((float)(c->acc[d] / sum));
        }
    }
    return 0;
}
