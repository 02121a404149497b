/* KernelBench level1/14_Matmul_for_upper_triangular_matrices: y = triu(A·B), A, B [4096, 4096]
 * fp32 (the program draws them upper triangular, but nothing here relies on that: the answer is
 * triu(A·B) for any A and B). Eager PyTorch runs the full 2N³-flop SGEMM and then triu, so half of
 * its product is thrown away. Here only what triu keeps is computed: row block I (rows
 * r0..r0+255) needs columns r0..N-1 only, Y[I, r0:] = A[I, :]·B[:, r0:], one cuBLAS SGEMM per
 * block whose width shrinks with r0, about N³ flops in all instead of 2N³. The 16 block GEMMs run
 * on four forked streams, since the narrow ones alone would leave most of the GPU idle. Two small
 * kernels write triu's zeros: left of each row block before the GEMMs, and below the diagonal
 * inside the 256 x 256 diagonal blocks after them. cuBLAS keeps its default math mode, true fp32
 * with no TF32, like the reference. Row-major X with leading dimension N is the column-major Xᵀ,
 * so each block is posed as Y_Iᵀ = B[:, r0:]ᵀ·A[I, :]ᵀ without any transposes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "stitch/solution.h"

#define TAG "kernelbench level1/14"
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
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, TAG ": %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_); \
    return 1; } } while (0)

/* A 4096 x 256 block GEMM has only 64 of cuBLAS's 128 x 128 tiles, half a 132-SM GPU, so the 16
 * block GEMMs run on LANES streams at once (each with its own handle: a handle's workspace must
 * not be shared by concurrent streams), forked from and joined back to the harness's stream. */
enum { N = 4096, BS = 256, NB = N / BS, LANES = 4 };

typedef struct {
    cublasHandle_t h[LANES];
    cudaStream_t lane[LANES];
    cudaEvent_t fork, join[LANES];
} tri_ctx;

extern "C" void st_free(void *p) {
    tri_ctx *c = (tri_ctx *)p;
    if (!c) return;
    /* st_free cannot report; each resource is released if it was made */
    for (int i = 0; i < LANES; i++) {
        if (c->h[i]) cublasDestroy(c->h[i]);
        if (c->lane[i]) cudaStreamDestroy(c->lane[i]);
        if (c->join[i]) cudaEventDestroy(c->join[i]);
    }
    if (c->fork) cudaEventDestroy(c->fork);
    free(c);
}

static int init_ctx(tri_ctx *c) {
    CUDA_CHECK(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming));
    for (int i = 0; i < LANES; i++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&c->lane[i], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&c->join[i], cudaEventDisableTiming));
        /* default math mode: true fp32 FMAs, never TF32, as the reference (TF32 off) computed */
        CUBLAS_CHECK(cublasCreate(&c->h[i]));
        CUBLAS_CHECK(cublasSetStream(c->h[i], c->lane[i]));
    }
    return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)cfg; (void)params; (void)n_params; (void)stream;
    *out_ctx = NULL;
    tri_ctx *c = (tri_ctx *)calloc(1, sizeof(tri_ctx));
    if (!c) return 1;
    if (init_ctx(c)) { st_free(c); return 1; }
    *out_ctx = c;
    return 0;
}

static int check_io(const st_tensor *in, int32_t n_in, const st_tensor *out, int32_t n_out) {
    if (n_in != 2 || n_out != 1) {
        fprintf(stderr, TAG ": expected 2 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    return check_f32(&in[0], "x0", 2, N, N) || check_f32(&in[1], "x1", 2, N, N) ||
           check_f32(&out[0], "y0", 2, N, N);
}

/* The lanes start after everything already on the harness's stream (the inputs are ready). */
static int fork_lanes(tri_ctx *c, cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(c->fork, stream));
    for (int i = 0; i < LANES; i++) CUDA_CHECK(cudaStreamWaitEvent(c->lane[i], c->fork, 0));
    return 0;
}

/* The harness's stream waits for every lane, so all work is ordered on it when st_run returns. */
static int join_lanes(tri_ctx *c, cudaStream_t stream) {
    for (int i = 0; i < LANES; i++) {
        CUDA_CHECK(cudaEventRecord(c->join[i], c->lane[i]));
        CUDA_CHECK(cudaStreamWaitEvent(stream, c->join[i], 0));
    }
    return 0;
}

/* y[i][j] = 0 for j < the first column of i's row block: the part no GEMM writes. */
__global__ void zero_left_of_blocks(float4 *__restrict__ y) {
    const int i = blockIdx.x;
    const int limit = (i / BS) * BS / 4;
    for (int v = threadIdx.x; v < limit; v += blockDim.x)
        y[(long)i * (N / 4) + v] = make_float4(0.f, 0.f, 0.f, 0.f);
}

/* y[i][j] = 0 for j < i inside i's diagonal block, which its GEMM wrote in full. */
__global__ void zero_below_diagonal(float *__restrict__ y) {
    const int i = blockIdx.x, r0 = (i / BS) * BS;
    for (int j = r0 + threadIdx.x; j < i; j += blockDim.x) y[(long)i * N + j] = 0.0f;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    tri_ctx *c = (tri_ctx *)p;
    if (check_io(in, n_in, out, n_out)) return 1;
    const float *A = (const float *)in[0].data, *B = (const float *)in[1].data;
    float *Y = (float *)out[0].data;
    const float one = 1.0f, zero = 0.0f;
    if (fork_lanes(c, stream)) return 1;
    zero_left_of_blocks<<<N, 256, 0, stream>>>((float4 *)Y);
    CUDA_CHECK(cudaGetLastError());
    for (int blk = 0; blk < NB; blk++) {
        const int r0 = blk * BS, L = N - r0;
        /* column-major: (L x BS) = (L x N)·(N x BS), i.e. Y[I, r0:]ᵀ = B[:, r0:]ᵀ·A[I, :]ᵀ */
        CUBLAS_CHECK(cublasSgemm(c->h[blk % LANES], CUBLAS_OP_N, CUBLAS_OP_N, L, BS, N, &one,
                                 B + r0, N, A + (long)r0 * N, N, &zero, Y + (long)r0 * N + r0, N));
    }
    if (join_lanes(c, stream)) return 1;
    zero_below_diagonal<<<N, 128, 0, stream>>>(Y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
