/* Host expert for t1/transpose: out[c, r] = in[r, c] for an f32 matrix in [rows, cols], written
 * to out [cols, rows], in 32 x 32 blocks so that the 32 output rows a block writes and the 32
 * input rows it reads stay in cache while it works, instead of striding over all of memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define BLOCK 32

typedef struct transpose_ctx {
    int64_t rows, cols;
} transpose_ctx;

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

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1) return 1;
    transpose_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const transpose_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    const int64_t rows = c->rows, cols = c->cols;
    if (!tensor_ok(&in[0], rows, cols) || !tensor_ok(&out[0], cols, rows)) return 1;
    const float *x = in[0].data;
    float *y = out[0].data;

    for (int64_t r0 = 0; r0 < rows; r0 += BLOCK) {
        const int64_t r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
        for (int64_t c0 = 0; c0 < cols; c0 += BLOCK) {
            const int64_t c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
            for (int64_t col = c0; col < c1; col++)
                for (int64_t r = r0; r < r1; r++)
                    y[col * rows + r] = x[r * cols + col];
        }
    }
    return 0;
}

void st_free(void *ctx) {
    free(ctx);
}
