/* Host reference for t2/softmax_xent: per row, the maximum, the sum of exp(x - max) and the loss
 * log(sum) - (x[target] - max), in float32 as the GPU reference computes it, and the mean of the
 * losses summed in double. The sum is taken in chunks of 256 columns: a single running float sum
 * over 50,000 terms rounds the small ones away (about 1e-4 relative, as large as the tolerance). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CHUNK 256

typedef struct {
    int64_t T, V;
} xent_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "softmax_xent host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok) fprintf(stderr, "softmax_xent host reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

void st_free(void *p) {
    free(p);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t T, V;
    if (cfg_get(cfg, "T", &T) || cfg_get(cfg, "V", &V)) return 1;
    if (n_params != 0 || T < 1 || V < 1) {
        fprintf(stderr, "softmax_xent host reference: bad sizes T=%lld V=%lld\n", (long long)T, (long long)V);
        return 1;
    }
    xent_ctx *c = calloc(1, sizeof(*c));
    if (!c) return 1;
    c->T = T;
    c->V = V;
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const xent_ctx *c = p;
    if (!c || n_in != 2 || n_out != 2) return 1;
    if (check(&in[0], "logits", ST_F32, 2, c->T, c->V) || check(&in[1], "targets", ST_I32, 1, c->T, 0) ||
        check(&out[0], "loss", ST_F32, 1, c->T, 0) || check(&out[1], "mean", ST_F32, 1, 1, 0))
        return 1;
    const float *logits = in[0].data;
    const int32_t *targets = in[1].data;
    float *loss = out[0].data, *mean = out[1].data;
    const int64_t V = c->V;
    double total = 0.0;
    for (int64_t t = 0; t < c->T; t++) {
        const float *x = logits + t * V;
        float max = -INFINITY;
        for (int64_t j = 0; j < V; j++) max = fmaxf(max, x[j]);
        float sum = 0.0f;
        for (int64_t j0 = 0; j0 < V; j0 += CHUNK) {
            const int64_t j1 = j0 + CHUNK < V ? j0 + CHUNK : V;
            float part = 0.0f;
            for (int64_t j = j0; j < j1; j++) part += expf(x[j] - max);
            sum += part;
        }
        /* -(log-probability of the target) = -((x[target] - max) - log(sum)) */
        loss[t] = -((x[targets[t]] - max) - logf(sum));
        total += loss[t];
    }
    mean[0] = (float)(total / (double)c->T);
    return 0;
}
