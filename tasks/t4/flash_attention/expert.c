/* Host expert for t4/flash_attention: causal attention forward, bf16 Q, K, V, O of shape
 * [B, H, T, 128]: s_j = (q_i·k_j)/sqrt(128) for j <= i, p = softmax(s), o_i = sum_j p_j v_j. The
 * reference works in double and re-widens every bf16 key and value for every query (T^2/2
 * conversions of each), with serial dot products and a libm exp per score. Here K and V of a
 * head are widened to float once per head, the dot products run over 16 independent float lanes,
 * the max over 16 lanes, exp is an inline range-reduced polynomial over blocks of 16 (see exp16)
 * and the weighted sum of V rows is a fixed 128-wide float axpy, all of which -O2 vectorises;
 * the division by the sum is one multiply per output. Float rounding (~1e-6 relative on outputs of
 * order 1) stays far inside the 5e-3 + 2% tolerance. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define HEAD_DIM 128

typedef struct attn_ctx {
    int64_t B, H, T;
    float *s;          /* one row of scores / probabilities, T long */
    float *kf, *vf;    /* one head of K and V widened, [T, HEAD_DIM] each */
} attn_ctx;

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

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, const attn_ctx *c) {
    return t->dtype == ST_BF16 && t->ndim == 4 && t->shape[0] == c->B && t->shape[1] == c->H &&
           t->shape[2] == c->T && t->shape[3] == HEAD_DIM && t->data != NULL;
}

void st_free(void *ctx) {
    attn_ctx *c = ctx;
    if (c == NULL) return;
    free(c->s);
    free(c->kf);
    free(c->vf);
    free(c);
}

/* exp(v[l]) for 16 values v[l] <= 0, -inf included (inputs below -87 give about 1e-38 instead of a smaller
 * number or 0, far below anything these sums resolve): Cody-Waite reduction by ln 2 to
 * |r| <= 0.35, a degree-7 Taylor polynomial (truncation error 5e-9 relative) and the power of
 * two built in the exponent bits. Fixed-length loops of plain float/int arithmetic, so the
 * compiler turns them into SIMD code, unlike calls to libm's expf. About 2 ulp. */
static void exp16(const float *restrict v, float *restrict out) {
    for (int l = 0; l < 16; l++) {
        /* clamp to -87 on the bits: for v <= 0 a larger magnitude is a larger unsigned */
        uint32_t u;
        memcpy(&u, &v[l], sizeof u);
        u = u > 0xc2ae0000u ? 0xc2ae0000u : u;
        float t;
        memcpy(&t, &u, sizeof t);
        const int32_t n = (int32_t)(t * 1.44269504088896341f - 0.5f);
        const float nf = (float)n;
        const float r = (t - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;
        float p = 1.0f / 5040.0f;
        p = p * r + 1.0f / 720.0f;
        p = p * r + 1.0f / 120.0f;
        p = p * r + 1.0f / 24.0f;
        p = p * r + 1.0f / 6.0f;
        p = p * r + 0.5f;
        p = p * r + 1.0f;
        p = p * r + 1.0f;
        const uint32_t bits = (uint32_t)(n + 127) << 23;
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        out[l] = p * scale;
    }
}

static float dot128(const float *restrict a, const float *restrict b) {
    float lane[16] = {0};
    for (int d0 = 0; d0 < HEAD_DIM; d0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[d0 + l] * b[d0 + l];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

static void widen(float *restrict dst, const uint16_t *restrict src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

static void axpy128(float *restrict acc, const float *restrict v, float p) {
    for (int d = 0; d < HEAD_DIM; d++) acc[d] += p * v[d];
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t B, H, T;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "B", &B) || cfg_get(cfg, "H", &H) || cfg_get(cfg, "T", &T)) return 1;
    if (B < 1 || H < 1 || T < 1) return 1;
    attn_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) return 1;
    c->B = B;
    c->H = H;
    c->T = T;
    c->s = malloc((size_t)T * sizeof(float));
    c->kf = malloc((size_t)(T * HEAD_DIM) * sizeof(float));
    c->vf = malloc((size_t)(T * HEAD_DIM) * sizeof(float));
    if (c->s == NULL || c->kf == NULL || c->vf == NULL) {
        st_free(c);
        return 1;
    }
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    attn_ctx *c = ctx;
    if (c == NULL || n_in != 3 || n_out != 1) return 1;
    for (int i = 0; i < 3; i++)
        if (!tensor_ok(&in[i], c)) return 1;
    if (!tensor_ok(&out[0], c)) return 1;
    const int64_t T = c->T, heads = c->B * c->H;
    const float scale = (float)(1.0 / sqrt((double)HEAD_DIM));
    float *s = c->s, *kf = c->kf, *vf = c->vf;

    for (int64_t h = 0; h < heads; h++) {
        const uint16_t *q = (const uint16_t *)in[0].data + h * T * HEAD_DIM;
        uint16_t *o = (uint16_t *)out[0].data + h * T * HEAD_DIM;
        widen(kf, (const uint16_t *)in[1].data + h * T * HEAD_DIM, T * HEAD_DIM);
        widen(vf, (const uint16_t *)in[2].data + h * T * HEAD_DIM, T * HEAD_DIM);
        for (int64_t i = 0; i < T; i++) {
            float qf[HEAD_DIM];
            for (int d = 0; d < HEAD_DIM; d++) qf[d] = bf16_to_float(q[i * HEAD_DIM + d]);
            const int64_t n = i + 1; /* causal: keys up to and including i */
            for (int64_t j = 0; j < n; j++) s[j] = dot128(qf, kf + j * HEAD_DIM) * scale;

            float lane[16], t[16], e[16];
            int64_t j = 0;
            for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
            float m = -INFINITY;
            for (int l = 0; l < 16; l++) m = lane[l] > m ? lane[l] : m;
            for (; j < n; j++) m = fmaxf(m, s[j]);

            for (int l = 0; l < 16; l++) lane[l] = 0.0f;
            for (j = 0; j + 16 <= n; j += 16) {
                for (int l = 0; l < 16; l++) t[l] = s[j + l] - m;
                exp16(t, e);
                for (int l = 0; l < 16; l++) {
                    s[j + l] = e[l];
                    lane[l] += e[l];
                }
            }
            float sum = 0.0f;
            if (j < n) {
                const int64_t rest = n - j;
                for (int l = 0; l < 16; l++) t[l] = -INFINITY;
                for (int64_t l = 0; l < rest; l++) t[l] = s[j + l] - m;
                exp16(t, e);
                for (int64_t l = 0; l < rest; l++) {
                    s[j + l] = e[l];
                    sum += e[l];
                }
            }
            for (int w = 8; w > 0; w /= 2)
                for (int l = 0; l < w; l++) lane[l] += lane[l + w];
            sum += lane[0];

            float acc[HEAD_DIM] = {0};
            for (j = 0; j < n; j++) axpy128(acc, vf + j * HEAD_DIM, s[j]);
            const float inv = 1.0f / sum;
            for (int d = 0; d < HEAD_DIM; d++) o[i * HEAD_DIM + d] = float_to_bf16(acc[d] * inv);
        }
    }
    return 0;
}
