/* Host reference for t3/nbody: direct-summation gravity (G = 1, softening eps^2 = 0.0025) and S
 * kick-drift-kick leapfrog steps of dt = 0.01, the same algorithm as the GPU reference: one
 * O(N^2) acceleration pass per step, in float. The state lives in the output arrays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define DT 0.01f
#define EPS2 0.0025f

typedef struct {
    int64_t n, steps;
    float *acc; /* [N, 3] */
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

static void accelerations(const float *pos, const float *mass, float *acc, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float ax = 0, ay = 0, az = 0;
        for (int64_t j = 0; j < n; j++) {
            const float dx = pos[3 * j] - pos[3 * i], dy = pos[3 * j + 1] - pos[3 * i + 1],
                        dz = pos[3 * j + 2] - pos[3 * i + 2];
            const float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + EPS2);
            const float s = mass[j] * inv * inv * inv;
            ax += s * dx;
            ay += s * dy;
            az += s * dz;
        }
        acc[3 * i] = ax;
        acc[3 * i + 1] = ay;
        acc[3 * i + 2] = az;
    }
}

void st_free(void *p) {
    nbody_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->acc);
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
    if (!ctx->acc) { st_free(ctx); return 1; }
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
    accelerations(pos, mass, acc, n);
    for (int64_t s = 0; s < ctx->steps; s++) {
        for (int64_t i = 0; i < 3 * n; i++) {
            vel[i] += 0.5f * DT * acc[i];
            pos[i] += DT * vel[i];
        }
        accelerations(pos, mass, acc, n);
        for (int64_t i = 0; i < 3 * n; i++) vel[i] += 0.5f * DT * acc[i];
    }
    return 0;
}
