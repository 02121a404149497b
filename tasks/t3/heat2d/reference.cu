/* Reference for t3/heat2d: S Jacobi sweeps for the 2-D Poisson problem on an [ny, nx] grid,
 * u_new = (up + down + left + right + b) / 4 at interior points, boundary values fixed. As a plain
 * port runs it: one kernel launch per sweep, one thread per grid point reading its neighbours from
 * global memory, ping-ponging between the output and a scratch grid. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "heat2d reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

typedef struct {
    int ny, nx, sweeps;
    float *tmp; /* [ny, nx] */
} heat_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "heat2d reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const heat_ctx *c) {
    int ok = t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == c->ny && t->shape[1] == c->nx && t->data;
    if (!ok) fprintf(stderr, "heat2d reference: %s: expected f32 [%d, %d]\n", t->name, c->ny, c->nx);
    return !ok;
}

__global__ void sweep_kernel(const float *src, const float *b, float *dst, int ny, int nx) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= ny || j >= nx) return;
    const size_t k = (size_t)i * nx + j;
    if (i == 0 || i == ny - 1 || j == 0 || j == nx - 1)
        dst[k] = src[k];
    else
        dst[k] = 0.25f * (src[k - nx] + src[k + nx] + src[k - 1] + src[k + 1] + b[k]);
}

extern "C" void st_free(void *p) {
    heat_ctx *ctx = (heat_ctx *)p;
    if (!ctx) return;
    cudaFree(ctx->tmp);
    free(ctx);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t ny, nx, sweeps;
    if (cfg_get(cfg, "ny", &ny) || cfg_get(cfg, "nx", &nx) || cfg_get(cfg, "S", &sweeps)) return 1;
    /* the grid's y dimension holds one block row per 8 grid rows */
    if (n_params != 0 || ny < 1 || nx < 1 || ny > 65535LL * 8 || nx > INT32_MAX || sweeps < 0 ||
        sweeps > INT32_MAX) {
        fprintf(stderr, "heat2d reference: bad sizes (ny=%lld nx=%lld S=%lld)\n", (long long)ny,
                (long long)nx, (long long)sweeps);
        return 1;
    }
    heat_ctx *ctx = (heat_ctx *)calloc(1, sizeof(heat_ctx));
    if (!ctx) return 1;
    ctx->ny = (int)ny;
    ctx->nx = (int)nx;
    ctx->sweeps = (int)sweeps;
    if (cudaMalloc(&ctx->tmp, sizeof(float) * (size_t)ny * (size_t)nx) != cudaSuccess) {
        st_free(ctx);
        return 1;
    }
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const heat_ctx *c = (const heat_ctx *)p;
    if (n_in != 2 || n_out != 1 || check(&in[0], c) || check(&in[1], c) || check(&out[0], c)) return 1;
    const float *u0 = (const float *)in[0].data, *b = (const float *)in[1].data;
    float *u = (float *)out[0].data;
    if (c->sweeps == 0) {
        CUDA_CHECK(cudaMemcpyAsync(u, u0, sizeof(float) * (size_t)c->ny * c->nx, cudaMemcpyDeviceToDevice, stream));
        return 0;
    }
    const dim3 block(32, 8), grid((c->nx + 31) / 32, (c->ny + 7) / 8);
    /* sweep s writes u when S - 1 - s is even, so the last one lands in the output */
    const float *src = u0;
    for (int s = 0; s < c->sweeps; s++) {
        float *dst = (c->sweeps - 1 - s) % 2 == 0 ? u : c->tmp;
        sweep_kernel<<<grid, block, 0, stream>>>(src, b, dst, c->ny, c->nx);
        CUDA_CHECK(cudaGetLastError());
        src = dst;
    }
    return 0;
}
