/* Host expert for t3/nbody: direct-summation gravity (G = 1, eps^2 = 0.0025) and S kick-drift-kick
 * leapfrog steps of dt = 0.01, as the reference computes them. The reference's inner loop reads
 * the interleaved [N, 3] positions, calls sqrtf and divides per pair, and adds every pair into
 * one serial accumulator per axis, so it runs scalar at the add/divide latency. Here each
 * acceleration pass first splits positions into x, y, z arrays (SoA), and the pair loop runs in
 * blocks of 16 with 16 independent accumulators per axis; 1/sqrt(r^2) is a bit-trick estimate
 * refined by three Newton steps (accurate to a few float ulps), all plain arithmetic that -O2
 * vectorises. Only rounding-level differences from the reference remain (the validator expects
 * those from summation order and rsqrt). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define DT 0.01f
#define EPS2 0.0025f

typedef struct {
    int64_t n, steps;
    float *acc;        /* [N, 3] */
    float *x, *y, *z;  /* [N] each: positions split by axis */
} nbody_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "nbody host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, int64_t n, int64_t cols) {
    int ok = t->dtype == ST_F32 && t->data != NULL && t->shape[0] == n &&
             (cols ? t->ndim == 2 && t->shape[1] == cols : t->ndim == 1);
    if (!ok) fprintf(stderr, "nbody host reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

/* 1 / sqrt(v) for v > 0: estimate from the bits, then three Newton steps */
static float rsqrt_nr(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = 0x5f375a86u - (u >> 1);
    float r;
    memcpy(&r, &u, sizeof r);
    const float h = 0.5f * v;
    r = r * (1.5f - h * r * r);
    r = r * (1.5f - h * r * r);
    r = r * (1.5f - h * r * r);
    return r;
}

/* acceleration on one body at (xi, yi, zi) from all n bodies */
static void accel_one(const float *restrict x, const float *restrict y, const float *restrict z,
                      const float *restrict mass, int64_t n, float xi, float yi, float zi,
                      float *restrict out) {
    float ax[16] = {0}, ay[16] = {0}, az[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) {
            const float dx = x[j + l] - xi, dy = y[j + l] - yi, dz = z[j + l] - zi;
            const float inv = rsqrt_nr(dx * dx + dy * dy + dz * dz + EPS2);
            const float s = mass[j + l] * inv * inv * inv;
            ax[l] += s * dx;
            ay[l] += s * dy;
            az[l] += s * dz;
        }
    for (; j < n; j++) {
        const float dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
        const float inv = rsqrt_nr(dx * dx + dy * dy + dz * dz + EPS2);
        const float s = mass[j] * inv * inv * inv;
        ax[0] += s * dx;
        ay[0] += s * dy;
        az[0] += s * dz;
    }
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) {
            ax[l] += ax[l + w];
            ay[l] += ay[l + w];
            az[l] += az[l + w];
        }
    out[0] = ax[0];
    out[1] = ay[0];
    out[2] = az[0];
}

static void accelerations(const nbody_ctx *ctx, const float *pos, const float *mass, float *acc) {
    const int64_t n = ctx->n;
    for (int64_t i = 0; i < n; i++) {
        ctx->x[i] = pos[3 * i];
        ctx->y[i] = pos[3 * i + 1];
        ctx->z[i] = pos[3 * i + 2];
    }
    for (int64_t i = 0; i < n; i++)
        accel_one(ctx->x, ctx->y, ctx->z, mass, n, ctx->x[i], ctx->y[i], ctx->z[i], acc + 3 * i);
}

void st_free(void *p) {
    nbody_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->acc);
    free(ctx->x);
    free(ctx->y);
    free(ctx->z);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, steps;
    if (cfg_get(cfg, "N", &n) || cfg_get(cfg, "S", &steps)) return 1;
    if (n_params != 0 || n < 1 || steps < 0) return 1;
    nbody_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    ctx->n = n;
    ctx->steps = steps;
    ctx->acc = malloc(sizeof(float) * 3 * (size_t)n);
    ctx->x = malloc(sizeof(float) * (size_t)n);
    ctx->y = malloc(sizeof(float) * (size_t)n);
    ctx->z = malloc(sizeof(float) * (size_t)n);
    if (!ctx->acc || !ctx->x || !ctx->y || !ctx->z) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const nbody_ctx *ctx = p;
    const int64_t n = ctx->n;
    if (n_in != 3 || n_out != 2 || check(&in[0], "pos", n, 3) || check(&in[1], "vel", n, 3) ||
        check(&in[2], "mass", n, 0) || check(&out[0], "pos_out", n, 3) || check(&out[1], "vel_out", n, 3))
        return 1;
    const float *mass = in[2].data;
    float *pos = out[0].data, *vel = out[1].data, *acc = ctx->acc;
    memcpy(pos, in[0].data, sizeof(float) * 3 * (size_t)n);
    memcpy(vel, in[1].data, sizeof(float) * 3 * (size_t)n);
    if (ctx->steps == 0) return 0;
    accelerations(ctx, pos, mass, acc);
    for (int64_t s = 0; s < ctx->steps; s++) {
        for (int64_t i = 0; i < 3 * n; i++) {
            vel[i] += 0.5f * DT * acc[i];
            pos[i] += DT * vel[i];
        }
        accelerations(ctx, pos, mass, acc);
        for (int64_t i = 0; i < 3 * n; i++) vel[i] += 0.5f * DT * acc[i];
    }
    return 0;
}
