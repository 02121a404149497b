/* Host reference for t1/topk: for each row of x[rows, cols] (f32), sort the columns by value,
 * largest first, equal values by smaller column, and keep the first k. Plain qsort of one 64-bit
 * rank key per element (an order-preserving image of the float's bits above the inverted
 * column), so the comparison is a single integer compare and the order is total. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define K_MAX 1024

typedef struct topk_ctx {
    int64_t rows, cols, k;
    uint64_t *keys;  /* [cols] */
} topk_ctx;

/* Negative floats order backwards as unsigned bits: flip them all; positive ones get the sign bit
 * set so they rank above every negative. -0.0 first becomes +0.0. */
static uint64_t rank_key(float v, int64_t col) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (u == 0x80000000u) u = 0u;
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)u << 32) | (0xffffffffu - (uint32_t)col);
}

static int larger_first(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y ? 1 : 0;
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

static int tensor_ok(const st_tensor *t, st_dtype dtype, int64_t d0, int64_t d1) {
    return t->dtype == dtype && t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->data != NULL;
}

void st_free(void *ctx) {
    topk_ctx *c = ctx;
    if (c == NULL) return;
    free(c->keys);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols, k;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols) || cfg_get(cfg, "k", &k))
        return 1;
    if (rows < 1 || cols < 1 || cols > INT32_MAX || k < 1 || k > cols || k > K_MAX) return 1;
    topk_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    c->k = k;
    c->keys = malloc((size_t)cols * sizeof(*c->keys));
    if (c->keys == NULL) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const topk_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 2) return 1;
    if (!tensor_ok(&in[0], ST_F32, c->rows, c->cols) ||
        !tensor_ok(&out[0], ST_F32, c->rows, c->k) || !tensor_ok(&out[1], ST_I32, c->rows, c->k))
        return 1;
    for (int64_t r = 0; r < c->rows; r++) {
        const float *x = (const float *)in[0].data + r * c->cols;
        float *values = (float *)out[0].data + r * c->k;
        int32_t *indices = (int32_t *)out[1].data + r * c->k;
        for (int64_t j = 0; j < c->cols; j++) c->keys[j] = rank_key(x[j], j);
        qsort(c->keys, (size_t)c->cols, sizeof(*c->keys), larger_first);
        for (int64_t i = 0; i < c->k; i++) {
            const int64_t col = 0xffffffffu - (uint32_t)c->keys[i];
            values[i] = x[col];
            indices[i] = (int32_t)col;
        }
    }
    return 0;
}
