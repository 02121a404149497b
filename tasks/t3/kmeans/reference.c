/* Host reference for t3/kmeans: I iterations of Lloyd's algorithm from the given centroids, the
 * same steps as the GPU reference: label every point with its nearest centroid (squared Euclidean
 * distance, ties to the lowest index), then move every centroid to the mean of its points (sums in
 * double; a centroid without points stays). Outputs the last labels, the last centroids and the
 * centroids the last labelling used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t n, d, k, iters;
    double *sum;   /* [k, d] */
    int64_t *count; /* [k] */
} km_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "kmeans host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, st_dtype dt, int64_t rows, int64_t cols) {
    return !(t->dtype == dt && t->data && t->shape[0] == rows &&
             (cols ? t->ndim == 2 && t->shape[1] == cols : t->ndim == 1));
}

void st_free(void *p) {
    km_ctx *c = p;
    if (!c) return;
    free(c->sum);
    free(c->count);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    km_ctx *c = calloc(1, sizeof(*c));
    if (!c) return 1;
    if (cfg_get(cfg, "n", &c->n) || cfg_get(cfg, "d", &c->d) || cfg_get(cfg, "k", &c->k) ||
        cfg_get(cfg, "I", &c->iters) || n_params != 0 || c->n < 1 || c->d < 1 || c->k < 1 || c->iters < 1 ||
        !(c->sum = malloc(sizeof(double) * (size_t)(c->k * c->d))) ||
        !(c->count = malloc(sizeof(int64_t) * (size_t)c->k))) {
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    km_ctx *c = p;
    const int64_t n = c->n, d = c->d, k = c->k;
    if (n_in != 2 || n_out != 3 || check(&in[0], ST_F32, n, d) || check(&in[1], ST_F32, k, d) ||
        check(&out[0], ST_I32, n, 0) || check(&out[1], ST_F32, k, d) || check(&out[2], ST_F32, k, d))
        return 1;
    const float *pts = in[0].data;
    int32_t *label = out[0].data;
    float *cur = out[1].data, *prev = out[2].data;
    memcpy(cur, in[1].data, sizeof(float) * (size_t)(k * d));
    for (int64_t it = 0; it < c->iters; it++) {
        memcpy(prev, cur, sizeof(float) * (size_t)(k * d));
        for (int64_t i = 0; i < n; i++) {
            const float *x = pts + i * d;
            float best = INFINITY;
            int32_t arg = 0;
            for (int64_t q = 0; q < k; q++) {
                float s = 0.0f;
                for (int64_t j = 0; j < d; j++) {
                    const float t = x[j] - prev[q * d + j];
                    s += t * t;
                }
                if (s < best) {
                    best = s;
                    arg = (int32_t)q;
                }
            }
            label[i] = arg;
        }
        memset(c->sum, 0, sizeof(double) * (size_t)(k * d));
        memset(c->count, 0, sizeof(int64_t) * (size_t)k);
        for (int64_t i = 0; i < n; i++) {
            c->count[label[i]]++;
            for (int64_t j = 0; j < d; j++) c->sum[label[i] * d + j] += pts[i * d + j];
        }
        for (int64_t q = 0; q < k; q++)
            if (c->count[q])
                for (int64_t j = 0; j < d; j++) cur[q * d + j] = (float)(c->sum[q * d + j] / (double)c->count[q]);
    }
    return 0;
}
