/* Host solution for tests/kernelbench/transformer_block.py, the pre-LayerNorm GPT block
 * x = x + proj(attn(ln1(x))); x = x + fc2(gelu(fc1(ln2(x)))), with plain loops. Every
 * intermediate is kept in fp32, as PyTorch keeps it, but every sum is taken in double so the
 * result sits well inside the 1e-4 tolerance whatever order PyTorch summed in. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* Fixed by the program's get_inputs() and get_init_inputs(): the head count is not visible in the
 * weights, and the workspace is sized before the first input arrives. */
#define BATCH 4
#define SEQ 64
#define EMBD 128
#define N_HEAD 4
#define HEAD_DIM (EMBD / N_HEAD)
#define HIDDEN (4 * EMBD)
#define ROWS (BATCH * SEQ)
#define LN_EPS 1e-5
#define SQRT1_2 0.70710678118654752440 /* strict C11 has no M_SQRT1_2 */

#define N_PARAMS 12

typedef struct {
    /* owned by the harness, live until st_free; Linear weights are [out, in] */
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    float *xn;   /* [ROWS, EMBD]  a LayerNorm output */
    float *qkv;  /* [ROWS, 3*EMBD] */
    float *att;  /* [ROWS, EMBD]  the heads side by side, before the out projection */
    float *x1;   /* [ROWS, EMBD]  the residual stream after attention */
    float *hid;  /* [ROWS, HIDDEN] gelu(fc1(...)) */
    float *prob; /* [SEQ] one row of attention weights */
} block_ctx;

/* Looks a param up by its state_dict key and checks it is fp32 of the given shape (ndim 1 uses
 * d0 only). */
static const float *find_param(const st_tensor *params, int32_t n, const char *name, int ndim,
                               int64_t d0, int64_t d1) {
    for (int32_t i = 0; i < n; i++) {
        const st_tensor *t = &params[i];
        if (strcmp(t->name, name) != 0) continue;
        if (t->dtype == ST_F32 && t->ndim == ndim && t->shape[0] == d0 &&
            (ndim == 1 || t->shape[1] == d1) && t->data != NULL)
            return t->data;
        if (ndim == 1)
            fprintf(stderr, "transformer_block host solution: %s: expected f32 of shape [%lld]\n",
                    name, (long long)d0);
        else
            fprintf(stderr, "transformer_block host solution: %s: expected f32 of shape [%lld, %lld]\n",
                    name, (long long)d0, (long long)d1);
        return NULL;
    }
    fprintf(stderr, "transformer_block host solution: param '%s' missing\n", name);
    return NULL;
}

static int check_io(const st_tensor *t, const char *what) {
    int ok = t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == BATCH && t->shape[1] == SEQ &&
             t->shape[2] == EMBD && t->data != NULL;
    if (!ok)
        fprintf(stderr, "transformer_block host solution: %s: expected f32 of shape [%d, %d, %d]\n",
                what, BATCH, SEQ, EMBD);
    return !ok;
}

static void layernorm(const float *x, const float *w, const float *b, float *y) {
    for (int r = 0; r < ROWS; r++) {
        const float *xr = x + (size_t)r * EMBD;
        double mean = 0.0, var = 0.0;
        for (int c = 0; c < EMBD; c++) mean += xr[c];
        mean /= EMBD;
        for (int c = 0; c < EMBD; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= EMBD; /* biased, as LayerNorm normalises */
        double rstd = 1.0 / sqrt(var + LN_EPS);
        for (int c = 0; c < EMBD; c++)
            y[(size_t)r * EMBD + c] = (float)((xr[c] - mean) * rstd * w[c] + b[c]);
    }
}

enum epilogue { EPI_BIAS, EPI_BIAS_GELU, EPI_BIAS_RESIDUAL };

/* y[ROWS, n_out] = x[ROWS, n_in]·W^T + b, then the epilogue: exact GELU, or adding res (the
 * residual stream) to the rounded Linear output, as `x + linear(...)` does. */
static void linear(const float *x, const float *W, const float *b, int n_in, int n_out,
                   enum epilogue epi, const float *res, float *y) {
    for (int r = 0; r < ROWS; r++) {
        const float *xr = x + (size_t)r * n_in;
        for (int o = 0; o < n_out; o++) {
            const float *wo = W + (size_t)o * n_in;
            double acc = 0.0;
            for (int k = 0; k < n_in; k++) acc += (double)xr[k] * wo[k];
            float v = (float)(acc + b[o]);
            size_t i = (size_t)r * n_out + o;
            if (epi == EPI_BIAS_GELU) v = (float)(0.5 * v * (1.0 + erf(v * SQRT1_2)));
            else if (epi == EPI_BIAS_RESIDUAL) v = res[i] + v;
            y[i] = v;
        }
    }
}

/* Causal attention, one (batch, head, query) at a time; head h owns columns h*HEAD_DIM.. of each
 * of the q, k and v thirds of a qkv row, and of the att row. */
static void attention(const float *qkv, float *prob, float *att) {
    const float scale = (float)(1.0 / sqrt((double)HEAD_DIM));
    const size_t stride = 3 * EMBD;
    for (int b = 0; b < BATCH; b++)
        for (int h = 0; h < N_HEAD; h++)
            for (int i = 0; i < SEQ; i++) {
                const float *q = qkv + (size_t)(b * SEQ + i) * stride + h * HEAD_DIM;
                /* keys after i are masked to -inf, so they get weight exactly 0: skip them */
                float max = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + (size_t)(b * SEQ + j) * stride + EMBD + h * HEAD_DIM;
                    double dot = 0.0;
                    for (int d = 0; d < HEAD_DIM; d++) dot += (double)q[d] * k[d];
                    prob[j] = (float)dot * scale;
                    if (prob[j] > max) max = prob[j];
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    prob[j] = expf(prob[j] - max);
                    sum += prob[j];
                }
                for (int j = 0; j <= i; j++) prob[j] = (float)(prob[j] / sum);
                float *out = att + (size_t)(b * SEQ + i) * EMBD + h * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; d++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++)
                        acc += (double)prob[j] * qkv[(size_t)(b * SEQ + j) * stride + 2 * EMBD + h * HEAD_DIM + d];
                    out[d] = (float)acc;
                }
            }
}

void st_free(void *p) {
    block_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->xn);
    free(ctx->qkv);
    free(ctx->att);
    free(ctx->x1);
    free(ctx->hid);
    free(ctx->prob);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    if (n_params != N_PARAMS) {
        fprintf(stderr, "transformer_block host solution: expected %d params, got %d\n", N_PARAMS,
                n_params);
        return 1;
    }
    block_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    const st_tensor *P = params;
    int32_t n = n_params;
    if (!(ctx->ln1_w = find_param(P, n, "ln1.weight", 1, EMBD, 0)) ||
        !(ctx->ln1_b = find_param(P, n, "ln1.bias", 1, EMBD, 0)) ||
        !(ctx->qkv_w = find_param(P, n, "attn.qkv.weight", 2, 3 * EMBD, EMBD)) ||
        !(ctx->qkv_b = find_param(P, n, "attn.qkv.bias", 1, 3 * EMBD, 0)) ||
        !(ctx->proj_w = find_param(P, n, "attn.proj.weight", 2, EMBD, EMBD)) ||
        !(ctx->proj_b = find_param(P, n, "attn.proj.bias", 1, EMBD, 0)) ||
        !(ctx->ln2_w = find_param(P, n, "ln2.weight", 1, EMBD, 0)) ||
        !(ctx->ln2_b = find_param(P, n, "ln2.bias", 1, EMBD, 0)) ||
        !(ctx->fc1_w = find_param(P, n, "fc1.weight", 2, HIDDEN, EMBD)) ||
        !(ctx->fc1_b = find_param(P, n, "fc1.bias", 1, HIDDEN, 0)) ||
        !(ctx->fc2_w = find_param(P, n, "fc2.weight", 2, EMBD, HIDDEN)) ||
        !(ctx->fc2_b = find_param(P, n, "fc2.bias", 1, EMBD, 0)))
        goto fail;
    ctx->xn = malloc(sizeof(float) * ROWS * EMBD);
    ctx->qkv = malloc(sizeof(float) * ROWS * 3 * EMBD);
    ctx->att = malloc(sizeof(float) * ROWS * EMBD);
    ctx->x1 = malloc(sizeof(float) * ROWS * EMBD);
    ctx->hid = malloc(sizeof(float) * ROWS * HIDDEN);
    ctx->prob = malloc(sizeof(float) * SEQ);
    if (!ctx->xn || !ctx->qkv || !ctx->att || !ctx->x1 || !ctx->hid || !ctx->prob) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    block_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "transformer_block host solution: expected 1 input and 1 output, got %d and %d\n",
                n_in, n_out);
        return 1;
    }
    if (check_io(&in[0], "x0") || check_io(&out[0], "y0")) return 1;
    const float *x = in[0].data;
    float *y = out[0].data;

    layernorm(x, ctx->ln1_w, ctx->ln1_b, ctx->xn);
    linear(ctx->xn, ctx->qkv_w, ctx->qkv_b, EMBD, 3 * EMBD, EPI_BIAS, NULL, ctx->qkv);
    attention(ctx->qkv, ctx->prob, ctx->att);
    linear(ctx->att, ctx->proj_w, ctx->proj_b, EMBD, EMBD, EPI_BIAS_RESIDUAL, x, ctx->x1);
    layernorm(ctx->x1, ctx->ln2_w, ctx->ln2_b, ctx->xn);
    linear(ctx->xn, ctx->fc1_w, ctx->fc1_b, EMBD, HIDDEN, EPI_BIAS_GELU, NULL, ctx->hid);
    linear(ctx->hid, ctx->fc2_w, ctx->fc2_b, HIDDEN, EMBD, EPI_BIAS_RESIDUAL, ctx->x1, y);
    return 0;
}
