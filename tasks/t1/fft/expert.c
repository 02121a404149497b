/* Host expert for t1/fft: batched complex forward FFT by radix-2 Stockham stages in float32 with
 * twiddles rounded from double, as the reference does. The reference finds every butterfly's
 * twiddle and output slot with a division and two modulos by ns, and reads the twiddle table with
 * a stride of half / ns. Here st_init lays out each stage's twiddles contiguously (n - 1 in all),
 * and each stage runs as blocks of ns butterflies with a plain counter: no division, unit-stride
 * twiddle reads, restrict pointers; the first stage (all twiddles 1) is bare adds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    float re, im;
} cpx;

typedef struct {
    int64_t batch, n;
    int logn;
    cpx *tmp;     /* [n]: one row of scratch */
    cpx *twiddle; /* [n - 1]: stage s (ns = 2^s) at offset ns - 1 holds exp(-2*pi*i*k/(2 ns)) */
} fft_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "fft host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_rows(const st_tensor *t, const char *what, int64_t batch, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == n &&
             t->shape[2] == 2 && t->data != NULL;
    if (!ok)
        fprintf(stderr, "fft host reference: %s: expected f32 [%lld, %lld, 2]\n", what,
                (long long)batch, (long long)n);
    return !ok;
}

void st_free(void *p) {
    fft_ctx *c = p;
    if (!c) return;
    free(c->tmp);
    free(c->twiddle);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t batch, n, logn;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "n", &n) || cfg_get(cfg, "logn", &logn))
        return 1;
    if (n_params != 0 || batch < 1 || logn < 1 || logn > 30 || n != (int64_t)1 << logn) {
        fprintf(stderr, "fft host expert: need batch >= 1 and n = 2^logn >= 2\n");
        return 1;
    }
    fft_ctx *c = calloc(1, sizeof(*c));
    if (!c) return 1;
    c->batch = batch;
    c->n = n;
    c->logn = (int)logn;
    c->tmp = malloc(sizeof(cpx) * (size_t)n);
    c->twiddle = malloc(sizeof(cpx) * (size_t)n);
    if (!c->tmp || !c->twiddle) {
        st_free(c);
        return 1;
    }
    /* the reference's twiddle[k * (half / ns)], exp(-2 pi i k (half/ns) / n), rounded the same way */
    const double two_pi = 6.283185307179586476925;
    const int64_t half = n / 2;
    for (int64_t ns = 1; ns < n; ns *= 2)
        for (int64_t k = 0; k < ns; k++) {
            const double a = -two_pi * (double)(k * (half / ns)) / (double)n;
            c->twiddle[ns - 1 + k].re = (float)cos(a);
            c->twiddle[ns - 1 + k].im = (float)sin(a);
        }
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const fft_ctx *c = p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check_rows(&in[0], "x", c->batch, c->n) || check_rows(&out[0], "y", c->batch, c->n)) return 1;
    const int64_t n = c->n, half = n / 2;
    for (int64_t b = 0; b < c->batch; b++) {
        const cpx *src = (const cpx *)in[0].data + b * n;
        cpx *bufs[2] = {(cpx *)out[0].data + b * n, c->tmp};
        int64_t ns = 1;
        for (int s = 0; s < c->logn; s++, ns *= 2) {
            cpx *restrict dst = bufs[(c->logn - 1 - s) % 2];
            const cpx *restrict lo = src, *restrict hi = src + half;
            if (ns == 1) {
                for (int64_t j = 0; j < half; j++) {
                    const cpx v0 = lo[j], v1 = hi[j];
                    dst[2 * j].re = v0.re + v1.re;
                    dst[2 * j].im = v0.im + v1.im;
                    dst[2 * j + 1].re = v0.re - v1.re;
                    dst[2 * j + 1].im = v0.im - v1.im;
                }
            } else {
                const cpx *restrict tw = c->twiddle + ns - 1;
                for (int64_t j0 = 0; j0 < half; j0 += ns) {
                    const cpx *restrict a = lo + j0, *restrict bb = hi + j0;
                    cpx *restrict d0 = dst + 2 * j0, *restrict d1 = d0 + ns;
                    for (int64_t k = 0; k < ns; k++) {
                        const cpx v0 = a[k], v1 = bb[k], w = tw[k];
                        const float tr = v1.re * w.re - v1.im * w.im;
                        const float ti = v1.re * w.im + v1.im * w.re;
                        d0[k].re = v0.re + tr;
                        d0[k].im = v0.im + ti;
                        d1[k].re = v0.re - tr;
                        d1[k].im = v0.im - ti;
                    }
                }
            }
            src = dst;
        }
    }
    return 0;
}
