/* Host expert for t3/cg: conjugate gradients from x = 0 with float vectors and dot products in
 * double, stopping when ||r|| <= 1e-6 ||b||, as the reference does. The reference makes five
 * passes over the vectors per iteration (SpMV, dot(p, Ap), the x and r updates, dot(r, r), the p
 * update) and sums every dot product through one serial double chain. Here the dot(p, Ap) is
 * fused into the SpMV pass and dot(r, r) into the x/r update pass (three passes per iteration
 * instead of five), the other dot products run over 2 to 4 independent double accumulators, and the
 * pointers are restrict. The float updates are the reference's; only the order of the double
 * sums differs, which changes nothing the residual check can see. */
#include <math.h>
#include <stdint.h>
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

static double dot(const float *restrict a, const float *restrict b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* ap = A p and return dot(p, ap) */
static double spmv_dot(const int32_t *restrict row_ptr, const int32_t *restrict col,
                       const float *restrict val, const float *restrict pv, float *restrict ap,
                       int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) s += val[k] * pv[col[k]];
        ap[i] = s;
        d += (double)pv[i] * s; /* off the row's critical path: rows overlap in the core */
    }
    return d;
}

/* x += alpha p, r -= alpha ap, and return dot(r, r) */
static double update_xr(float *restrict x, float *restrict r, const float *restrict pv,
                        const float *restrict ap, float alpha, int64_t n) {
    double s0 = 0, s1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        x[i] += alpha * pv[i];
        x[i + 1] += alpha * pv[i + 1];
        const float r0 = r[i] - alpha * ap[i], r1 = r[i + 1] - alpha * ap[i + 1];
        r[i] = r0;
        r[i + 1] = r1;
        s0 += (double)r0 * r0;
        s1 += (double)r1 * r1;
    }
    for (; i < n; i++) {
        x[i] += alpha * pv[i];
        r[i] -= alpha * ap[i];
        s0 += (double)r[i] * r[i];
    }
    return s0 + s1;
}

static void update_p(float *restrict pv, const float *restrict r, float beta, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) pv[i + l] = r[i + l] + beta * pv[i + l];
    for (; i < n; i++) pv[i] = r[i] + beta * pv[i];
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
        const double alpha = rr / spmv_dot(row_ptr, col, val, pv, ap, n);
        const double rr_new = update_xr(x, r, pv, ap, (float)alpha, n), beta = rr_new / rr;
        rr = rr_new;
        update_p(pv, r, (float)beta, n);
    }
    return 0;
}
