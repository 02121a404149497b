/* Host expert for t2/embedding_posenc: out[b, t, :] = bf16(wte[tokens[b, t], :] + wpe[t, :]) in
 * float, rounded to nearest even. The reference takes a modulo per row and rounds through a
 * branch (the NaN case), which keeps the loop scalar. Here the rows are walked as (b, t) with no
 * modulo, over restrict pointers, and the rounding is branch-free (NaN handled by a select), so
 * the widen-add-round loop over C vectorises. Same arithmetic, same bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t B, T, V, C, maxT;
    const uint16_t *wte, *wpe; /* the harness's, alive until st_free */
} embed_ctx;

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* round to nearest even; NaN stays NaN (a quiet one) instead of rounding up into Inf */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "embedding_posenc host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0,
                 int64_t d1, int64_t d2) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 && t->shape[1] == d1 &&
             (ndim == 2 || t->shape[2] == d2) && t->data != NULL;
    if (!ok) fprintf(stderr, "embedding_posenc host reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

void st_free(void *p) {
    free(p);
}

/* dst = bf16(a + pe), in blocks of 16 with restrict parameters so -O2 vectorises it */
static void add_row(uint16_t *restrict dst, const uint16_t *restrict a, const uint16_t *restrict pe,
                    int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) dst[j + l] = f32_to_bf16(bf16_to_f32(a[j + l]) + bf16_to_f32(pe[j + l]));
    for (; j < n; j++) dst[j] = f32_to_bf16(bf16_to_f32(a[j]) + bf16_to_f32(pe[j]));
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    embed_ctx *c = calloc(1, sizeof(*c));
    if (!c) return 1;
    if (cfg_get(cfg, "B", &c->B) || cfg_get(cfg, "T", &c->T) || cfg_get(cfg, "V", &c->V) ||
        cfg_get(cfg, "C", &c->C) || cfg_get(cfg, "maxT", &c->maxT) || n_params != 2 ||
        c->B < 1 || c->T < 1 || c->V < 1 || c->C < 1 || c->T > c->maxT ||
        check(&params[0], "wte", ST_BF16, 2, c->V, c->C, 0) ||
        check(&params[1], "wpe", ST_BF16, 2, c->maxT, c->C, 0)) {
        fprintf(stderr, "embedding_posenc host reference: bad sizes or params\n");
        free(c);
        return 1;
    }
    c->wte = params[0].data;
    c->wpe = params[1].data;
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const embed_ctx *c = p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check(&in[0], "tokens", ST_I32, 2, c->B, c->T, 0) ||
        check(&out[0], "out", ST_BF16, 3, c->B, c->T, c->C))
        return 1;
    const int32_t *tokens = in[0].data;
    uint16_t *o = out[0].data;
    const int64_t C = c->C, T = c->T;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t row = b * T + t;
            const uint16_t *restrict a = c->wte + (int64_t)tokens[row] * C;
            const uint16_t *restrict pe = c->wpe + t * C;
            uint16_t *restrict dst = o + row * C;
            add_row(dst, a, pe, C);
        }
    return 0;
}
