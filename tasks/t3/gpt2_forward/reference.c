/* Host reference for t3/gpt2_forward: the GPT-2 small forward pass with plain loops, the same
 * arithmetic as the GPU reference (reference.cu) step for step. Activations are kept as floats
 * that hold bf16 values, rounded to bf16 exactly where the GPU reference stores bf16: after every
 * GEMM, after each bias add, after GELU, after each residual add, after every LayerNorm, the
 * probabilities and the attention output; the scores, the LayerNorm statistics and the softmax
 * stay fp32, and every dot product sums in fp32. So the host backend reproduces the GPU numbers up
 * to fp32 summation order (and the odd bf16 rounding that order flips).
 *
 * Speed matters a little (the full 124M weights at the small size, several calls per verify): a
 * linear layer widens a block of weight rows to fp32 once, then takes each against 4 rows of x at
 * a time with 8 partial sums per dot product. The partial sums give the compiler independent
 * chains to vectorise without reordering anything itself, and the order of the sum is the same
 * whichever rows share a block, so a position's result never depends on the others. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define HEAD_DIM 64
#define MAX_POS 1024 /* rows of wpe: the longest context the model knows */
#define LN_EPS 1e-5f
#define LANES 8      /* partial sums per dot product */
#define ROWS 4       /* rows of x taken against one weight row at a time */
#define WBLOCK 16    /* weight rows widened to fp32 at a time: 16 x 3072 floats fit in L2 */

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

static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* The params in ABI order (task.json). Shapes are filled in from the sizes in st_init. */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_LN2W, P_LN2B,
       P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, N_PARAMS };
static const char *const param_names[N_PARAMS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb" };

typedef struct {
    int64_t B, T, L, C, NH, V;
    const uint16_t *p[N_PARAMS]; /* owned by the harness, live until st_free */
    float *x;                    /* [B*T, C] residual stream */
    float *ln;                   /* [B*T, C] LayerNorm output */
    float *qkv;                  /* [B*T, 3C] */
    float *att;                  /* [B*T, C] attention output, heads side by side */
    float *proj;                 /* [B*T, C] output of a projection, before the residual add */
    float *fc;                   /* [B*T, 4C] */
    float *wblock;               /* [WBLOCK, 4C] weight rows widened to fp32 */
    float *s;                    /* [T] one query's scores, then probabilities */
} gpt2_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "gpt2_forward host reference: size '%s' missing from the config\n", name);
    return 1;
}

/* name NULL: any name (inputs and outputs are checked by position) */
static int check_tensor(const st_tensor *t, const char *what, const char *name, st_dtype dtype,
                        const char *dtype_name, int ndim, const int64_t *shape) {
    int ok = (name == NULL || (t->name != NULL && strcmp(t->name, name) == 0)) &&
             t->dtype == dtype && t->ndim == ndim && t->data != NULL;
    for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
    if (!ok) {
        char dims[96] = "";
        for (int d = 0; d < ndim; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "",
                     (long long)shape[d]);
        fprintf(stderr, "gpt2_forward host reference: %s: expected %s%s%s%s of shape [%s]\n", what,
                name ? "'" : "", name ? name : "", name ? "', " : "", dtype_name, dims);
    }
    return !ok;
}

/* ------------------------------------------------------------------------------------------ */
/* linear layers */

/* The fixed summation order of every dot product: lane l sums the products k = l, l + 8, ... of
 * the first K - K % 8, the lanes are added pairwise, then the tail in order. */
static float lanes_total(const float *a, const float *x, const float *w, int64_t k8, int64_t K) {
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int64_t k = k8; k < K; k++) s += x[k] * w[k];
    return s;
}

/* y[m] = x[m] · w for ROWS rows of x, K apart */
static void dot_rows(const float *x, const float *w, int64_t K, float *y) {
    float a[ROWS][LANES] = {{0}};
    const int64_t k8 = K - K % LANES;
    for (int64_t k = 0; k < k8; k += LANES) {
        for (int r = 0; r < ROWS; r++)
            for (int l = 0; l < LANES; l++) a[r][l] += x[r * K + k + l] * w[k + l];
    }
    for (int r = 0; r < ROWS; r++) y[r] = lanes_total(a[r], x + r * K, w, k8, K);
}

static float dot_row(const float *x, const float *w, int64_t K) {
    float a[LANES] = {0};
    const int64_t k8 = K - K % LANES;
    for (int64_t k = 0; k < k8; k += LANES)
        for (int l = 0; l < LANES; l++) a[l] += x[k + l] * w[k + l];
    return lanes_total(a, x, w, k8, K);
}

/* y[m, n] = bf16(x[m, :] · W[n, :]) for x [M, K] and W bf16 [N, K] (y = x Wᵀ, the GPU's GEMM
 * rounded to its bf16 output), then with a bias y = bf16(y + b[n]) (the GPU's bias kernel). The
 * result goes to yf (floats, M x N) or, for the logits, to yh (bf16, rows ldy apart). */
static void linear(gpt2_ctx *ctx, const float *x, const uint16_t *W, const uint16_t *bias,
                   int64_t M, int64_t N, int64_t K, float *yf, uint16_t *yh, int64_t ldy) {
    float *wb = ctx->wblock;
    for (int64_t n0 = 0; n0 < N; n0 += WBLOCK) {
        const int64_t nb = N - n0 < WBLOCK ? N - n0 : WBLOCK;
        for (int64_t i = 0; i < nb * K; i++) wb[i] = bf16_to_f32(W[n0 * K + i]);
        for (int64_t m = 0; m < M; m += ROWS) {
            const int64_t mb = M - m < ROWS ? M - m : ROWS;
            for (int64_t j = 0; j < nb; j++) {
                const int64_t n = n0 + j;
                float y[ROWS];
                if (mb == ROWS)
                    dot_rows(x + m * K, wb + j * K, K, y);
                else
                    for (int64_t r = 0; r < mb; r++) y[r] = dot_row(x + (m + r) * K, wb + j * K, K);
                for (int64_t r = 0; r < mb; r++) {
                    float v = round_bf16(y[r]);
                    if (bias) v = round_bf16(v + bf16_to_f32(bias[n]));
                    if (yh)
                        yh[(m + r) * ldy + n] = f32_to_bf16(v);
                    else
                        yf[(m + r) * N + n] = v;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* the other operations */

/* y = bf16((x - mean) * rstd * w + b) per row, mean and biased variance in fp32, two passes */
static void layernorm(const float *x, const uint16_t *w, const uint16_t *b, float *y, int64_t rows,
                      int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float s = 0.0f;
        for (int64_t c = 0; c < C; c++) s += xr[c];
        const float mean = s / (float)C;
        float sq = 0.0f;
        for (int64_t c = 0; c < C; c++) {
            const float d = xr[c] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf(sq / (float)C + LN_EPS);
        for (int64_t c = 0; c < C; c++) {
            const float v = (xr[c] - mean) * rstd;
            yr[c] = round_bf16(v * bf16_to_f32(w[c]) + bf16_to_f32(b[c]));
        }
    }
}

static void residual_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = round_bf16(x[i] + y[i]);
}

/* Causal attention from qkv [B*T, 3C] (q | k | v, head h at columns h*64.. of each) into att
 * [B*T, C]: per query, fp32 scores against keys 0..i scaled by 1/8 after the dot product (the
 * GPU's GEMM alpha, a power of two, so exact), a max-subtracted softmax, probabilities rounded to
 * bf16 (the GPU stores them so) and the fp32 weighted sum of the v rows, rounded to bf16. */
static void attention(gpt2_ctx *ctx) {
    const int64_t T = ctx->T, C = ctx->C, C3 = 3 * C;
    float *s = ctx->s;
    for (int64_t b = 0; b < ctx->B; b++) {
        const float *qkv = ctx->qkv + b * T * C3;
        for (int64_t h = 0; h < ctx->NH; h++) {
            const float *q = qkv + h * HEAD_DIM, *k = qkv + C + h * HEAD_DIM;
            const float *v = qkv + 2 * C + h * HEAD_DIM;
            for (int64_t i = 0; i < T; i++) {
                float m = -INFINITY;
                for (int64_t j = 0; j <= i; j++) {
                    s[j] = dot_row(q + i * C3, k + j * C3, HEAD_DIM) * 0.125f;
                    m = fmaxf(m, s[j]);
                }
                float sum = 0.0f;
                for (int64_t j = 0; j <= i; j++) sum += expf(s[j] - m);
                for (int64_t j = 0; j <= i; j++) s[j] = round_bf16(expf(s[j] - m) / sum);
                float acc[HEAD_DIM] = {0};
                for (int64_t j = 0; j <= i; j++) {
                    const float *vj = v + j * C3;
                    for (int d = 0; d < HEAD_DIM; d++) acc[d] += s[j] * vj[d];
                }
                float *o = ctx->att + (b * T + i) * C + h * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; d++) o[d] = round_bf16(acc[d]);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ABI */

void st_free(void *p) {
    gpt2_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->x);
    free(ctx->ln);
    free(ctx->qkv);
    free(ctx->att);
    free(ctx->proj);
    free(ctx->fc);
    free(ctx->wblock);
    free(ctx->s);
    free(ctx);
}

static int init_ctx(gpt2_ctx *ctx, const st_config *cfg, const st_tensor *params, int32_t n_params) {
    if (cfg_get(cfg, "B", &ctx->B) || cfg_get(cfg, "T", &ctx->T) || cfg_get(cfg, "L", &ctx->L) ||
        cfg_get(cfg, "C", &ctx->C) || cfg_get(cfg, "NH", &ctx->NH) || cfg_get(cfg, "V", &ctx->V))
        return 1;
    const int64_t B = ctx->B, T = ctx->T, L = ctx->L, C = ctx->C, NH = ctx->NH, V = ctx->V;
    if (B < 1 || T < 1 || T > MAX_POS || L < 1 || NH < 1 || V < 1 || C != NH * HEAD_DIM ||
        B > INT32_MAX / T) {
        fprintf(stderr, "gpt2_forward host reference: sizes B=%lld T=%lld L=%lld C=%lld NH=%lld "
                "V=%lld: need B, L, NH, V >= 1, 1 <= T <= %d and C = NH * %d (64-wide heads)\n",
                (long long)B, (long long)T, (long long)L, (long long)C, (long long)NH, (long long)V,
                MAX_POS, HEAD_DIM);
        return 1;
    }
    if (n_params != N_PARAMS) {
        fprintf(stderr, "gpt2_forward host reference: expected %d params, got %d\n", N_PARAMS,
                n_params);
        return 1;
    }
    const int64_t shapes[N_PARAMS][4] = {   /* ndim, then the dimensions */
        {2, V, C}, {2, MAX_POS, C}, {2, L, C}, {2, L, C}, {3, L, 3 * C, C}, {2, L, 3 * C},
        {3, L, C, C}, {2, L, C}, {2, L, C}, {2, L, C}, {3, L, 4 * C, C}, {2, L, 4 * C},
        {3, L, C, 4 * C}, {2, L, C}, {1, C}, {1, C} };
    for (int i = 0; i < N_PARAMS; i++) {
        char what[32];
        snprintf(what, sizeof what, "param %d", i);
        if (check_tensor(&params[i], what, param_names[i], ST_BF16, "bf16", (int)shapes[i][0],
                         &shapes[i][1]))
            return 1;
        ctx->p[i] = params[i].data;
    }

    const size_t BT = (size_t)(B * T), Cs = (size_t)C, f = sizeof(float);
    ctx->x = malloc(BT * Cs * f);
    ctx->ln = malloc(BT * Cs * f);
    ctx->qkv = malloc(BT * 3 * Cs * f);
    ctx->att = malloc(BT * Cs * f);
    ctx->proj = malloc(BT * Cs * f);
    ctx->fc = malloc(BT * 4 * Cs * f);
    ctx->wblock = malloc((size_t)WBLOCK * 4 * Cs * f);
    ctx->s = malloc((size_t)T * f);
    if (!ctx->x || !ctx->ln || !ctx->qkv || !ctx->att || !ctx->proj || !ctx->fc || !ctx->wblock ||
        !ctx->s) {
        fprintf(stderr, "gpt2_forward host reference: out of memory for the activations\n");
        return 1;
    }
    return 0;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)stream;
    *out_ctx = NULL;
    gpt2_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    if (init_ctx(ctx, cfg, params, n_params)) {
        st_free(ctx);
        return 1;
    }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    gpt2_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "gpt2_forward host reference: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    const int64_t B = ctx->B, T = ctx->T, C = ctx->C, V = ctx->V, BT = B * T;
    const int64_t tok_shape[2] = {B, T}, logit_shape[3] = {B, T, V};
    if (check_tensor(&in[0], "input 0", NULL, ST_I32, "i32", 2, tok_shape) ||
        check_tensor(&out[0], "output 0", NULL, ST_BF16, "bf16", 3, logit_shape))
        return 1;
    const int32_t *tokens = in[0].data;
    uint16_t *logits = out[0].data;
    const uint16_t *const *w = ctx->p;

    for (int64_t bt = 0; bt < BT; bt++) {
        const int32_t tok = tokens[bt];
        if (tok < 0 || tok >= V) {
            fprintf(stderr, "gpt2_forward host reference: tokens[%lld] = %d is outside [0, %lld)\n",
                    (long long)bt, tok, (long long)V);
            return 1;
        }
        const uint16_t *te = w[P_WTE] + (int64_t)tok * C, *pe = w[P_WPE] + (bt % T) * C;
        for (int64_t c = 0; c < C; c++)
            ctx->x[bt * C + c] = round_bf16(bf16_to_f32(te[c]) + bf16_to_f32(pe[c]));
    }
    for (int64_t l = 0; l < ctx->L; l++) {
        layernorm(ctx->x, w[P_LN1W] + l * C, w[P_LN1B] + l * C, ctx->ln, BT, C);
        linear(ctx, ctx->ln, w[P_QKVW] + l * 3 * C * C, w[P_QKVB] + l * 3 * C, BT, 3 * C, C,
               ctx->qkv, NULL, 0);
        attention(ctx);
        linear(ctx, ctx->att, w[P_ATTPROJW] + l * C * C, w[P_ATTPROJB] + l * C, BT, C, C,
               ctx->proj, NULL, 0);
        residual_add(ctx->x, ctx->proj, BT * C);

        layernorm(ctx->x, w[P_LN2W] + l * C, w[P_LN2B] + l * C, ctx->ln, BT, C);
        linear(ctx, ctx->ln, w[P_FCW] + l * 4 * C * C, w[P_FCB] + l * 4 * C, BT, 4 * C, C,
               ctx->fc, NULL, 0);
        for (int64_t i = 0; i < BT * 4 * C; i++) ctx->fc[i] = round_bf16(gelu_tanh(ctx->fc[i]));
        linear(ctx, ctx->fc, w[P_FCPROJW] + l * 4 * C * C, w[P_FCPROJB] + l * C, BT, C, 4 * C,
               ctx->proj, NULL, 0);
        residual_add(ctx->x, ctx->proj, BT * C);
    }
    layernorm(ctx->x, w[P_LNFW], w[P_LNFB], ctx->ln, BT, C);
    /* the tied output projection: logits = LN(x) · wteᵀ, no bias, rows V apart */
    linear(ctx, ctx->ln, w[P_WTE], NULL, BT, V, C, NULL, logits, V);
    return 0;
}
