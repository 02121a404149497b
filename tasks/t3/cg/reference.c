/* Host reference for t3/cg: textbook conjugate gradients from x = 0, the same algorithm as the GPU
 * reference: float vectors, dot products summed in double, stop when the recurrence residual
 * ||r|| <= 1e-6 ||b|| (or after MAX_ITER iterations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define TOL 1e-6
#define MAX_ITER 20000

typedef struct {
    int64_t n, nnz;
    float *r, *p, *ap; /* [n] each */
} cg_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "cg host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, st_dtype dt, int64_t len) {
    return !(t->dtype == dt && t->ndim == 1 && t->shape[0] == len && t->data);
}

static double dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

void st_free(void *p) {
    cg_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->r);
    free(ctx->p);
    free(ctx->ap);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t nx, ny, nz;
    if (cfg_get(cfg, "nx", &nx) || cfg_get(cfg, "ny", &ny) || cfg_get(cfg, "nz", &nz) || n_params != 0 ||
        nx < 1 || ny < 1 || nz < 1)
        return 1;
    cg_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    ctx->n = nx * ny * nz;
    ctx->nnz = 7 * ctx->n - 2 * (nx * ny + ny * nz + nx * nz) + 2 * (ctx->n / 8);
    ctx->r = malloc(sizeof(float) * (size_t)ctx->n);
    ctx->p = malloc(sizeof(float) * (size_t)ctx->n);
    ctx->ap = malloc(sizeof(float) * (size_t)ctx->n);
    if (!ctx->r || !ctx->p || !ctx->ap) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const cg_ctx *c = p;
    const int64_t n = c->n;
    if (n_in != 4 || n_out != 1 || check(&in[0], ST_I32, n + 1) || check(&in[1], ST_I32, c->nnz) ||
        check(&in[2], ST_F32, c->nnz) || check(&in[3], ST_F32, n) || check(&out[0], ST_F32, n))
        return 1;
    const int32_t *row_ptr = in[0].data, *col = in[1].data;
    const float *val = in[2].data, *b = in[3].data;
    float *x = out[0].data, *r = c->r, *pv = c->p, *ap = c->ap;

    for (int64_t i = 0; i < n; i++) {
        x[i] = 0.0f;
        r[i] = pv[i] = b[i];
    }
    double rr = dot(r, r, n);
    const double stop = TOL * TOL * rr;
    for (int it = 0; it < MAX_ITER && rr > stop; it++) {
        for (int64_t i = 0; i < n; i++) {
            float s = 0.0f;
            for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) s += val[k] * pv[col[k]];
            ap[i] = s;
        }
        const double alpha = rr / dot(pv, ap, n);
        for (int64_t i = 0; i < n; i++) {
            x[i] += (float)alpha * pv[i];
            r[i] -= (float)alpha * ap[i];
        }
        const double rr_new = dot(r, r, n), beta = rr_new / rr;
        rr = rr_new;
        for (int64_t i = 0; i < n; i++) pv[i] = r[i] + (float)beta * pv[i];
    }
    return 0;
}
