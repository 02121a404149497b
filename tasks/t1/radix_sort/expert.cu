/* Expert for t1/radix_sort: stable argsort of int32 keys with CUB's device radix sort, the state of
 * the art on NVIDIA GPUs (Onesweep: one histogram pass, then one pass per 8-bit digit whose tiles
 * find their output offsets through decoupled look-back instead of a separate scan). The values
 * sorted along with the keys are the indices 0..n-1, a constant table built once in st_init; CUB
 * reads the keys and that table and writes both outputs, leaving the input untouched. Its
 * temporary storage (the double buffers and the digit histograms) is sized from n and allocated
 * in st_init, so st_run is one library call on the caller's stream. */
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int n;
    int *iota;          /* [n]: 0, 1, ..., n-1 */
    void *temp;
    size_t temp_bytes;
} sort_ctx;

__global__ void iota_kernel(int *v, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v[i] = i;
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "radix_sort expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "radix_sort expert: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

extern "C" void st_free(void *p) {
    sort_ctx *c = (sort_ctx *)p;
    if (!c) return;
    cudaFree(c->iota);
    cudaFree(c->temp);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params;
    *out_ctx = NULL;
    int64_t n;
    if (cfg_get(cfg, "n", &n)) return 1;
    if (n_params != 0 || n < 1 || n > INT32_MAX) {
        fprintf(stderr, "radix_sort expert: bad n %lld or %d params\n", (long long)n, n_params);
        return 1;
    }
    sort_ctx *c = (sort_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    c->n = (int)n;

    /* CUB's size query launches nothing and reads no data, so null pointers are fine here */
    cudaError_t e = cub::DeviceRadixSort::SortPairs(
        NULL, c->temp_bytes, (const int *)NULL, (int *)NULL, (const int *)NULL, (int *)NULL,
        c->n, 0, 32, stream);
    if (e == cudaSuccess) e = cudaMalloc(&c->temp, c->temp_bytes > 0 ? c->temp_bytes : 1);
    if (e == cudaSuccess) e = cudaMalloc(&c->iota, sizeof(int) * (size_t)n);
    if (e == cudaSuccess) {
        const int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
        iota_kernel<<<blocks, 256, 0, stream>>>(c->iota, c->n);
        e = cudaGetLastError();
    }
    /* st_run may get another stream: the table must be complete before st_init returns */
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
        fprintf(stderr, "radix_sort expert: st_init: %s\n", cudaGetErrorString(e));
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    sort_ctx *c = (sort_ctx *)p;
    if (!c || n_in != 1 || n_out != 2) return 1;
    if (check_vec(&in[0], "keys", c->n) || check_vec(&out[0], "sorted", c->n) ||
        check_vec(&out[1], "perm", c->n))
        return 1;
    /* the non-DoubleBuffer form: CUB sorts out of the const inputs through its own temp storage */
    size_t bytes = c->temp_bytes;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(
        c->temp, bytes, (const int *)in[0].data, (int *)out[0].data, (const int *)c->iota,
        (int *)out[1].data, c->n, 0, 32, stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "radix_sort expert: SortPairs: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
