/* Reference for t2/lstm: one LSTM layer over a sequence, the way an eager framework runs an
 * LSTM cell in a Python loop: for every time step two cuBLAS SGEMMs (x_t·W_ih^T, then
 * h_{t-1}·W_hh^T accumulated onto it) into a gates buffer, and one elementwise kernel that adds
 * the bias, applies the gate nonlinearities and writes c_t and h_t. Plain fp32 throughout: the
 * cuBLAS handle stays in its default math mode, so no TF32. Three launches per step, T steps. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "lstm reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "lstm reference: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
            #call, (int)s_); return 1; } } while (0)

#define WORKSPACE_BYTES ((size_t)32 << 20)
#define THREADS 256

typedef struct {
    int64_t T, B, I, H;
    const float *W_ih, *W_hh, *b; /* owned by the harness, live until st_free */
    float *gates;                 /* [B, 4H] */
    void *workspace;
    cublasHandle_t handle;
} lstm_ctx;

// ----------------------------------------------------------------------------

__device__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* one thread per (b, j): the four gates of unit j for batch row b */
__global__ void lstm_cell_kernel(const float *gates, const float *bias, const float *c_prev,
                                 float *c_out, float *h_out, int64_t B, int64_t H) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= B * H) return;
    const int64_t b = e / H, j = e % H;
    const float *z = gates + b * 4 * H;
    const float i = sigmoidf(z[j] + bias[j]);
    const float f = sigmoidf(z[H + j] + bias[H + j]);
    const float g = tanhf(z[2 * H + j] + bias[2 * H + j]);
    const float o = sigmoidf(z[3 * H + j] + bias[3 * H + j]);
    const float c = f * c_prev[e] + i * g;
    c_out[e] = c;
    h_out[e] = o * tanhf(c);
}

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "lstm reference: size '%s' missing from the config\n", name);
    return 1;
}

/* shape of up to 3 dims; unused trailing dims are ignored */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
    const int64_t d[3] = {d0, d1, d2};
    int ok = t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == d[i];
    if (!ok) fprintf(stderr, "lstm reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    lstm_ctx *ctx = (lstm_ctx *)p;
    if (!ctx) return;
    /* st_free has no way to report; a failing free here would only hide the real error. */
    if (ctx->handle) cublasDestroy(ctx->handle);
    cudaFree(ctx->gates);
    cudaFree(ctx->workspace);
    free(ctx);
}

static int init_ctx(lstm_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "I", &ctx->I) ||
        cfg_get(cfg, "H", &ctx->H))
        return 1;
    /* cuBLAS takes int dimensions */
    if (ctx->T < 1 || ctx->B < 1 || ctx->I < 1 || ctx->H < 1 || 4 * ctx->H > INT32_MAX ||
        ctx->B * 4 * ctx->H > INT32_MAX) {
        fprintf(stderr, "lstm reference: sizes out of range\n");
        return 1;
    }
    if (n_params != 3) {
        fprintf(stderr, "lstm reference: expected 3 params, got %d\n", n_params);
        return 1;
    }
    const int64_t H = ctx->H;
    if (check_tensor(&params[0], "W_ih", 2, 4 * H, ctx->I, 0) ||
        check_tensor(&params[1], "W_hh", 2, 4 * H, H, 0) || check_tensor(&params[2], "b", 1, 4 * H, 0, 0))
        return 1;
    ctx->W_ih = (const float *)params[0].data;
    ctx->W_hh = (const float *)params[1].data;
    ctx->b = (const float *)params[2].data;
    CUDA_CHECK(cudaMalloc(&ctx->gates, (size_t)(ctx->B * 4 * H) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasCreate(&ctx->handle));
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    lstm_ctx *ctx = (lstm_ctx *)calloc(1, sizeof(lstm_ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    lstm_ctx *ctx = (lstm_ctx *)p;
    if (n_in != 3 || n_out != 2) {
        fprintf(stderr, "lstm reference: expected 3 inputs and 2 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t T = ctx->T, B = ctx->B, I = ctx->I, H = ctx->H;
    if (check_tensor(&in[0], "x", 3, T, B, I) || check_tensor(&in[1], "h0", 2, B, H, 0) ||
        check_tensor(&in[2], "c0", 2, B, H, 0) || check_tensor(&out[0], "h_seq", 3, T, B, H) ||
        check_tensor(&out[1], "c_final", 2, B, H, 0))
        return 1;
    const float *x = (const float *)in[0].data, *h0 = (const float *)in[1].data;
    const float *c0 = (const float *)in[2].data;
    float *h_seq = (float *)out[0].data, *c_final = (float *)out[1].data;
    const float one = 1.0f, zero = 0.0f;
    const unsigned int blocks = (unsigned int)((B * H + THREADS - 1) / THREADS);

    /* setting the stream resets cuBLAS to its default workspace, so hand ours over again */
    CUBLAS_CHECK(cublasSetStream(ctx->handle, stream));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->handle, ctx->workspace, WORKSPACE_BYTES));

    for (int64_t t = 0; t < T; t++) {
        const float *h_prev = t == 0 ? h0 : h_seq + (t - 1) * B * H;
        const float *c_prev = t == 0 ? c0 : c_final; /* c_final doubles as the running cell state */
        /* row-major gates[B, 4H] = x_t[B, I]·W_ih^T is column-major gates^T = W_ih·x_t^T, and the
         * row-major W_ih[4H, I] already is W_ih^T in column-major form: transpose it back */
        CUBLAS_CHECK(cublasSgemm(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)(4 * H), (int)B, (int)I,
                                 &one, ctx->W_ih, (int)I, x + t * B * I, (int)I, &zero, ctx->gates,
                                 (int)(4 * H)));
        CUBLAS_CHECK(cublasSgemm(ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)(4 * H), (int)B, (int)H,
                                 &one, ctx->W_hh, (int)H, h_prev, (int)H, &one, ctx->gates,
                                 (int)(4 * H)));
        lstm_cell_kernel<<<blocks, THREADS, 0, stream>>>(ctx->gates, ctx->b, c_prev, c_final,
                                                         h_seq + t * B * H, B, H);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
