/* Host expert for t1/rmsnorm: rstd = 1 / sqrt(mean(x^2) + eps) per row of x[rows, cols] (bf16)
 * and y = bf16((x * rstd) * w). The reference converts each bf16 to double and sums serially,
 * and converts w from bf16 on every element of every row. Here w is widened to float once in
 * st_init, each row is widened once into a float scratch row, the squares are summed in float
 * over 16 independent lanes per block of 1024 (SIMD, short chains; block partials in double),
 * and the output pass is branch-free float math plus round-to-nearest-even, which vectorises. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define EPS 1e-6

#define BLOCK 1024
#define LANES 16

typedef struct rms_ctx {
    int64_t rows, cols;
    float *w;   /* w widened to float, once */
    float *row; /* scratch: the current row widened to float */
} rms_ctx;

static float bf16_to_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* round to nearest, ties to even; the values here are finite */
static uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
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

static int tensor_ok(const st_tensor *t, st_dtype dtype, int ndim, int64_t d0, int64_t d1) {
    return t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 &&
           (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
}

/* The two elementwise passes, in blocks of 16 with restrict parameters so -O2 vectorises them */
static void widen(float *restrict xf, const uint16_t *restrict x, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) xf[j + l] = bf16_to_float(x[j + l]);
    for (; j < n; j++) xf[j] = bf16_to_float(x[j]);
}

static void rms_out(uint16_t *restrict y, const float *restrict xf, const float *restrict w,
                    float rstd, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) y[j + l] = float_to_bf16((xf[j + l] * rstd) * w[j + l]);
    for (; j < n; j++) y[j] = float_to_bf16((xf[j] * rstd) * w[j]);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 1) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1) return 1;
    if (!tensor_ok(&params[0], ST_BF16, 1, cols, 0)) return 1;
    rms_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    c->w = malloc((size_t)cols * sizeof(float));
    c->row = malloc((size_t)cols * sizeof(float));
    if (c->w == NULL || c->row == NULL) {
        free(c->w);
        free(c->row);
        free(c);
        return 1;
    }
    const uint16_t *w = params[0].data;
    for (int64_t j = 0; j < cols; j++) c->w[j] = bf16_to_float(w[j]);
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const rms_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 2) return 1;
    if (!tensor_ok(&in[0], ST_BF16, 2, c->rows, c->cols) ||
        !tensor_ok(&out[0], ST_BF16, 2, c->rows, c->cols) ||
        !tensor_ok(&out[1], ST_F32, 1, c->rows, 0))
        return 1;

    const int64_t cols = c->cols;
    const float *restrict w = c->w;
    float *restrict xf = c->row;
    for (int64_t r = 0; r < c->rows; r++) {
        const uint16_t *restrict x = (const uint16_t *)in[0].data + r * cols;
        uint16_t *restrict y = (uint16_t *)out[0].data + r * cols;

        widen(xf, x, cols);
        double ss = 0.0;
        for (int64_t b = 0; b < cols; b += BLOCK) {
            const int64_t len = cols - b < BLOCK ? cols - b : BLOCK;
            float acc[LANES] = {0};
            int64_t i = 0;
            for (; i + LANES <= len; i += LANES)
                for (int l = 0; l < LANES; l++) acc[l] += xf[b + i + l] * xf[b + i + l];
            for (; i < len; i++) acc[0] += xf[b + i] * xf[b + i];
            for (int s = LANES / 2; s > 0; s /= 2)
                for (int l = 0; l < s; l++) acc[l] += acc[l + s];
            ss += acc[0];
        }
        const float rstd = (float)(1.0 / sqrt(ss / (double)cols + EPS));
        ((float *)out[1].data)[r] = rstd;

        rms_out(y, xf, w, rstd, cols);
    }
    return 0;
}

void st_free(void *ctx) {
    rms_ctx *c = ctx;
    if (c != NULL) {
        free(c->w);
        free(c->row);
    }
    free(c);
}
