/* Host reference for t1/layernorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the rows
 * of x[rows, cols] (f32), in the plain passes an eager framework makes (mean, variance as the
 * mean squared deviation, normalise). The row sums run in double, so the host backend has a
 * baseline whose own error is far below the tolerance at any width. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define EPS 1e-5

typedef struct ln_ctx {
    int64_t rows, cols;
    const float *gamma, *beta;
} ln_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 2) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1) return 1;
    if (!tensor_ok(&params[0], 1, cols, 0) || !tensor_ok(&params[1], 1, cols, 0)) return 1;
    ln_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    c->gamma = params[0].data;
    c->beta = params[1].data;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const ln_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], 2, c->rows, c->cols) || !tensor_ok(&out[0], 2, c->rows, c->cols))
        return 1;

    const int64_t cols = c->cols;
    for (int64_t r = 0; r < c->rows; r++) {
        const float *x = (const float *)in[0].data + r * cols;
        float *y = (float *)out[0].data + r * cols;

        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++) sum += x[j];
        const double mean = sum / (double)cols;

        double sq = 0.0;
        for (int64_t j = 0; j < cols; j++) sq += (x[j] - mean) * (x[j] - mean);
        const double rstd = 1.0 / sqrt(sq / (double)cols + EPS);

        for (int64_t j = 0; j < cols; j++)
            y[j] = (float)((x[j] - mean) * rstd * c->gamma[j] + c->beta[j]);
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
