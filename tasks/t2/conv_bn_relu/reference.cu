/* Reference for t2/conv_bn_relu: y = ReLU(BatchNorm(conv3x3(x, weight))) in bf16, run the way an
 * eager framework runs a ResNet layer without cuDNN: a direct convolution kernel (one thread per
 * output, fp32 sum over the 9*C taps, rounded to bf16 into a temporary), then a batch-norm kernel
 * into the output, then an in-place ReLU kernel. Three passes over the activations and no tensor
 * cores: obviously correct first, fast never. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "conv_bn_relu reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define THREADS 256

typedef struct {
    int64_t N, C, K, H, W;
    const __nv_bfloat16 *weight;                        /* owned by the harness, live until st_free */
    const float *gamma, *beta, *mean, *var, *eps;
    __nv_bfloat16 *conv;                                /* [N, K, H, W] temporary */
} cbr_ctx;

// ----------------------------------------------------------------------------
// kernels: one thread per output element, the framework way

__global__ void conv3x3_kernel(const __nv_bfloat16 *x, const __nv_bfloat16 *weight,
                               __nv_bfloat16 *out, int64_t N, int64_t C, int64_t K, int64_t H,
                               int64_t W) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * K * H * W) return;
    const int64_t w = i % W, h = (i / W) % H, k = (i / (W * H)) % K, n = i / (W * H * K);
    float acc = 0.0f;
    for (int64_t c = 0; c < C; c++) {
        const __nv_bfloat16 *xc = x + (n * C + c) * H * W;
        const __nv_bfloat16 *wc = weight + (k * C + c) * 9;
        for (int r = 0; r < 3; r++) {
            const int64_t hh = h + r - 1;
            if (hh < 0 || hh >= H) continue;
            for (int s = 0; s < 3; s++) {
                const int64_t ww = w + s - 1;
                if (ww < 0 || ww >= W) continue;
                acc += __bfloat162float(xc[hh * W + ww]) * __bfloat162float(wc[r * 3 + s]);
            }
        }
    }
    out[i] = __float2bfloat16(acc);
}

__global__ void batchnorm_kernel(const __nv_bfloat16 *in, __nv_bfloat16 *out, const float *gamma,
                                 const float *beta, const float *mean, const float *var,
                                 const float *eps, int64_t K, int64_t HW, int64_t total) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t k = (i / HW) % K;
    const float v = (__bfloat162float(in[i]) - mean[k]) / sqrtf(var[k] + eps[0]) * gamma[k] + beta[k];
    out[i] = __float2bfloat16(v);
}

__global__ void relu_kernel(__nv_bfloat16 *y, int64_t total) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    y[i] = __float2bfloat16(fmaxf(__bfloat162float(y[i]), 0.0f));
}

static unsigned int blocks_for(int64_t n) { return (unsigned int)((n + THREADS - 1) / THREADS); }

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "conv_bn_relu reference: size '%s' missing from the config\n", name);
    return 1;
}

/* shape given as up to 4 dims; unused trailing dims are -1 */
static int check_tensor(const st_tensor *t, const char *what, st_dtype dt, int ndim, int64_t d0,
                        int64_t d1, int64_t d2, int64_t d3) {
    const int64_t d[4] = {d0, d1, d2, d3};
    int ok = t->dtype == dt && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "conv_bn_relu reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    cbr_ctx *ctx = (cbr_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->conv);
    free(ctx);
}

static int init_ctx(cbr_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "N", &ctx->N) || cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "K", &ctx->K) ||
        cfg_get(cfg, "H", &ctx->H) || cfg_get(cfg, "W", &ctx->W))
        return 1;
    if (ctx->N < 1 || ctx->C < 1 || ctx->K < 1 || ctx->H < 1 || ctx->W < 1 ||
        (ctx->N * ctx->K * ctx->H * ctx->W + THREADS - 1) / THREADS > UINT32_MAX) {
        fprintf(stderr, "conv_bn_relu reference: sizes out of range\n");
        return 1;
    }
    if (n_params != 6) {
        fprintf(stderr, "conv_bn_relu reference: expected 6 params, got %d\n", n_params);
        return 1;
    }
    const int64_t K = ctx->K;
    if (check_tensor(&params[0], "weight", ST_BF16, 4, K, ctx->C, 3, 3) ||
        check_tensor(&params[1], "gamma", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[2], "beta", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[3], "running_mean", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[4], "running_var", ST_F32, 1, K, -1, -1, -1) ||
        check_tensor(&params[5], "eps", ST_F32, 1, 1, -1, -1, -1))
        return 1;
    ctx->weight = (const __nv_bfloat16 *)params[0].data;
    ctx->gamma = (const float *)params[1].data;
    ctx->beta = (const float *)params[2].data;
    ctx->mean = (const float *)params[3].data;
    ctx->var = (const float *)params[4].data;
    ctx->eps = (const float *)params[5].data;
    CUDA_CHECK(cudaMalloc(&ctx->conv, (size_t)(ctx->N * K * ctx->H * ctx->W) * sizeof(__nv_bfloat16)));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    cbr_ctx *ctx = (cbr_ctx *)calloc(1, sizeof(cbr_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    cbr_ctx *ctx = (cbr_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "conv_bn_relu reference: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t N = ctx->N, C = ctx->C, K = ctx->K, H = ctx->H, W = ctx->W;
    if (check_tensor(&in[0], "x", ST_BF16, 4, N, C, H, W) ||
        check_tensor(&out[0], "y", ST_BF16, 4, N, K, H, W))
        return 1;
    const __nv_bfloat16 *x = (const __nv_bfloat16 *)in[0].data;
    __nv_bfloat16 *y = (__nv_bfloat16 *)out[0].data;
    const int64_t total = N * K * H * W;

    conv3x3_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, ctx->weight, ctx->conv, N, C, K, H, W);
    CUDA_CHECK(cudaGetLastError());
    batchnorm_kernel<<<blocks_for(total), THREADS, 0, stream>>>(ctx->conv, y, ctx->gamma, ctx->beta,
                                                                ctx->mean, ctx->var, ctx->eps, K,
                                                                H * W, total);
    CUDA_CHECK(cudaGetLastError());
    relu_kernel<<<blocks_for(total), THREADS, 0, stream>>>(y, total);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
