/* Host expert for t3/heat2d: S Jacobi sweeps, u_new = 0.25 * (up + down + left + right + b) at
 * interior points, boundary fixed, ping-ponging between the output and a scratch grid, with the
 * reference's float arithmetic in the same order. The reference tests for the boundary at every
 * point, which keeps its loop scalar. Here each sweep copies the boundary rows and columns and
 * runs the interior of each row as a branch-free stencil in blocks of 16 over restrict
 * parameters, which -O2 vectorises. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t ny, nx, sweeps;
    float *tmp; /* [ny, nx] */
} heat_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "heat2d host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const heat_ctx *c) {
    return !(t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == c->ny && t->shape[1] == c->nx && t->data);
}

/* interior of one row: dst[j] for j in [1, nx - 1), from the rows above, at and below */
static void row_interior(float *restrict dst, const float *restrict up, const float *restrict mid,
                         const float *restrict down, const float *restrict b, int64_t nx) {
    int64_t j = 1;
    for (; j + 16 <= nx - 1; j += 16)
        for (int l = 0; l < 16; l++)
            dst[j + l] = 0.25f * (up[j + l] + down[j + l] + mid[j + l - 1] + mid[j + l + 1] + b[j + l]);
    for (; j < nx - 1; j++) dst[j] = 0.25f * (up[j] + down[j] + mid[j - 1] + mid[j + 1] + b[j]);
}

static void sweep(const float *src, const float *b, float *dst, int64_t ny, int64_t nx) {
    memcpy(dst, src, sizeof(float) * (size_t)nx);
    if (ny > 1) memcpy(dst + (ny - 1) * nx, src + (ny - 1) * nx, sizeof(float) * (size_t)nx);
    for (int64_t i = 1; i < ny - 1; i++) {
        const int64_t k = i * nx;
        dst[k] = src[k];
        if (nx > 1) dst[k + nx - 1] = src[k + nx - 1];
        if (nx > 2) row_interior(dst + k, src + k - nx, src + k, src + k + nx, b + k, nx);
    }
}

void st_free(void *p) {
    heat_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->tmp);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    heat_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "ny", &ctx->ny) || cfg_get(cfg, "nx", &ctx->nx) || cfg_get(cfg, "S", &ctx->sweeps) ||
        n_params != 0 || ctx->ny < 1 || ctx->nx < 1 || ctx->sweeps < 0 ||
        !(ctx->tmp = malloc(sizeof(float) * (size_t)(ctx->ny * ctx->nx)))) {
        st_free(ctx);
        return 1;
    }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const heat_ctx *c = p;
    if (n_in != 2 || n_out != 1 || check(&in[0], c) || check(&in[1], c) || check(&out[0], c)) return 1;
    const float *u0 = in[0].data, *b = in[1].data;
    float *u = out[0].data;
    /* sweep s writes u when S - 1 - s is even, so the last one lands in the output */
    const float *src = u0;
    for (int64_t s = 0; s < c->sweeps; s++) {
        float *dst = (c->sweeps - 1 - s) % 2 == 0 ? u : c->tmp;
        sweep(src, b, dst, c->ny, c->nx);
        src = dst;
    }
    if (c->sweeps == 0) memcpy(u, u0, sizeof(float) * (size_t)(c->ny * c->nx));
    return 0;
}
