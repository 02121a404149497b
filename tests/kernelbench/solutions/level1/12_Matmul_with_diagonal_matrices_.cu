/* KernelBench level1/12_Matmul_with_diagonal_matrices_: y = diag(A)·B, which the program already
 * writes as the broadcast A.unsqueeze(1) * B (A [4096], B [4096, 4096], fp32). Every output is one
 * product A[i]·B[i][j], rounded once, exactly as PyTorch rounds it, so the answer is bit-exact.
 * The work is pure bandwidth (read B, write y): each thread moves 16-byte vectors, and a row of B
 * is a whole number of vectors, so a vector never straddles two rows and its scale is one load of
 * A that the warp shares. PyTorch's broadcast path computes offsets per element with a zero
 * stride for A and does not vectorise; this kernel streams at close to the copy rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define TAG "kernelbench level1/12"
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

enum { N = 4096, M = 4096, VEC_PER_ROW = M / 4 };

__global__ void __launch_bounds__(256) diag_scale(const float *__restrict__ a,
                                                  const float4 *__restrict__ b,
                                                  float4 *__restrict__ y, int n_vec) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n_vec; v += gridDim.x * blockDim.x) {
        const float s = __ldg(&a[v / VEC_PER_ROW]);
        float4 q = __ldcs(&b[v]); /* read once: keep it out of L2's way */
        q.x *= s; q.y *= s; q.z *= s; q.w *= s;
        __stcs(&y[v], q);
    }
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)cfg; (void)params; (void)n_params; (void)stream;
    *ctx = NULL; /* no params and no scratch: nothing to keep */
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    (void)ctx;
    if (n_in != 2 || n_out != 1) {
        fprintf(stderr, TAG ": expected 2 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_f32(&in[0], "x0", 1, N) || check_f32(&in[1], "x1", 2, N, M) ||
        check_f32(&out[0], "y0", 2, N, M))
        return 1;
    const int n_vec = N * VEC_PER_ROW;
    /* 132 SMs x 8 blocks of 256 threads keep enough loads in flight; more blocks only add tails */
    diag_scale<<<132 * 8, 256, 0, stream>>>((const float *)in[0].data,
                                            (const float4 *)in[1].data, (float4 *)out[0].data,
                                            n_vec);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void st_free(void *ctx) { (void)ctx; }
