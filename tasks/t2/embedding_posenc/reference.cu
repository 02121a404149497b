/* Reference for t2/embedding_posenc: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] in bf16, as an
 * eager framework runs it: an embedding kernel gathers the token rows into a [B*T, C] bf16
 * workspace, then an elementwise kernel adds the broadcast position rows, in float32 with one
 * rounding to bf16. One block per row, one element per thread and step: plain and obviously
 * correct, but the rows go through memory twice and every access moves 2 bytes. */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "embedding_posenc reference: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define BLOCK 256

typedef struct {
    int64_t B, T, V, C, maxT;
    const __nv_bfloat16 *wte, *wpe; /* the harness's, alive until st_free */
    __nv_bfloat16 *gathered;        /* [B*T, C] */
} embed_ctx;

/* block `row` copies wte[tokens[row], :] */
__global__ void gather_kernel(const int *tokens, const __nv_bfloat16 *wte, __nv_bfloat16 *dst, int C) {
    const size_t row = blockIdx.x;
    const __nv_bfloat16 *src = wte + (size_t)tokens[row] * C;
    for (int c = threadIdx.x; c < C; c += BLOCK) dst[row * C + c] = src[c];
}

/* block `row` (position row mod T) writes gathered[row, :] + wpe[row mod T, :] */
__global__ void add_position_kernel(const __nv_bfloat16 *gathered, const __nv_bfloat16 *wpe,
                                    __nv_bfloat16 *out, int T, int C) {
    const size_t row = blockIdx.x;
    const __nv_bfloat16 *pos = wpe + (size_t)(blockIdx.x % T) * C;
    for (int c = threadIdx.x; c < C; c += BLOCK)
        out[row * C + c] = __float2bfloat16_rn(__bfloat162float(gathered[row * C + c]) +
                                               __bfloat162float(pos[c]));
}

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "embedding_posenc reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check(const st_tensor *t, const char *what, st_dtype dtype, int ndim, int64_t d0,
                 int64_t d1, int64_t d2) {
    int ok = t->dtype == dtype && t->ndim == ndim && t->shape[0] == d0 && t->shape[1] == d1 &&
             (ndim == 2 || t->shape[2] == d2) && t->data != NULL;
    if (!ok) fprintf(stderr, "embedding_posenc reference: %s: wrong dtype or shape\n", what);
    return !ok;
}

extern "C" void st_free(void *p) {
    embed_ctx *c = (embed_ctx *)p;
    if (!c) return;
    cudaFree(c->gathered);
    free(c);
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    embed_ctx *c = (embed_ctx *)calloc(1, sizeof(*c));
    if (!c) return 1;
    if (cfg_get(cfg, "B", &c->B) || cfg_get(cfg, "T", &c->T) || cfg_get(cfg, "V", &c->V) ||
        cfg_get(cfg, "C", &c->C) || cfg_get(cfg, "maxT", &c->maxT) || n_params != 2 ||
        c->B < 1 || c->T < 1 || c->V < 1 || c->C < 1 || c->T > c->maxT ||
        c->B * c->T > INT32_MAX || c->C > INT32_MAX ||
        check(&params[0], "wte", ST_BF16, 2, c->V, c->C, 0) ||
        check(&params[1], "wpe", ST_BF16, 2, c->maxT, c->C, 0)) {
        fprintf(stderr, "embedding_posenc reference: bad sizes or params\n");
        free(c);
        return 1;
    }
    c->wte = (const __nv_bfloat16 *)params[0].data;
    c->wpe = (const __nv_bfloat16 *)params[1].data;
    cudaError_t e = cudaMalloc(&c->gathered, sizeof(__nv_bfloat16) * (size_t)(c->B * c->T * c->C));
    if (e != cudaSuccess) {
        fprintf(stderr, "embedding_posenc reference: cudaMalloc: %s\n", cudaGetErrorString(e));
        free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const embed_ctx *c = (const embed_ctx *)p;
    if (!c || n_in != 1 || n_out != 1) return 1;
    if (check(&in[0], "tokens", ST_I32, 2, c->B, c->T, 0) ||
        check(&out[0], "out", ST_BF16, 3, c->B, c->T, c->C))
        return 1;
    const unsigned rows = (unsigned)(c->B * c->T);
    gather_kernel<<<rows, BLOCK, 0, stream>>>((const int *)in[0].data, c->wte, c->gathered, (int)c->C);
    CUDA_CHECK(cudaGetLastError());
    add_position_kernel<<<rows, BLOCK, 0, stream>>>(c->gathered, c->wpe, (__nv_bfloat16 *)out[0].data,
                                                    (int)c->T, (int)c->C);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
