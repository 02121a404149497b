/* Host reference for t1/histogram: counts[b] = #{i : x[i] == b} over x[n] (i32), values outside
 * [0, bins) ignored; one pass, one counter per bin. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct hist_ctx {
    int64_t n, bins;
} hist_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t len) {
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t n, bins;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "bins", &bins) || n < 1 || bins < 1) return 1;
    hist_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->bins = bins;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const hist_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->bins)) return 1;
    const int32_t *x = in[0].data;
    int32_t *counts = out[0].data;
    memset(counts, 0, (size_t)c->bins * sizeof(int32_t));
    for (int64_t i = 0; i < c->n; i++)
        if (x[i] >= 0 && x[i] < c->bins) counts[x[i]]++;
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
