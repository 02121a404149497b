/* Reference for t1/conv2d: y = conv3x3(x, w), stride 1, zero padding 1, no bias, NCHW. x is bf16
 * [N, C, H, W], w is bf16 [K, C, 3, 3] (a weight handed to st_init), y is bf16 [N, K, H, W];
 * y[n, k, h, w] = sum over c, r, s of w[k, c, r, s] * x[n, c, h + r - 1, w + s - 1], taps outside
 * the image counting as zero, summed in float and rounded once to bf16. The direct convolution:
 * one thread per output element, summing its C*9 products in (c, r, s) order. Obviously correct
 * for any shape; no tensor cores, no data reuse beyond what the caches find. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256
#define MAX_BLOCKS 65535

typedef struct conv_ctx {
    int64_t N, C, H, W, K;
    const __nv_bfloat16 *w;  /* owned by the harness, unchanged until st_free */
} conv_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

__global__ void conv3x3_direct_kernel(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                      __nv_bfloat16 *y, int64_t N, int64_t C, int64_t H,
                                      int64_t W, int64_t K) {
    const int64_t total = N * K * H * W;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = o % W, oh = o / W % H, k = o / (W * H) % K, n = o / (W * H * K);
        float acc = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const __nv_bfloat16 *xc = x + (n * C + c) * H * W;
            const __nv_bfloat16 *wc = w + (k * C + c) * 9;
            for (int r = 0; r < 3; r++) {
                const int64_t ih = oh + r - 1;
                if (ih < 0 || ih >= H) continue;
                for (int s = 0; s < 3; s++) {
                    const int64_t iw = ow + s - 1;
                    if (iw < 0 || iw >= W) continue;
                    acc += __bfloat162float(wc[r * 3 + s]) * __bfloat162float(xc[ih * W + iw]);
                }
            }
        }
        y[o] = __float2bfloat16(acc);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static bool tensor_ok(const st_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == d0 && t->shape[1] == d1 &&
           t->shape[2] == d2 && t->shape[3] == d3 && t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)stream;
    int64_t N, C, H, W, K;
    if (cfg == NULL || ctx == NULL || n_params != 1) return 1;
    if (cfg_get(cfg, "N", &N) || cfg_get(cfg, "C", &C) || cfg_get(cfg, "H", &H) ||
        cfg_get(cfg, "W", &W) || cfg_get(cfg, "K", &K))
        return 1;
    if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1) return 1;
    if (!tensor_ok(&params[0], K, C, 3, 3)) return 1;

    conv_ctx *c = (conv_ctx *)malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->N = N;
    c->C = C;
    c->H = H;
    c->W = W;
    c->K = K;
    c->w = (const __nv_bfloat16 *)params[0].data;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const conv_ctx *c = (const conv_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->N, c->C, c->H, c->W) || !tensor_ok(&out[0], c->N, c->K, c->H, c->W))
        return 1;

    const int64_t total = c->N * c->K * c->H * c->W;
    const int64_t blocks = (total + THREADS - 1) / THREADS;
    conv3x3_direct_kernel<<<(unsigned)(blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS), THREADS, 0,
                            stream>>>((const __nv_bfloat16 *)in[0].data, c->w,
                                      (__nv_bfloat16 *)out[0].data, c->N, c->C, c->H, c->W, c->K);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
