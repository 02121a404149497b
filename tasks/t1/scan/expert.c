/* Host expert for t1/scan: inclusive prefix sum of x[n] (i32), wrapping like int32. The
 * reference carries an int64 sum and narrows every element; this one carries the sum as a
 * uint32 (the same bits, with wraparound defined), through restrict pointers, and unrolls by 4
 * so each step is one add and one store with no sign-extension or narrowing on the chain. */
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
    const uint32_t *restrict x = in[0].data;
    uint32_t *restrict y = out[0].data;
    const int64_t n = c->n;
    uint32_t sum = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t a = x[i], b = a + x[i + 1], d = b + x[i + 2], e = d + x[i + 3];
        y[i] = sum + a;
        y[i + 1] = sum + b;
        y[i + 2] = sum + d;
        y[i + 3] = sum + e;
        sum += e;
    }
    for (; i < n; i++) {
        sum += x[i];
        y[i] = sum;
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
