/* Expert for t2/adamw: the whole AdamW step in one pass over memory. Each element's p, g, m and v
 * are read once and p_new, m_new and v_new written once (28 bytes, the floor); the moments and
 * the step are computed in registers with the scalar factors (decay, lr/bc1, 1/sqrt(bc2)) folded
 * on the host in double. The body moves float4s with streaming (evict-first) loads and stores,
 * since nothing is reused; a scalar head and tail cover ragged ends, and when the seven pointers
 * disagree modulo 16 bytes the whole range goes through the scalar path. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "stitch/solution.h"

#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "adamw expert: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorString(e_)); return 1; } } while (0)

#define LR 1e-3
#define BETA1 0.9
#define BETA2 0.999
#define EPS 1e-8
#define WEIGHT_DECAY 0.01
#define THREADS 256

typedef struct {
    float decay;      /* 1 - lr*wd */
    float b1, omb1;   /* beta1, 1 - beta1 */
    float b2, omb2;   /* beta2, 1 - beta2 */
    float step;       /* lr / bc1 */
    float rsqrt_bc2;  /* 1 / sqrt(bc2) */
    float eps;
} adamw_consts;

typedef struct {
    int64_t n, t;
    adamw_consts k;
    int grid;         /* blocks that fill the device once */
} adamw_ctx;

// ----------------------------------------------------------------------------

/* sqrt(v/bc2) is computed as sqrt(v)*(1/sqrt(bc2)): one multiply instead of a division, and
 * within a couple of ulps of the formula; the division by the denominator stays IEEE. */
__device__ __forceinline__ void adamw_elem(float &p, float g, float &m, float &v,
                                           const adamw_consts &k) {
    m = fmaf(k.b1, m, k.omb1 * g);
    v = fmaf(k.b2, v, k.omb2 * (g * g));
    const float denom = fmaf(sqrtf(v), k.rsqrt_bc2, k.eps);
    p = fmaf(p, k.decay, -k.step * __fdiv_rn(m, denom));
}

__device__ __forceinline__ void adamw_scalar(const float *__restrict__ p, const float *__restrict__ g,
                                             const float *__restrict__ m, const float *__restrict__ v,
                                             float *__restrict__ po, float *__restrict__ mo,
                                             float *__restrict__ vo, int64_t i,
                                             const adamw_consts &k) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw_elem(pi, g[i], mi, vi, k);
    po[i] = pi;
    mo[i] = mi;
    vo[i] = vi;
}

/* Elements [0, head) and [head + 4*n4, n) are scalar, the body in between is float4; head is
 * where all seven arrays reach a 16-byte boundary (the caller checked they reach it together). */
__global__ void __launch_bounds__(THREADS)
adamw_kernel(const float *__restrict__ p, const float *__restrict__ g, const float *__restrict__ m,
             const float *__restrict__ v, float *__restrict__ po, float *__restrict__ mo,
             float *__restrict__ vo, int64_t n, int64_t head, int64_t n4, adamw_consts k) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;

    const float4 *p4 = (const float4 *)(p + head), *g4 = (const float4 *)(g + head);
    const float4 *m4 = (const float4 *)(m + head), *v4 = (const float4 *)(v + head);
    float4 *po4 = (float4 *)(po + head), *mo4 = (float4 *)(mo + head), *vo4 = (float4 *)(vo + head);
    for (int64_t i = tid; i < n4; i += stride) {
        float4 pp = __ldcs(p4 + i), gg = __ldcs(g4 + i), mm = __ldcs(m4 + i), vv = __ldcs(v4 + i);
        adamw_elem(pp.x, gg.x, mm.x, vv.x, k);
        adamw_elem(pp.y, gg.y, mm.y, vv.y, k);
        adamw_elem(pp.z, gg.z, mm.z, vv.z, k);
        adamw_elem(pp.w, gg.w, mm.w, vv.w, k);
        __stcs(po4 + i, pp);
        __stcs(mo4 + i, mm);
        __stcs(vo4 + i, vv);
    }

    /* ragged ends (everything when n4 == 0): at most 3 + 3 elements, or all of a scalar run */
    const int64_t tail = head + 4 * n4;
    for (int64_t i = tid; i < head; i += stride) adamw_scalar(p, g, m, v, po, mo, vo, i, k);
    for (int64_t i = tail + tid; i < n; i += stride) adamw_scalar(p, g, m, v, po, mo, vo, i, k);
}

// ----------------------------------------------------------------------------

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "adamw expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t n) {
    int ok = t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == n && t->data != NULL &&
             (uintptr_t)t->data % sizeof(float) == 0;
    if (!ok) fprintf(stderr, "adamw expert: %s: expected aligned f32 of shape [%lld]\n", what, (long long)n);
    return !ok;
}

extern "C" void st_free(void *p) { free(p); }

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, t;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "t", &t)) return 1;
    if (n < 1 || t < 1 || n_params != 0) {
        fprintf(stderr, "adamw expert: bad sizes or params (n=%lld t=%lld, %d params)\n",
                (long long)n, (long long)t, n_params);
        return 1;
    }
    int dev, sms, per_sm;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, adamw_kernel, THREADS, 0));
    if (per_sm < 1) per_sm = 1;

    adamw_ctx *ctx = (adamw_ctx *)calloc(1, sizeof(adamw_ctx));
    if (!ctx) return 1;
    ctx->n = n;
    ctx->t = t;
    const double bc1 = 1.0 - pow(BETA1, (double)t), bc2 = 1.0 - pow(BETA2, (double)t);
    ctx->k.decay = (float)(1.0 - LR * WEIGHT_DECAY);
    ctx->k.b1 = (float)BETA1;
    ctx->k.omb1 = (float)(1.0 - BETA1);
    ctx->k.b2 = (float)BETA2;
    ctx->k.omb2 = (float)(1.0 - BETA2);
    ctx->k.step = (float)(LR / bc1);
    ctx->k.rsqrt_bc2 = (float)(1.0 / sqrt(bc2));
    ctx->k.eps = (float)EPS;
    /* one resident wave; the grid-stride loop covers the rest, so every thread keeps several
     * 16-byte loads in flight and no block pays a launch for a handful of elements */
    const int64_t want = (n / 4 + THREADS - 1) / THREADS;
    const int64_t full = (int64_t)sms * per_sm;
    ctx->grid = (int)(want < 1 ? 1 : want < full ? want : full);
    *out_ctx = ctx;
    return 0;
}

extern "C" int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream) {
    const adamw_ctx *ctx = (const adamw_ctx *)p;
    if (n_in != 4 || n_out != 3) {
        fprintf(stderr, "adamw expert: expected 4 inputs and 3 outputs, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const int64_t n = ctx->n;
    if (check_vec(&in[0], "p", n) || check_vec(&in[1], "g", n) || check_vec(&in[2], "m", n) ||
        check_vec(&in[3], "v", n) || check_vec(&out[0], "p_new", n) ||
        check_vec(&out[1], "m_new", n) || check_vec(&out[2], "v_new", n))
        return 1;
    /* the pointers may move between calls, so the float4 split is decided per call */
    const uintptr_t mis = (uintptr_t)in[0].data & 15;
    bool same = true;
    for (int i = 1; i < 4; i++) same = same && ((uintptr_t)in[i].data & 15) == mis;
    for (int i = 0; i < 3; i++) same = same && ((uintptr_t)out[i].data & 15) == mis;
    int64_t head = n, n4 = 0;
    if (same) {
        head = (int64_t)(((16 - mis) & 15) / sizeof(float));
        if (head > n) head = n;
        n4 = (n - head) / 4;
    }
    adamw_kernel<<<ctx->grid, THREADS, 0, stream>>>(
        (const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data,
        (const float *)in[3].data, (float *)out[0].data, (float *)out[1].data, (float *)out[2].data,
        n, head, n4, ctx->k);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
