/* Reference for t2/adamw: one AdamW step, written the way an eager framework runs the formula
 * line by line: one elementwise kernel per line (decay p, update m, update v, bias-correct m,
 * bias-correct v, apply the step), each a full pass over device memory, with the bias-corrected
 * moments in temporaries. The scalar factors are computed in double on the host, as PyTorch does
 * with Python floats, and rounded once to float. Obviously correct first, fast never. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "adamw reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define LR 1e-3
#define BETA1 0.9
#define BETA2 0.999
#define EPS 1e-8
#define WEIGHT_DECAY 0.01
#define THREADS 256

typedef struct {
    int64_t n, t;
    float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bc1, bc2, lr, eps;
    float *m_hat, *v_hat; /* [n] temporaries, as an eager framework would allocate */
} adamw_ctx;

// ----------------------------------------------------------------------------
// kernels: one thread per element, one formula line each

__global__ void decay_kernel(const float *p, float *p_out, float decay, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p_out[i] = p[i] * decay;
}

__global__ void first_moment_kernel(const float *m, const float *g, float *m_out, float b1,
                                    float omb1, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) m_out[i] = b1 * m[i] + omb1 * g[i];
}

__global__ void second_moment_kernel(const float *v, const float *g, float *v_out, float b2,
                                     float omb2, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v_out[i] = b2 * v[i] + omb2 * g[i] * g[i];
}

__global__ void scale_kernel(const float *x, float *y, float divisor, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / divisor;
}

__global__ void step_kernel(float *p, const float *m_hat, const float *v_hat, float lr, float eps,
                            int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] - lr * m_hat[i] / (sqrtf(v_hat[i]) + eps);
}

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "adamw reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == n && t->data != NULL;
    if (!ok) fprintf(stderr, "adamw reference: %s: expected f32 of shape [%lld]\n", what, (long long)n);
    return !ok;
}

extern "C" void st_free(void *p) {
    adamw_ctx *ctx = (adamw_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    cudaFree(ctx->m_hat);
    cudaFree(ctx->v_hat);
    free(ctx);
}

static int init_ctx(adamw_ctx *ctx, const st_config *cfg, int32_t n_params) {
    if (cfg_get(cfg, "n", &ctx->n) || cfg_get(cfg, "t", &ctx->t)) return 1;
    if (ctx->n < 1 || ctx->t < 1 || n_params != 0) {
        fprintf(stderr, "adamw reference: bad sizes or params (n=%lld t=%lld, %d params)\n",
                (long long)ctx->n, (long long)ctx->t, n_params);
        return 1;
    }
    ctx->decay = (float)(1.0 - LR * WEIGHT_DECAY);
    ctx->beta1 = (float)BETA1;
    ctx->one_minus_beta1 = (float)(1.0 - BETA1);
    ctx->beta2 = (float)BETA2;
    ctx->one_minus_beta2 = (float)(1.0 - BETA2);
    ctx->bc1 = (float)(1.0 - pow(BETA1, (double)ctx->t));
    ctx->bc2 = (float)(1.0 - pow(BETA2, (double)ctx->t));
    ctx->lr = (float)LR;
    ctx->eps = (float)EPS;
    CUDA_CHECK(cudaMalloc(&ctx->m_hat, (size_t)ctx->n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->v_hat, (size_t)ctx->n * sizeof(float)));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    adamw_ctx *ctx = (adamw_ctx *)calloc(1, sizeof(adamw_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    adamw_ctx *ctx = (adamw_ctx *)p;
    if (n_in != 4 || n_out != 3) {
        fprintf(stderr, "adamw reference: expected 4 inputs and 3 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t n = ctx->n;
    if (check_vec(&in[0], "p", n) || check_vec(&in[1], "g", n) || check_vec(&in[2], "m", n) ||
        check_vec(&in[3], "v", n) || check_vec(&out[0], "p_new", n) ||
        check_vec(&out[1], "m_new", n) || check_vec(&out[2], "v_new", n))
        return 1;
    const float *P = (const float *)in[0].data, *G = (const float *)in[1].data;
    const float *M = (const float *)in[2].data, *V = (const float *)in[3].data;
    float *P_new = (float *)out[0].data, *M_new = (float *)out[1].data, *V_new = (float *)out[2].data;
    const unsigned int blocks = (unsigned int)((n + THREADS - 1) / THREADS);

    decay_kernel<<<blocks, THREADS, 0, stream>>>(P, P_new, ctx->decay, n);
    CUDA_CHECK(cudaGetLastError());
    first_moment_kernel<<<blocks, THREADS, 0, stream>>>(M, G, M_new, ctx->beta1, ctx->one_minus_beta1, n);
    CUDA_CHECK(cudaGetLastError());
    second_moment_kernel<<<blocks, THREADS, 0, stream>>>(V, G, V_new, ctx->beta2, ctx->one_minus_beta2, n);
    CUDA_CHECK(cudaGetLastError());
    scale_kernel<<<blocks, THREADS, 0, stream>>>(M_new, ctx->m_hat, ctx->bc1, n);
    CUDA_CHECK(cudaGetLastError());
    scale_kernel<<<blocks, THREADS, 0, stream>>>(V_new, ctx->v_hat, ctx->bc2, n);
    CUDA_CHECK(cudaGetLastError());
    step_kernel<<<blocks, THREADS, 0, stream>>>(P_new, ctx->m_hat, ctx->v_hat, ctx->lr, ctx->eps, n);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
