/* Host reference for t1/scan: inclusive prefix sum of x[n] (i32), one running sum in index order.
 * The task's values keep every prefix within int32, so the running sum never overflows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct scan_ctx {
    int64_t n;
} scan_ctx;

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
    int64_t n;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || n < 1) return 1;
    scan_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const scan_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->n)) return 1;
    const int32_t *x = in[0].data;
    int32_t *y = out[0].data;
    int64_t sum = 0;
    for (int64_t i = 0; i < c->n; i++) {
        sum += x[i];
        y[i] = (int32_t)sum;
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
