/* Reference for t1/transpose: out[c, r] = in[r, c] for an f32 matrix in [rows, cols], written
 * to out [cols, rows], both contiguous and row-major. The naive kernel: one thread per element,
 * consecutive threads write consecutive elements of an output row and so read down a column of
 * the input, 4 useful bytes of every 32-byte sector fetched (the cache catches some of the rest).
 * Obviously correct for any shape; far from copy bandwidth. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define THREADS 256
#define MAX_GRID_Y 65535

typedef struct transpose_ctx {
    int64_t rows, cols;
} transpose_ctx;

/* ------------------------------------------------------------------------------------------ */
/* kernel */

/* x covers output columns (input rows); y strides over output rows (input columns), since the
 * grid's y dimension is capped at 65535. */
__global__ void transpose_naive_kernel(const float *in, float *out, int64_t rows, int64_t cols) {
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int64_t c = blockIdx.y; c < cols; c += gridDim.y) out[c * rows + r] = in[r * cols + c];
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

static bool tensor_ok(const st_tensor *t, int64_t rows, int64_t cols) {
    return t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t rows, cols;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "rows", &rows) || cfg_get(cfg, "cols", &cols)) return 1;
    if (rows < 1 || cols < 1 || (rows + THREADS - 1) / THREADS > INT32_MAX) return 1;

    transpose_ctx *c = (transpose_ctx *)malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->rows = rows;
    c->cols = cols;
    *ctx = c;
    return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream) {
    const transpose_ctx *c = (const transpose_ctx *)ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->rows, c->cols) || !tensor_ok(&out[0], c->cols, c->rows)) return 1;

    dim3 grid((unsigned)((c->rows + THREADS - 1) / THREADS),
              (unsigned)(c->cols < MAX_GRID_Y ? c->cols : MAX_GRID_Y));
    transpose_naive_kernel<<<grid, THREADS, 0, stream>>>((const float *)in[0].data,
                                                         (float *)out[0].data, c->rows, c->cols);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx) {
    free(ctx);
}
