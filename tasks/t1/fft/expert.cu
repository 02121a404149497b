/* Expert for t1/fft: batched complex-to-complex forward FFT through cuFFT, the state of the art
 * for power-of-two sizes on NVIDIA GPUs (mixed-radix kernels that keep a whole transform, or one
 * factor of it, in registers and shared memory, so a 65536-point row costs one or two passes over
 * memory instead of sixteen). The plan, with its work area, is made once in st_init for the given
 * batch and n; st_run sets the caller's stream on it and executes out of place. An out-of-place
 * C2C transform leaves its input untouched (only C2R transforms overwrite their input). */
#include <cuda_runtime.h>
#include <cufft.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t batch, n;
    cufftHandle plan;
    int have_plan;
} fft_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "fft expert: size '%s' missing from the config\n", name);
    return 1;
}

/* cufftComplex needs 8-byte alignment; cudaMalloc'd tensors have far more */
static int check_rows(const st_tensor *t, const char *what, int64_t batch, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == n &&
             t->shape[2] == 2 && t->data != NULL && ((uintptr_t)t->data & 7) == 0;
    if (!ok) fprintf(stderr, "fft expert: %s: expected 8-byte aligned f32 [%lld, %lld, 2]\n", what,
                     (long long)batch, (long long)n);
    return !ok;
}

extern "C" void st_free(void *p) {
    fft_ctx *c = (fft_ctx *)p;
    if (!c) return;
    if (c->have_plan) cufftDestroy(c->plan);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t batch, n, logn;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "n", &n) || cfg_get(cfg, "logn", &logn))
        return 1;
    if (n_params != 0 || batch < 1 || batch > INT32_MAX || logn < 1 || logn > 30 ||
        n != (int64_t)1 << logn) {
        fprintf(stderr, "fft expert: need batch >= 1 and n = 2^logn >= 2, got batch=%lld n=%lld logn=%lld\n",
                (long long)batch, (long long)n, (long long)logn);
        return 1;
    }
    fft_ctx *c = (fft_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->batch = batch;
    c->n = n;
    /* rows are contiguous: cufftPlan1d's batched layout (stride 1, distance n) */
    cufftResult r = cufftPlan1d(&c->plan, (int)n, CUFFT_C2C, (int)batch);
    if (r != CUFFT_SUCCESS) {
        fprintf(stderr, "fft expert: cufftPlan1d(%lld, batch %lld) failed: %d\n", (long long)n,
                (long long)batch, (int)r);
        free(c);
        return 1;
    }
    c->have_plan = 1;
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    fft_ctx *c = (fft_ctx *)p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check_rows(&in[0], "x", c->batch, c->n) || check_rows(&out[0], "y", c->batch, c->n)) return 1;
    cufftResult r = cufftSetStream(c->plan, stream);
    if (r == CUFFT_SUCCESS)
        r = cufftExecC2C(c->plan, (cufftComplex *)in[0].data, (cufftComplex *)out[0].data,
                         CUFFT_FORWARD);
    if (r != CUFFT_SUCCESS) {
        fprintf(stderr, "fft expert: cuFFT failed: %d\n", (int)r);
        return 1;
    }
    return 0;
}
