/* Host reference for t3/mc_option: Monte-Carlo price of a European call under geometric Brownian
 * motion, `paths` independent samples per option: S_T = S0 exp((r - sigma^2/2) T + sigma sqrt(T) Z),
 * price = e^{-rT} mean(max(S_T - K, 0)). Z by Box-Muller from a counter-based hash (splitmix64 of
 * the option and path index), so every option has its own stream. Double precision throughout. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define SEED 0x5eed0f0b7105ull

typedef struct {
    int64_t n, paths;
} mc_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mc_option host reference: size '%s' missing from the config\n", name);
    return 1;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1), never 0 */
static double unit(uint64_t r) { return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

void st_free(void *p) { free(p); }

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    mc_ctx *c = malloc(sizeof(*c));
    if (!c) return 1;
    if (cfg_get(cfg, "n_opt", &c->n) || cfg_get(cfg, "paths", &c->paths) || n_params != 0 || c->n < 1 ||
        c->paths < 1) {
        free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const mc_ctx *c = p;
    if (n_in != 5 || n_out != 1) return 1;
    for (int i = 0; i < 5; i++)
        if (in[i].dtype != ST_F32 || in[i].ndim != 1 || in[i].shape[0] != c->n) return 1;
    if (out[0].dtype != ST_F32 || out[0].ndim != 1 || out[0].shape[0] != c->n) return 1;
    const float *s0 = in[0].data, *k = in[1].data, *r = in[2].data, *sigma = in[3].data, *t = in[4].data;
    float *price = out[0].data;
    for (int64_t o = 0; o < c->n; o++) {
        const double mu = (r[o] - 0.5 * (double)sigma[o] * sigma[o]) * t[o], vol = sigma[o] * sqrt((double)t[o]);
        double sum = 0;
        for (int64_t i = 0; i < c->paths; i++) {
            const uint64_t h = mix64(SEED ^ mix64((uint64_t)o * 0x9e3779b97f4a7c15ull + (uint64_t)i));
            const double u1 = unit(h), u2 = unit(mix64(h));
            const double z = sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
            const double st = s0[o] * exp(mu + vol * z);
            sum += st > k[o] ? st - k[o] : 0.0;
        }
        price[o] = (float)(exp(-(double)r[o] * t[o]) * sum / (double)c->paths);
    }
    return 0;
}
