/* Host solution for the KernelBench MLP (tests/kernelbench/mlp.py):
 * y = ReLU(GELU(x·W1ᵀ + b1)·W2ᵀ + b2) in fp32 with plain loops, GELU in its exact erf form.
 * Every dot product accumulates in double and is rounded to fp32 once, where PyTorch rounds, so
 * the result sits far inside the 1e-4 tolerance whatever summation order PyTorch's BLAS used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* the sizes mlp.py fixes: batch, input, hidden and output features */
enum { BATCH = 64, IN = 512, HID = 1024, OUT = 256 };

typedef struct {
    const float *w1, *b1, *w2, *b2; /* owned by the harness, live until st_free */
    float hid[HID];                 /* one row of the hidden activations */
} mlp_ctx;

static const st_tensor *find_param(const st_tensor *params, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (params[i].name && strcmp(params[i].name, name) == 0) return &params[i];
    fprintf(stderr, "kernelbench mlp: param '%s' missing\n", name);
    return NULL;
}

/* ndim 1 uses d0 only; a NULL tensor was already reported by find_param. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1) {
    if (!t) return 1;
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok && ndim == 1)
        fprintf(stderr, "kernelbench mlp: %s: expected f32 of shape [%lld]\n", what, (long long)d0);
    else if (!ok)
        fprintf(stderr, "kernelbench mlp: %s: expected f32 of shape [%lld, %lld]\n", what,
                (long long)d0, (long long)d1);
    return !ok;
}

/* nn.GELU() default: x·Φ(x) with the exact normal CDF */
static float gelu_erf(float x) {
    double v = x;
    return (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
}

void st_free(void *p) { free(p); }

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    const st_tensor *w1 = find_param(params, n_params, "fc1.weight");
    const st_tensor *b1 = find_param(params, n_params, "fc1.bias");
    const st_tensor *w2 = find_param(params, n_params, "fc2.weight");
    const st_tensor *b2 = find_param(params, n_params, "fc2.bias");
    if (check_f32(w1, "fc1.weight", 2, HID, IN) || check_f32(b1, "fc1.bias", 1, HID, 0) ||
        check_f32(w2, "fc2.weight", 2, OUT, HID) || check_f32(b2, "fc2.bias", 1, OUT, 0))
        return 1;
    mlp_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) return 1;
    ctx->w1 = w1->data;
    ctx->b1 = b1->data;
    ctx->w2 = w2->data;
    ctx->b2 = b2->data;
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    mlp_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "kernelbench mlp: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 2, BATCH, IN) || check_f32(&out[0], "y0", 2, BATCH, OUT)) return 1;
    const float *x = in[0].data;
    float *y = out[0].data;

    for (int r = 0; r < BATCH; r++) {
        const float *xr = x + (size_t)r * IN;
        /* nn.Linear keeps its weight as [out, in], so each output is a dot of two contiguous rows */
        for (int h = 0; h < HID; h++) {
            const float *w = ctx->w1 + (size_t)h * IN;
            double acc = ctx->b1[h];
            for (int k = 0; k < IN; k++) acc += (double)xr[k] * w[k];
            ctx->hid[h] = gelu_erf((float)acc);
        }
        for (int o = 0; o < OUT; o++) {
            const float *w = ctx->w2 + (size_t)o * HID;
            double acc = ctx->b2[o];
            for (int k = 0; k < HID; k++) acc += (double)ctx->hid[k] * w[k];
            float v = (float)acc;
            y[(size_t)r * OUT + o] = v < 0.0f ? 0.0f : v; /* NaN passes, as in torch.relu */
        }
    }
    return 0;
}
