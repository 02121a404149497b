/* CUDA solution for the KernelBench small CNN (tests/kernelbench/cnn.py) in fp32, plain CUDA:
 * conv3x3 -> BatchNorm -> ReLU -> 2x2 max pool -> conv3x3 -> BatchNorm -> ReLU -> global average
 * pool -> Linear, in five launches. The model runs in train mode, so BatchNorm needs the statistics
 * of the whole batch before it can normalise anything; one block per channel owns that channel's
 * statistics and then applies BatchNorm, ReLU and the pool itself, so the normalised map never goes
 * to device memory. Same maths as cnn.c (validated on the host), accumulating in fp32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "kernelbench cnn: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

/* the sizes cnn.py fixes: batch, channels of each stage, image side before and after the pool */
enum { N = 8, C0 = 3, C1 = 16, C2 = 32, CLASSES = 10, S0 = 32, S1 = 16 };
#define BN_EPS 1e-5f

/* workspace layout, in floats */
enum {
    CONV1_OFF = 0,                           /* [N, C1, S0, S0] */
    POOL1_OFF = CONV1_OFF + N * C1 * S0 * S0, /* [N, C1, S1, S1] */
    CONV2_OFF = POOL1_OFF + N * C1 * S1 * S1, /* [N, C2, S1, S1] */
    POOLED_OFF = CONV2_OFF + N * C2 * S1 * S1, /* [N, C2] */
    WORKSPACE_FLOATS = POOLED_OFF + N * C2
};

typedef struct {
    /* owned by the harness, live until st_free */
    const float *conv1_w, *conv1_b, *bn1_w, *bn1_b;
    const float *conv2_w, *conv2_b, *bn2_w, *bn2_b;
    const float *fc_w, *fc_b;
    float *ws; /* WORKSPACE_FLOATS of activations between the stages */
} cnn_ctx;

static const st_tensor *find_param(const st_tensor *params, int32_t n, const char *name) {
    for (int32_t i = 0; i < n; i++)
        if (params[i].name && strcmp(params[i].name, name) == 0) return &params[i];
    fprintf(stderr, "kernelbench cnn: param '%s' missing\n", name);
    return NULL;
}

/* Only the first ndim of d0..d3 count; a NULL tensor was already reported by find_param. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                     int64_t d2, int64_t d3) {
    if (!t) return 1;
    const int64_t want[4] = {d0, d1, d2, d3};
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        fprintf(stderr, "kernelbench cnn: %s: expected f32 of shape [", what);
        for (int i = 0; i < ndim; i++) fprintf(stderr, i ? ", %lld" : "%lld", (long long)want[i]);
        fprintf(stderr, "]\n");
    }
    return !ok;
}

// ----------------------------------------------------------------------------
// Conv2d(CIN, COUT, 3, padding=1) on [N, CIN, S, S]: one thread per output pixel, a block per
// (pixel range, output channel, image), that channel's 3x3xCIN filter staged in shared memory.
// The input maps are a few hundred KiB, so the neighbouring-pixel reuse comes from L1/L2.

#define CONV_THREADS 256

template <int CIN, int COUT, int S>
__global__ void __launch_bounds__(CONV_THREADS)
conv3x3_kernel(const float *__restrict__ in, const float *__restrict__ w,
               const float *__restrict__ b, float *__restrict__ out) {
    __shared__ float filt[CIN * 9];
    const int co = blockIdx.y, n = blockIdx.z;
    for (int i = threadIdx.x; i < CIN * 9; i += blockDim.x) filt[i] = w[co * CIN * 9 + i];
    __syncthreads();
    const int pix = blockIdx.x * blockDim.x + threadIdx.x;
    if (pix >= S * S) return;
    const int y = pix / S, x = pix % S;
    float acc = b[co];
    for (int ci = 0; ci < CIN; ci++) {
        const float *plane = in + (n * CIN + ci) * S * S;
#pragma unroll
        for (int ky = 0; ky < 3; ky++) {
            const int iy = y + ky - 1;
            if (iy < 0 || iy >= S) continue;
#pragma unroll
            for (int kx = 0; kx < 3; kx++) {
                const int ix = x + kx - 1;
                if (ix < 0 || ix >= S) continue;
                acc = fmaf(plane[iy * S + ix], filt[ci * 9 + ky * 3 + kx], acc);
            }
        }
    }
    out[(n * COUT + co) * S * S + pix] = acc;
}

template <int CIN, int COUT, int S>
static int conv3x3(const float *in, const float *w, const float *b, float *out, cudaStream_t stream) {
    const dim3 grid((S * S + CONV_THREADS - 1) / CONV_THREADS, COUT, N);
    conv3x3_kernel<CIN, COUT, S><<<grid, CONV_THREADS, 0, stream>>>(in, w, b, out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

// ----------------------------------------------------------------------------
// Train-mode BatchNorm + ReLU + pool: one block per channel of [N, C, S, S].

#define BN_THREADS 256 /* a multiple of the warp size: block_sum relies on it */

/* Every thread gets the block's total. scratch holds one float per warp. */
__device__ float block_sum(float v, float *scratch) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < (int)blockDim.x / 32; w++) total += scratch[w];
    __syncthreads(); /* scratch is free for the next call */
    return total;
}

/* bn(x) = (x - mean)*scale + beta, with the mean and the biased variance of channel c over the
 * batch and both spatial dims and scale = gamma / sqrt(var + eps). Two passes, because the
 * one-pass E[x²] - E[x]² loses digits in fp32 when the mean is large next to the spread; the
 * channel is a few KiB and stays in L1/L2 for the second pass. */
template <int C, int S>
__device__ void channel_stats(const float *x, int c, float gamma, float *mean, float *scale) {
    __shared__ float scratch[BN_THREADS / 32];
    constexpr int PLANE = S * S, COUNT = N * PLANE;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < COUNT; i += blockDim.x)
        sum += x[(i / PLANE * C + c) * PLANE + i % PLANE];
    const float m = block_sum(sum, scratch) / COUNT;
    float sq = 0.0f;
    for (int i = threadIdx.x; i < COUNT; i += blockDim.x) {
        const float d = x[(i / PLANE * C + c) * PLANE + i % PLANE] - m;
        sq = fmaf(d, d, sq);
    }
    const float var = block_sum(sq, scratch) / COUNT;
    *mean = m;
    *scale = gamma / sqrtf(var + BN_EPS);
}

__device__ __forceinline__ float bn_relu(float v, float mean, float scale, float beta) {
    const float y = (v - mean) * scale + beta;
    return y < 0.0f ? 0.0f : y; /* NaN passes, as in torch.relu */
}

/* [N, C, S, S] -> [N, C, S/2, S/2] */
template <int C, int S>
__global__ void __launch_bounds__(BN_THREADS)
bn_relu_maxpool_kernel(const float *__restrict__ x, const float *__restrict__ gamma,
                       const float *__restrict__ beta, float *__restrict__ out) {
    constexpr int H = S / 2;
    const int c = blockIdx.x;
    float mean, scale;
    channel_stats<C, S>(x, c, gamma[c], &mean, &scale);
    const float shift = beta[c];
    for (int i = threadIdx.x; i < N * H * H; i += blockDim.x) {
        const int n = i / (H * H), q = i % (H * H), py = q / H, px = q % H;
        const float *win = x + (n * C + c) * S * S + (2 * py) * S + 2 * px;
        float best = bn_relu(win[0], mean, scale, shift);
#pragma unroll
        for (int j = 1; j < 4; j++) {
            const float v = bn_relu(win[(j / 2) * S + j % 2], mean, scale, shift);
            if (v > best || isnan(v)) best = v; /* NaN wins, as in nn.MaxPool2d */
        }
        out[(n * C + c) * H * H + q] = best;
    }
}

/* [N, C, S, S] -> [N, C]; a warp per image sums its plane. */
template <int C, int S>
__global__ void __launch_bounds__(BN_THREADS)
bn_relu_avgpool_kernel(const float *__restrict__ x, const float *__restrict__ gamma,
                       const float *__restrict__ beta, float *__restrict__ out) {
    const int c = blockIdx.x, lane = threadIdx.x % 32;
    float mean, scale;
    channel_stats<C, S>(x, c, gamma[c], &mean, &scale);
    const float shift = beta[c];
    for (int n = threadIdx.x / 32; n < N; n += blockDim.x / 32) {
        const float *plane = x + (n * C + c) * S * S;
        float sum = 0.0f;
        for (int i = lane; i < S * S; i += 32) sum += bn_relu(plane[i], mean, scale, shift);
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) out[n * C + c] = sum / (S * S);
    }
}

template <int C, int S>
static int bn_relu_maxpool(const float *x, const float *gamma, const float *beta, float *out,
                           cudaStream_t stream) {
    bn_relu_maxpool_kernel<C, S><<<C, BN_THREADS, 0, stream>>>(x, gamma, beta, out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

template <int C, int S>
static int bn_relu_avgpool(const float *x, const float *gamma, const float *beta, float *out,
                           cudaStream_t stream) {
    bn_relu_avgpool_kernel<C, S><<<C, BN_THREADS, 0, stream>>>(x, gamma, beta, out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

// ----------------------------------------------------------------------------
// classifier: y[N, CLASSES] = pooled[N, C2]·Wᵀ + b, one thread per output (nn.Linear keeps W as
// [classes, features]).

__global__ void fc_kernel(const float *__restrict__ pooled, const float *__restrict__ w,
                          const float *__restrict__ b, float *__restrict__ y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * CLASSES) return;
    const int n = i / CLASSES, k = i % CLASSES;
    float acc = b[k];
#pragma unroll
    for (int c = 0; c < C2; c++) acc = fmaf(pooled[n * C2 + c], w[k * C2 + c], acc);
    y[i] = acc;
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    cnn_ctx *ctx = (cnn_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->ws);
    free(ctx);
}

static int init_ctx(cnn_ctx *ctx, const st_tensor *params, int32_t n_params) {
#define PARAM(field, key, ...) do { \
        const st_tensor *t_ = find_param(params, n_params, key); \
        if (check_f32(t_, key, __VA_ARGS__)) return 1; \
        ctx->field = (const float *)t_->data; \
    } while (0)
    PARAM(conv1_w, "conv1.weight", 4, C1, C0, 3, 3);
    PARAM(conv1_b, "conv1.bias", 1, C1, 0, 0, 0);
    PARAM(bn1_w, "bn1.weight", 1, C1, 0, 0, 0);
    PARAM(bn1_b, "bn1.bias", 1, C1, 0, 0, 0);
    PARAM(conv2_w, "conv2.weight", 4, C2, C1, 3, 3);
    PARAM(conv2_b, "conv2.bias", 1, C2, 0, 0, 0);
    PARAM(bn2_w, "bn2.weight", 1, C2, 0, 0, 0);
    PARAM(bn2_b, "bn2.bias", 1, C2, 0, 0, 0);
    PARAM(fc_w, "fc.weight", 2, CLASSES, C2, 0, 0);
    PARAM(fc_b, "fc.bias", 1, CLASSES, 0, 0, 0);
#undef PARAM
    CUDA_CHECK(cudaMalloc(&ctx->ws, sizeof(float) * WORKSPACE_FLOATS));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    cnn_ctx *ctx = (cnn_ctx *)calloc(1, sizeof(cnn_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    cnn_ctx *ctx = (cnn_ctx *)p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "kernelbench cnn: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 4, N, C0, S0, S0) || check_f32(&out[0], "y0", 2, N, CLASSES, 0, 0))
        return 1;
    const float *x = (const float *)in[0].data;
    float *y = (float *)out[0].data;
    float *conv1 = ctx->ws + CONV1_OFF, *pool1 = ctx->ws + POOL1_OFF;
    float *conv2 = ctx->ws + CONV2_OFF, *pooled = ctx->ws + POOLED_OFF;

    if (conv3x3<C0, C1, S0>(x, ctx->conv1_w, ctx->conv1_b, conv1, stream)) return 1;
    if (bn_relu_maxpool<C1, S0>(conv1, ctx->bn1_w, ctx->bn1_b, pool1, stream)) return 1;
    if (conv3x3<C1, C2, S1>(pool1, ctx->conv2_w, ctx->conv2_b, conv2, stream)) return 1;
    if (bn_relu_avgpool<C2, S1>(conv2, ctx->bn2_w, ctx->bn2_b, pooled, stream)) return 1;
    fc_kernel<<<(N * CLASSES + 127) / 128, 128, 0, stream>>>(pooled, ctx->fc_w, ctx->fc_b, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
