/* Reference for t1/spmv_csr: y = A·x for a CSR matrix in float32, the scalar CSR kernel: one thread
 * per row walks its entries in order and sums in float32. Obviously correct, and slow in the ways
 * the task is about: the 32 threads of a warp read 32 different rows, so loads are scattered, and a
 * warp that meets one of the long rows idles 31 lanes while that row is summed serially. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "spmv_csr reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define BLOCK 256

typedef struct {
    int64_t rows, cols, nnz;
} spmv_ctx;

__global__ void spmv_row_kernel(const int *row_ptr, const int *col, const float *val,
                                const float *x, float *y, int rows) {
    const int r = blockIdx.x * BLOCK + threadIdx.x;
    if (r >= rows) return;
    float sum = 0.0f;
    for (int j = row_ptr[r]; j < row_ptr[r + 1]; j++) sum += val[j] * x[col[j]];
    y[r] = sum;
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "spmv_csr reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, st_dtype dtype, int64_t len) {
    int ok = t->dtype == dtype && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "spmv_csr reference: %s: wrong dtype or shape (want [%lld])\n", what, (long long)len);
    return !ok;
}

extern "C" void st_free(void *p) {
    free(p);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t rows, cols, deg;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols) || cfg_get(cfg, "deg", &deg))
        return 1;
    if (n_params != 0 || rows < 1 || cols < 1 || deg < 1 || rows * deg > INT32_MAX ||
        cols > INT32_MAX) {
        fprintf(stderr, "spmv_csr reference: bad sizes rows=%lld cols=%lld deg=%lld\n",
                (long long)rows, (long long)cols, (long long)deg);
        return 1;
    }
    spmv_ctx *c = (spmv_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->rows = rows;
    c->cols = cols;
    c->nnz = rows * deg;
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const spmv_ctx *c = (const spmv_ctx *)p;
    if (!c || n_in != 4 || n_out != 1) return 1;
    if (check_vec(&in[0], "row_ptr", ST_I32, c->rows + 1) ||
        check_vec(&in[1], "col_idx", ST_I32, c->nnz) || check_vec(&in[2], "vals", ST_F32, c->nnz) ||
        check_vec(&in[3], "x", ST_F32, c->cols) || check_vec(&out[0], "y", ST_F32, c->rows))
        return 1;
    const int blocks = (int)((c->rows + BLOCK - 1) / BLOCK);
    spmv_row_kernel<<<blocks, BLOCK, 0, stream>>>((const int *)in[0].data, (const int *)in[1].data,
                                                  (const float *)in[2].data,
                                                  (const float *)in[3].data, (float *)out[0].data,
                                                  (int)c->rows);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
