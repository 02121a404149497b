/* KernelBench level1/88_MinGPTNewGelu: the tanh form of GELU,
 * y = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), over an [8192, 8192] fp32 tensor.
 * Eager PyTorch runs it as seven elementwise kernels (pow, two scalar multiplies, add, tanh, add,
 * the final products), each a full trip through device memory; here it is one pass that reads x
 * once and writes y once with 16-byte vectors. The arithmetic follows PyTorch's order step by
 * step with round-to-nearest intrinsics, so no contraction into FMAs moves the result away from
 * the reference by more than tanhf's own last-bit differences. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define TAG "kernelbench level1/88"
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, TAG ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

/* An f32 tensor of exactly these dims (unused trailing dims are left at 0), with data. */
static int check_f32(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1 = 0,
                     int64_t d2 = 0, int64_t d3 = 0) {
    const int64_t want[4] = {d0, d1, d2, d3};
    int ok = t != NULL && t->dtype == ST_F32 && t->ndim == ndim && t->data != NULL;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) fprintf(stderr, TAG ": %s: not an f32 tensor of the shape this program fixes\n", what);
    return !ok;
}

enum { ROWS = 8192, COLS = 8192 };

__device__ __forceinline__ float new_gelu(float x) {
    const float k = 0.7978845608028654f; /* math.sqrt(2.0 / math.pi), as the float torch uses */
    const float cube = __fmul_rn(__fmul_rn(x, x), x); /* torch.pow(x, 3.0) multiplies out */
    const float inner = __fmul_rn(k, __fadd_rn(x, __fmul_rn(0.044715f, cube)));
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
}

__global__ void __launch_bounds__(256) gelu_kernel(const float4 *__restrict__ x,
                                                   float4 *__restrict__ y, long n_vec) {
    for (long v = (long)blockIdx.x * blockDim.x + threadIdx.x; v < n_vec;
         v += (long)gridDim.x * blockDim.x) {
        const float4 a = __ldcs(&x[v]); /* streamed once: no reuse worth caching */
        float4 r;
        r.x = new_gelu(a.x); r.y = new_gelu(a.y); r.z = new_gelu(a.z); r.w = new_gelu(a.w);
        __stcs(&y[v], r);
    }
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)cfg; (void)params; (void)n_params; (void)stream;
    *ctx = NULL; /* stateless */
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    (void)ctx;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, TAG ": expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 2, ROWS, COLS) || check_f32(&out[0], "y0", 2, ROWS, COLS))
        return 1;
    /* a grid-stride loop over ~8 resident blocks per SM: enough loads in flight for HBM3e */
    gelu_kernel<<<132 * 8, 256, 0, stream>>>((const float4 *)in[0].data, (float4 *)out[0].data,
                                             (long)ROWS * COLS / 4);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void st_free(void *ctx) { (void)ctx; }
