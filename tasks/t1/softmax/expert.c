/* Host expert for t1/softmax: row-wise softmax of x[rows, cols] (f32) into y with the online
 * recurrence (running max, sum rescaled whenever the max grows), so each row is read once for
 * its statistics and once more to write y, instead of the reference's three passes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CHUNK 256

typedef struct softmax_ctx {
    int64_t rows, cols;
} softmax_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t rows, int64_t cols) {
    return t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
}

/* Fold a part with maximum m2 and sum s2 into (*m, *s). The sum is rescaled when the maximum
 * grows; parts that are all -inf (masked) add nothing, and must not compute -inf - -inf. */
static void online_merge(float *m, float *s, float m2, float s2) {
    const float mn = fmaxf(*m, m2);
    if (mn == -INFINITY) return;
    *s = *s * expf(*m - mn) + s2 * expf(m2 - mn);
    *m = mn;
}

/* Fold one value in; cheaper than online_merge(m, s, v, 1) as it needs one expf, not two. */
static void online_add(float *m, float *s, float v) {
    if (v > *m) {
        *s = *s * expf(*m - v) + 1.0f;
        *m = v;
    } else if (*m != -INFINITY) {
        *s += expf(v - *m);
    }
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1) return 1;
    softmax_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const softmax_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->rows, c->cols) || !tensor_ok(&out[0], c->rows, c->cols)) return 1;

    const int64_t cols = c->cols;
    for (int64_t r = 0; r < c->rows; r++) {
        const float *x = (const float *)in[0].data + r * cols;
        float *y = (float *)out[0].data + r * cols;

        /* (max, sum): sum of exp(x[j] - max) over the columns seen so far. Each chunk gets
         * its own pair, merged into the row's, so no accumulator grows large enough to round
         * the many tiny terms away (a single one is off by ~1e-4 relative at 65536 columns). */
        float max = -INFINITY, sum = 0.0f;
        for (int64_t j0 = 0; j0 < cols; j0 += CHUNK) {
            const int64_t j1 = j0 + CHUNK < cols ? j0 + CHUNK : cols;
            float cmax = -INFINITY, csum = 0.0f;
            for (int64_t j = j0; j < j1; j++) online_add(&cmax, &csum, x[j]);
            online_merge(&max, &sum, cmax, csum);
        }

        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < cols; j++) y[j] = expf(x[j] - max) * inv;
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
