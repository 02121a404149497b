/* Host expert for t1/gemm_fp16: C = A·B (fp16 in and out, row-major, float accumulation),
 * cache-blocked. Tiles of A and B are widened to float once per block into buffers made in
 * st_init; the inner loop runs along a row of the B tile so it is contiguous and vectorises.
 * Every C element still sums its products in k order, so the numerics are the reference's up
 * to the compiler's use of fused multiply-add. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* acc (MB x NB) + a (MB x KB) + b (KB x NB) floats = 32 + 32 + 128 KiB: L2-sized on most CPUs */
#define MB 32
#define NB 256
#define KB 128

typedef struct gemm_ctx {
    int64_t M, N, K;
    float *a;    /* [MB][KB] tile of A */
    float *b;    /* [KB][NB] tile of B */
    float *acc;  /* [MB][NB] tile of C */
} gemm_ctx;

static float f16_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    float f;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float */
        f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);  /* inf, NaN */
    else u = sign | ((exp + 112u) << 23) | (man << 13);     /* rebias 15 -> 127 */
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* float to fp16, round to nearest even, overflow to infinity, NaN kept quiet */
static uint16_t float_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;  /* >= 65520 rounds to infinity */
    if (a >= 0x38800000u) {                       /* >= 2^-14: a normal fp16 */
        uint32_t r = a - (112u << 23);
        r += 0xfffu + ((r >> 13) & 1u);           /* the carry may bump the exponent: fine */
        return sign | (uint16_t)(r >> 13);
    }
    if (a <= 0x33000000u) return sign;            /* <= 2^-25 rounds to zero (tie to even) */
    /* subnormal: round(m * 2^(e - 126)) with the implicit bit in m */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
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

static int tensor_ok(const st_tensor *t, int64_t rows, int64_t cols) {
    return t->dtype == ST_F16 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->data != NULL;
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
    int64_t M, N, K;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "M", &M) || cfg_get(cfg, "N", &N) || cfg_get(cfg, "K", &K)) return 1;
    if (M < 1 || N < 1 || K < 1) return 1;
    gemm_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) return 1;
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

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    gemm_ctx *c = ctx;
    if (c == NULL || n_in != 2 || n_out != 1) return 1;
    const int64_t M = c->M, N = c->N, K = c->K;
    if (!tensor_ok(&in[0], M, K) || !tensor_ok(&in[1], K, N) || !tensor_ok(&out[0], M, N))
        return 1;
    const uint16_t *A = in[0].data, *B = in[1].data;
    uint16_t *C = out[0].data;

    for (int64_t i0 = 0; i0 < M; i0 += MB) {
        const int64_t mb = min64(MB, M - i0);
        for (int64_t j0 = 0; j0 < N; j0 += NB) {
            const int64_t nb = min64(NB, N - j0);
            memset(c->acc, 0, MB * NB * sizeof(float));

            for (int64_t k0 = 0; k0 < K; k0 += KB) {
                const int64_t kb = min64(KB, K - k0);
                for (int64_t i = 0; i < mb; i++)
                    for (int64_t k = 0; k < kb; k++)
                        c->a[i * KB + k] = f16_to_float(A[(i0 + i) * K + k0 + k]);
                for (int64_t k = 0; k < kb; k++)
                    for (int64_t j = 0; j < nb; j++)
                        c->b[k * NB + j] = f16_to_float(B[(k0 + k) * N + j0 + j]);

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
                    C[(i0 + i) * N + j0 + j] = float_to_f16(c->acc[i * NB + j]);
        }
    }
    return 0;
}
