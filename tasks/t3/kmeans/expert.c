/* Host expert for t3/kmeans: I iterations of Lloyd's algorithm (nearest centroid by squared
 * Euclidean distance, ties to the lowest index; centroids moved to the mean of their points with
 * sums in double), as the reference computes them. The reference finds each point's distance to
 * one centroid at a time through a serial loop over d, so for the small d of most sets it is all
 * loop overhead and a dependent chain. Here each iteration first transposes the centroids to
 * [d, k] (padded to a multiple of 8), and each point gets its distances to 8 centroids at once,
 * summed over the coordinates in the same order as the reference (so the same float bits and the
 * same labels), in fixed blocks of 8 that -O2 vectorises; then a plain argmin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t n, d, k, iters, kpad;
    double *sum;    /* [k, d] */
    int64_t *count; /* [k] */
    float *ct;      /* [d, kpad]: the centroids the labelling uses, transposed */
    float *dist;    /* [kpad] */
} km_ctx;

/* dist[l] = sum over j of (x[j] - ct[j * kpad + l])^2 for 8 centroids, j in order */
static void dist8(const float *restrict x, const float *restrict ct, int64_t d, int64_t kpad,
                   float *restrict dist) {
    float s[8] = {0};
    for (int64_t j = 0; j < d; j++) {
        const float xj = x[j];
        const float *restrict row = ct + j * kpad;
        for (int l = 0; l < 8; l++) {
            const float t = xj - row[l];
            s[l] += t * t;
        }
    }
    for (int l = 0; l < 8; l++) dist[l] = s[l];
}

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
    free(c->ct);
    free(c->dist);
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
    c->kpad = (c->k + 7) / 8 * 8;
    c->ct = calloc((size_t)(c->d * c->kpad), sizeof(float));
    c->dist = malloc(sizeof(float) * (size_t)c->kpad);
    if (!c->ct || !c->dist) {
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
    const int64_t n = c->n, d = c->d, k = c->k, kpad = c->kpad;
    if (n_in != 2 || n_out != 3 || check(&in[0], ST_F32, n, d) || check(&in[1], ST_F32, k, d) ||
        check(&out[0], ST_I32, n, 0) || check(&out[1], ST_F32, k, d) || check(&out[2], ST_F32, k, d))
        return 1;
    const float *pts = in[0].data;
    int32_t *label = out[0].data;
    float *cur = out[1].data, *prev = out[2].data;
    float *ct = c->ct, *dist = c->dist;
    memcpy(cur, in[1].data, sizeof(float) * (size_t)(k * d));
    for (int64_t it = 0; it < c->iters; it++) {
        memcpy(prev, cur, sizeof(float) * (size_t)(k * d));
        for (int64_t q = 0; q < k; q++)
            for (int64_t j = 0; j < d; j++) ct[j * kpad + q] = prev[q * d + j];
        for (int64_t i = 0; i < n; i++) {
            const float *x = pts + i * d;
            for (int64_t q0 = 0; q0 < kpad; q0 += 8) dist8(x, ct + q0, d, kpad, dist + q0);
            float best = INFINITY;
            int32_t arg = 0;
            for (int64_t q = 0; q < k; q++)
                if (dist[q] < best) {
                    best = dist[q];
                    arg = (int32_t)q;
                }
            label[i] = arg;
        }
        memset(c->sum, 0, sizeof(double) * (size_t)(k * d));
        memset(c->count, 0, sizeof(int64_t) * (size_t)k);
        for (int64_t i = 0; i < n; i++) {
            double *sq = c->sum + label[i] * d;
            const float *x = pts + i * d;
            c->count[label[i]]++;
            for (int64_t j = 0; j < d; j++) sq[j] += x[j];
        }
        for (int64_t q = 0; q < k; q++)
            if (c->count[q])
                for (int64_t j = 0; j < d; j++) cur[q * d + j] = (float)(c->sum[q * d + j] / (double)c->count[q]);
    }
    return 0;
}
