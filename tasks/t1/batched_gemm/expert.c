/* Host expert for t1/batched_gemm: C[b] = A[b]·B[b] (bf16 in and out, row-major, float
 * accumulation), each matrix of the batch cache-blocked as in t1/gemm_bf16's host expert: tiles
 * of A and B are widened to float once per block into buffers made in st_init, and the inner
 * loop runs along a row of the B tile so it is contiguous and vectorises. Every C element still
 * sums its products in k order, so the numerics are the reference's up to the compiler's use of
 * fused multiply-add. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* acc (MB x NB) + a (MB x KB) + b (KB x NB) floats = 32 + 32 + 128 KiB: L2-sized on most CPUs */
#define MB 32
#define NB 256
#define KB 128

typedef struct gemm_ctx {
    int64_t batch, M, N, K;
    float *a;    /* [MB][KB] tile of A */
    float *b;    /* [KB][NB] tile of B */
    float *acc;  /* [MB][NB] tile of C */
} gemm_ctx;

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet NaN */
    /* round to nearest, ties to even: add just under half an ulp, plus the kept lsb */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t batch, int64_t rows, int64_t cols) {
    return t->dtype == ST_BF16 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == rows &&
           t->shape[2] == cols && t->data != NULL;
}

void st_free(void *ctx) {
    gemm_ctx *c = ctx;
    if (c == NULL) return;
    free(c->a);
    free(c->b);
    free(c->acc);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t batch, M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "batch", &batch) || cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) ||
        cfg_get(cfg, "K", &K))
        return 1;
    if (batch < 1 || M < 1 || N < 1 || K < 1) return 1;
    gemm_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->batch = batch;
    c->M = M;
    c->N = N;
    c->K = K;
    c->a = malloc(MB * KB * sizeof(float));
    c->b = malloc(KB * NB * sizeof(float));
    c->acc = malloc(MB * NB * sizeof(float));
    if (c->a == NULL || c->b == NULL || c->acc == NULL) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

/* One matrix of the batch: C = A·B with A [M, K], B [K, N], C [M, N]. */
static void gemm_one(gemm_ctx *c, const uint16_t *A, const uint16_t *B, uint16_t *C) {
    const int64_t M = c->M, N = c->N, K = c->K;
    for (int64_t i0 = 0; i0 < M; i0 += MB) {
        const int64_t mb = min64(MB, M - i0);
        for (int64_t j0 = 0; j0 < N; j0 += NB) {
            const int64_t nb = min64(NB, N - j0);
            memset(c->acc, 0, MB * NB * sizeof(float));

            for (int64_t k0 = 0; k0 < K; k0 += KB) {
                const int64_t kb = min64(KB, K - k0);
                for (int64_t i = 0; i < mb; i++)
                    for (int64_t k = 0; k < kb; k++)
                        c->a[i * KB + k] = bf16_to_float(A[(i0 + i) * K + k0 + k]);
                for (int64_t k = 0; k < kb; k++)
                    for (int64_t j = 0; j < nb; j++)
                        c->b[k * NB + j] = bf16_to_float(B[(k0 + k) * N + j0 + j]);

                for (int64_t i = 0; i < mb; i++) {
                    float *restrict acc = c->acc + i * NB;
                    for (int64_t k = 0; k < kb; k++) {
                        const float a = c->a[i * KB + k];
                        const float *restrict b = c->b + k * NB;
                        for (int64_t j = 0; j < nb; j++) acc[j] += a * b[j];
                    }
                }
            }

            for (int64_t i = 0; i < mb; i++)
                for (int64_t j = 0; j < nb; j++)
                    C[(i0 + i) * N + j0 + j] = float_to_bf16(c->acc[i * NB + j]);
        }
    }
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    gemm_ctx *c = ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    const int64_t batch = c->batch, M = c->M, N = c->N, K = c->K;
    if (!tensor_ok(&in[0], batch, M, K) || !tensor_ok(&in[1], batch, K, N) ||
        !tensor_ok(&out[0], batch, M, N))
        return 1;
    for (int64_t b = 0; b < batch; b++)
        gemm_one(c, (const uint16_t *)in[0].data + b * M * K,
                 (const uint16_t *)in[1].data + b * K * N, (uint16_t *)out[0].data + b * M * N);
    return 0;
}
