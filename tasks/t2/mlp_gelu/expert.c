/* Host expert for t2/mlp_gelu: Y = GELU(X·W1 + b1)·W2 + b2, fused and blocked. The weights are
 * widened to fp32 once in st_init; st_run walks the tokens in blocks of ROWS, computes each
 * block's hidden activations with bias and GELU applied as they leave the accumulators (the
 * intermediate stays fp32 and never exceeds ROWS x H), then the second GEMM with its bias,
 * rounding to bf16 only on the final store. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* A 4 x 8 tile of accumulators fits in registers; the K x 8 weight panel it reads is reused by
 * all ROWS / 4 row groups of the block while it is still in cache. Weights are padded with zero
 * columns to a multiple of 8 and the token block with zero rows, so every tile is full. */
#define MR 4
#define NR 8
#define ROWS 32

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* round to nearest even; NaN stays NaN (a quiet one) instead of rounding up into Inf */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

typedef struct {
    int64_t T, D, H;
    int64_t Dp, Hp;           /* D and H rounded up to NR */
    float *W1, *b1, *W2, *b2; /* fp32 copies of the weights, columns padded: [D, Hp] [Hp] [H, Dp] [Dp] */
    float *x;                 /* [ROWS, D] current token block */
    float *hid;               /* [ROWS, Hp] its hidden activations */
} mlp_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "mlp_gelu host expert: size '%s' missing from the config\n", name);
    return 1;
}

/* ndim 1 uses d0 only. */
static int check_tensor(const st_tensor *t, const char *what, int ndim, int64_t d0, int64_t d1) {
    int ok = t->dtype == ST_BF16 && t->ndim == ndim && t->shape[0] == d0 &&
             (ndim == 1 || t->shape[1] == d1) && t->data != NULL;
    if (!ok && ndim == 1)
        fprintf(stderr, "mlp_gelu host expert: %s: expected bf16 of shape [%lld]\n", what, (long long)d0);
    else if (!ok)
        fprintf(stderr, "mlp_gelu host expert: %s: expected bf16 of shape [%lld, %lld]\n", what,
                (long long)d0, (long long)d1);
    return !ok;
}

/* fp32 copy of a [rows, cols] bf16 matrix with zero columns appended up to cols_pad */
static float *widen(const st_tensor *t, int64_t rows, int64_t cols, int64_t cols_pad) {
    float *f = calloc((size_t)(rows * cols_pad), sizeof(float));
    if (!f) return NULL;
    const uint16_t *h = t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) f[r * cols_pad + c] = bf16_to_f32(h[r * cols + c]);
    return f;
}

void st_free(void *p) {
    mlp_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->W1);
    free(ctx->b1);
    free(ctx->W2);
    free(ctx->b2);
    free(ctx->x);
    free(ctx->hid);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    mlp_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "D", &ctx->D) || cfg_get(cfg, "H", &ctx->H))
        goto fail;
    if (ctx->T <= 0 || ctx->D <= 0 || ctx->H <= 0) goto fail;
    if (n_params != 4) {
        fprintf(stderr, "mlp_gelu host expert: expected 4 params, got %d\n", n_params);
        goto fail;
    }
    if (check_tensor(&params[0], "W1", 2, ctx->D, ctx->H) || check_tensor(&params[1], "b1", 1, ctx->H, 0) ||
        check_tensor(&params[2], "W2", 2, ctx->H, ctx->D) || check_tensor(&params[3], "b2", 1, ctx->D, 0))
        goto fail;
    ctx->Dp = (ctx->D + NR - 1) / NR * NR;
    ctx->Hp = (ctx->H + NR - 1) / NR * NR;
    ctx->W1 = widen(&params[0], ctx->D, ctx->H, ctx->Hp);
    ctx->b1 = widen(&params[1], 1, ctx->H, ctx->Hp);
    ctx->W2 = widen(&params[2], ctx->H, ctx->D, ctx->Dp);
    ctx->b2 = widen(&params[3], 1, ctx->D, ctx->Dp);
    ctx->x = calloc(ROWS * (size_t)ctx->D, sizeof(float));
    ctx->hid = calloc(ROWS * (size_t)ctx->Hp, sizeof(float));
    if (!ctx->W1 || !ctx->b1 || !ctx->W2 || !ctx->b2 || !ctx->x || !ctx->hid) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

/* out = bias + in[MR rows, K] · W[K, NR cols]; in has row stride ldi, W row stride ldw. The sums
 * live in a local array so the compiler can keep them in registers (out may alias nothing, but it
 * cannot know that). */
static void tile_4x8(const float *in, int64_t ldi, int64_t K, const float *W, int64_t ldw,
                     const float *bias, float out[MR][NR]) {
    float c[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[r][j] = bias[j];
    for (int64_t k = 0; k < K; k++) {
        const float *w = W + k * ldw;
        for (int r = 0; r < MR; r++) {
            float a = in[r * ldi + k];
            for (int j = 0; j < NR; j++) c[r][j] += a * w[j];
        }
    }
    memcpy(out, c, sizeof(c));
}

/* hid[rows, Hp] = gelu(x · W1 + b1), kept in fp32; rows is rounded up to a whole tile */
static void mlp_up(const mlp_ctx *ctx, int rows) {
    float c[MR][NR];
    for (int64_t j0 = 0; j0 < ctx->Hp; j0 += NR)
        for (int r0 = 0; r0 < rows; r0 += MR) {
            tile_4x8(ctx->x + r0 * ctx->D, ctx->D, ctx->D, ctx->W1 + j0, ctx->Hp, ctx->b1 + j0, c);
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < NR; j++) ctx->hid[(r0 + r) * ctx->Hp + j0 + j] = gelu_tanh(c[r][j]);
        }
}

/* Y[rows, D] = bf16(hid · W2 + b2); the hid rows beyond `rows` are padding and not stored */
static void mlp_down(const mlp_ctx *ctx, int rows, uint16_t *Y) {
    float c[MR][NR];
    for (int64_t j0 = 0; j0 < ctx->Dp; j0 += NR)
        for (int r0 = 0; r0 < rows; r0 += MR) {
            tile_4x8(ctx->hid + r0 * ctx->Hp, ctx->Hp, ctx->H, ctx->W2 + j0, ctx->Dp, ctx->b2 + j0, c);
            for (int r = 0; r < MR && r0 + r < rows; r++)
                for (int j = 0; j < NR && j0 + j < ctx->D; j++)
                    Y[(r0 + r) * ctx->D + j0 + j] = f32_to_bf16(c[r][j]);
        }
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    mlp_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "mlp_gelu host expert: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    if (check_tensor(&in[0], "X", 2, ctx->T, ctx->D) || check_tensor(&out[0], "Y", 2, ctx->T, ctx->D))
        return 1;
    const uint16_t *X = in[0].data;
    uint16_t *Y = out[0].data;
    const int64_t T = ctx->T, D = ctx->D;

    for (int64_t t0 = 0; t0 < T; t0 += ROWS) {
        int rows = (int)(T - t0 < ROWS ? T - t0 : ROWS);
        for (int64_t i = 0; i < rows * D; i++) ctx->x[i] = bf16_to_f32(X[t0 * D + i]);
        /* the last block's missing rows read as zeros, not as the previous block's tokens */
        for (int64_t i = rows * D; i < ROWS * D; i++) ctx->x[i] = 0.0f;
        mlp_up(ctx, rows);
        mlp_down(ctx, rows, Y + t0 * D);
    }
    return 0;
}
