/* Reference for t1/fft: batched complex-to-complex forward FFT in float32 by the radix-2 Stockham
 * algorithm, one kernel launch per stage. Stage s (half-size Ns = 2^s) takes element pairs j and
 * j + n/2 of every row, multiplies the second by the twiddle exp(-2*pi*i*(j mod Ns)/(2Ns)), and
 * writes their sum and difference to positions (j div Ns)*2Ns + (j mod Ns) and that + Ns. Stockham
 * reorders as it goes, so no bit reversal is needed; stages alternate between the output and a
 * scratch buffer, arranged so that the last one writes the output. The twiddles are a table of
 * n/2 values rounded from double precision in st_init. log2(n) passes over memory where an
 * optimised FFT needs one or two: obviously correct, and slow. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "fft reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define BLOCK 256

typedef struct {
    int64_t batch, n;
    int logn;
    float2 *tmp;     /* [batch * n] */
    float2 *twiddle; /* [n / 2]: exp(-2*pi*i*k/n) */
} fft_ctx;

/* one radix-2 Stockham stage over all rows; thread t handles butterfly j = t mod (n/2) of row
 * t div (n/2) */
__global__ void stockham_stage(const float2 *src, float2 *dst, const float2 *twiddle, int n,
                               int ns, int pairs) {
    const int t = blockIdx.x * BLOCK + threadIdx.x;
    if (t >= pairs) return;
    const int half = n / 2, row = t / half, j = t % half;
    const float2 *s = src + (size_t)row * n;
    float2 *d = dst + (size_t)row * n;
    const float2 v0 = s[j], v1 = s[j + half];
    const float2 w = twiddle[(j % ns) * (half / ns)];
    const float2 p = make_float2(v1.x * w.x - v1.y * w.y, v1.x * w.y + v1.y * w.x);
    const int o = (j / ns) * 2 * ns + j % ns;
    d[o] = make_float2(v0.x + p.x, v0.y + p.y);
    d[o + ns] = make_float2(v0.x - p.x, v0.y - p.y);
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "fft reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_rows(const st_tensor *t, const char *what, int64_t batch, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == n &&
             t->shape[2] == 2 && t->data != NULL && ((uintptr_t)t->data & 7) == 0;
    if (!ok) fprintf(stderr, "fft reference: %s: expected 8-byte aligned f32 [%lld, %lld, 2]\n", what,
                     (long long)batch, (long long)n);
    return !ok;
}

extern "C" void st_free(void *p) {
    fft_ctx *c = (fft_ctx *)p;
    if (!c) return;
    cudaFree(c->tmp);
    cudaFree(c->twiddle);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t batch, n, logn;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "n", &n) || cfg_get(cfg, "logn", &logn))
        return 1;
    /* one thread per butterfly, counted in int: batch * n / 2 must fit */
    if (n_params != 0 || batch < 1 || logn < 1 || logn > 30 || n != (int64_t)1 << logn ||
        batch * (n / 2) > INT32_MAX) {
        fprintf(stderr, "fft reference: need batch >= 1 and n = 2^logn >= 2, got batch=%lld n=%lld logn=%lld\n",
                (long long)batch, (long long)n, (long long)logn);
        return 1;
    }
    fft_ctx *c = (fft_ctx *)calloc(1, sizeof(*c));
    float2 *host = (float2 *)malloc(sizeof(float2) * (size_t)(n / 2));
    if (!c || !host) {
        free(c);
        free(host);
        return 1;
    }
    c->batch = batch;
    c->n = n;
    c->logn = (int)logn;
    const double two_pi = 6.283185307179586476925;
    for (int64_t k = 0; k < n / 2; k++) {
        const double a = -two_pi * (double)k / (double)n;
        host[k] = make_float2((float)cos(a), (float)sin(a));
    }
    cudaError_t e = cudaMalloc(&c->tmp, sizeof(float2) * (size_t)(batch * n));
    if (e == cudaSuccess) e = cudaMalloc(&c->twiddle, sizeof(float2) * (size_t)(n / 2));
    if (e == cudaSuccess)
        e = cudaMemcpy(c->twiddle, host, sizeof(float2) * (size_t)(n / 2), cudaMemcpyHostToDevice);
    free(host);
    if (e != cudaSuccess) {
        fprintf(stderr, "fft reference: st_init: %s\n", cudaGetErrorString(e));
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const fft_ctx *c = (const fft_ctx *)p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check_rows(&in[0], "x", c->batch, c->n) || check_rows(&out[0], "y", c->batch, c->n)) return 1;
    const float2 *x = (const float2 *)in[0].data;
    float2 *bufs[2] = {(float2 *)out[0].data, c->tmp};
    const int pairs = (int)(c->batch * (c->n / 2));
    const int blocks = (pairs + BLOCK - 1) / BLOCK;

    /* stage s writes bufs[(logn - 1 - s) % 2]: the last stage writes the output, and no stage
     * reads the buffer it writes; stage 0 reads x itself */
    const float2 *src = x;
    int ns = 1;
    for (int s = 0; s < c->logn; s++, ns *= 2) {
        float2 *dst = bufs[(c->logn - 1 - s) % 2];
        stockham_stage<<<blocks, BLOCK, 0, stream>>>(src, dst, c->twiddle, (int)c->n, ns, pairs);
        CUDA_CHECK(cudaGetLastError());
        src = dst;
    }
    return 0;
}
