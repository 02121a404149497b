/* Reference for t3/nbody: direct-summation gravity (G = 1, softening eps^2 = 0.0025) integrated
 * with S kick-drift-kick leapfrog steps of dt = 0.01, as a plain port would run it: one thread
 * per body sums the pull of all N bodies straight from global memory (no tiling), and separate
 * kernels apply the half kicks and the drift. The state lives in the output arrays. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define DT 0.01f
#define EPS2 0.0025f
#define THREADS 128 /* a plain default; N = 8192 then fills 64 SMs */

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "nbody reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int n, steps;
    float *acc; /* [N, 3] */
} nbody_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "nbody reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, int64_t n, int64_t cols) {
    int ok = t->dtype == ST_F32 && t->data != NULL && t->shape[0] == n &&
             (cols ? t->ndim == 2 && t->shape[1] == cols : t->ndim == 1);
    if (!ok) fprintf(stderr, "nbody reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

// ----------------------------------------------------------------------------
// kernels

__global__ void accel_kernel(const float *pos, const float *mass, float *acc, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    /* j == i adds nothing: its offset is zero and the softening keeps the distance finite */
    for (int j = 0; j < n; j++) {
        const float dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
        const float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + EPS2);
        const float s = mass[j] * inv * inv * inv;
        ax += s * dx;
        ay += s * dy;
        az += s * dz;
    }
    acc[3 * i] = ax;
    acc[3 * i + 1] = ay;
    acc[3 * i + 2] = az;
}

__global__ void kick_kernel(float *vel, const float *acc, float h, int len) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < len) vel[k] += h * acc[k];
}

__global__ void drift_kernel(float *pos, const float *vel, float dt, int len) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < len) pos[k] += dt * vel[k];
}

// ----------------------------------------------------------------------------

extern "C" void st_free(void *p) {
    nbody_ctx *ctx = (nbody_ctx *)p;
    if (!ctx) return;
    cudaFree(ctx->acc);
    free(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, steps;
    if (cfg_get(cfg, "N", &n) || cfg_get(cfg, "S", &steps)) return 1;
    if (n_params != 0 || n < 1 || 3 * n > INT32_MAX || steps < 0 || steps > INT32_MAX) {
        fprintf(stderr, "nbody reference: bad sizes (N=%lld S=%lld)\n", (long long)n, (long long)steps);
        return 1;
    }
    nbody_ctx *ctx = (nbody_ctx *)calloc(1, sizeof(nbody_ctx));
    if (!ctx) return 1;
    ctx->n = (int)n;
    ctx->steps = (int)steps;
    if (cudaMalloc(&ctx->acc, sizeof(float) * 3 * (size_t)n) != cudaSuccess) {
        st_free(ctx);
        return 1;
    }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const nbody_ctx *ctx = (const nbody_ctx *)p;
    const int n = ctx->n;
    if (n_in != 3 || n_out != 2 || check(&in[0], "pos", n, 3) || check(&in[1], "vel", n, 3) ||
        check(&in[2], "mass", n, 0) || check(&out[0], "pos_out", n, 3) || check(&out[1], "vel_out", n, 3))
        return 1;
    const float *mass = (const float *)in[2].data;
    float *pos = (float *)out[0].data, *vel = (float *)out[1].data, *acc = ctx->acc;
    const size_t bytes = sizeof(float) * 3 * (size_t)n;
    CUDA_CHECK(cudaMemcpyAsync(pos, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(vel, in[1].data, bytes, cudaMemcpyDeviceToDevice, stream));
    if (ctx->steps == 0) return 0;

    const int body_blocks = (n + THREADS - 1) / THREADS, comp_blocks = (3 * n + THREADS - 1) / THREADS;
    accel_kernel<<<body_blocks, THREADS, 0, stream>>>(pos, mass, acc, n);
    CUDA_CHECK(cudaGetLastError());
    for (int s = 0; s < ctx->steps; s++) {
        kick_kernel<<<comp_blocks, THREADS, 0, stream>>>(vel, acc, 0.5f * DT, 3 * n);
        CUDA_CHECK(cudaGetLastError());
        drift_kernel<<<comp_blocks, THREADS, 0, stream>>>(pos, vel, DT, 3 * n);
        CUDA_CHECK(cudaGetLastError());
        accel_kernel<<<body_blocks, THREADS, 0, stream>>>(pos, mass, acc, n);
        CUDA_CHECK(cudaGetLastError());
        kick_kernel<<<comp_blocks, THREADS, 0, stream>>>(vel, acc, 0.5f * DT, 3 * n);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
