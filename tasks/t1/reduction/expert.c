/* Host expert for t1/reduction: the sum of x[n] (f32). The reference adds every element into one
 * double in index order, a serial chain of dependent double adds. Here each block of 1024
 * elements is summed into 16 independent float lanes (which the compiler turns into SIMD adds,
 * and whose chains of at most 64 additions keep the float error far below the 1e-4 tolerance);
 * the block partials are then added in double in a fixed order, so the result is deterministic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct red_ctx {
    int64_t n;
} red_ctx;

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
    return t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
}

#define BLOCK 1024
#define LANES 16

static float block_sum(const float *restrict x, int64_t len) {
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += x[i + l];
    for (; i < len; i++) acc[0] += x[i];
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t n;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || n < 1) return 1;
    red_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const red_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], 1)) return 1;
    const float *x = in[0].data;
    double sum = 0.0;
    for (int64_t i = 0; i < c->n; i += BLOCK) {
        const int64_t len = c->n - i < BLOCK ? c->n - i : BLOCK;
        sum += block_sum(x + i, len);
    }
    ((float *)out[0].data)[0] = (float)sum;
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
