/* Host solution for tests/kernelbench/lstm.py: a one-layer LSTM (PyTorch's gate order i, f, g, o;
 * h0 = c0 = 0) over x[BATCH, SEQ, IN], then fc on the last step's hidden state. The state h, c
 * is kept in fp32, as PyTorch keeps it, but every gate sum is taken in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* Fixed by the program's get_inputs() and get_init_inputs(), so the state is sized before the
 * first input arrives. */
#define BATCH 8
#define SEQ 32
#define IN 64
#define HID 128
#define OUT 16

#define N_PARAMS 6

typedef struct {
    /* owned by the harness, live until st_free; gate g's rows are g*HID.. of w_ih, w_hh, b_* */
    const float *w_ih, *w_hh, *b_ih, *b_hh; /* [4*HID, IN], [4*HID, HID], [4*HID], [4*HID] */
    const float *fc_w, *fc_b;               /* [OUT, HID], [OUT] */
    /* batch rows are independent, so the state is one row at a time */
    float *h, *c;                           /* [HID] each */
    double *gates;                          /* [4*HID] gate pre-activations */
} lstm_ctx;

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
            fprintf(stderr, "lstm host solution: %s: expected f32 of shape [%lld]\n", name,
                    (long long)d0);
        else
            fprintf(stderr, "lstm host solution: %s: expected f32 of shape [%lld, %lld]\n", name,
                    (long long)d0, (long long)d1);
        return NULL;
    }
    fprintf(stderr, "lstm host solution: param '%s' missing\n", name);
    return NULL;
}

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

void st_free(void *p) {
    lstm_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->h);
    free(ctx->c);
    free(ctx->gates);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)cfg;
    (void)stream;
    *out_ctx = NULL;
    if (n_params != N_PARAMS) {
        fprintf(stderr, "lstm host solution: expected %d params, got %d\n", N_PARAMS, n_params);
        return 1;
    }
    lstm_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    const st_tensor *P = params;
    int32_t n = n_params;
    if (!(ctx->w_ih = find_param(P, n, "lstm.weight_ih_l0", 2, 4 * HID, IN)) ||
        !(ctx->w_hh = find_param(P, n, "lstm.weight_hh_l0", 2, 4 * HID, HID)) ||
        !(ctx->b_ih = find_param(P, n, "lstm.bias_ih_l0", 1, 4 * HID, 0)) ||
        !(ctx->b_hh = find_param(P, n, "lstm.bias_hh_l0", 1, 4 * HID, 0)) ||
        !(ctx->fc_w = find_param(P, n, "fc.weight", 2, OUT, HID)) ||
        !(ctx->fc_b = find_param(P, n, "fc.bias", 1, OUT, 0)))
        goto fail;
    ctx->h = malloc(sizeof(float) * HID);
    ctx->c = malloc(sizeof(float) * HID);
    ctx->gates = malloc(sizeof(double) * 4 * HID);
    if (!ctx->h || !ctx->c || !ctx->gates) goto fail;
    *out_ctx = ctx;
    return 0;
fail:
    st_free(ctx);
    return 1;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    lstm_ctx *ctx = p;
    if (n_in != 1 || n_out != 1) {
        fprintf(stderr, "lstm host solution: expected 1 input and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    const st_tensor *tx = &in[0], *ty = &out[0];
    if (tx->dtype != ST_F32 || tx->ndim != 3 || tx->shape[0] != BATCH || tx->shape[1] != SEQ ||
        tx->shape[2] != IN || !tx->data) {
        fprintf(stderr, "lstm host solution: x0: expected f32 of shape [%d, %d, %d]\n", BATCH, SEQ, IN);
        return 1;
    }
    if (ty->dtype != ST_F32 || ty->ndim != 2 || ty->shape[0] != BATCH || ty->shape[1] != OUT || !ty->data) {
        fprintf(stderr, "lstm host solution: y0: expected f32 of shape [%d, %d]\n", BATCH, OUT);
        return 1;
    }
    const float *x = tx->data;
    float *y = ty->data;
    float *h = ctx->h, *c = ctx->c;
    double *gates = ctx->gates;

    for (int b = 0; b < BATCH; b++) {
        memset(h, 0, sizeof(float) * HID);
        memset(c, 0, sizeof(float) * HID);
        for (int t = 0; t < SEQ; t++) {
            const float *xt = x + ((size_t)b * SEQ + t) * IN;
            for (int r = 0; r < 4 * HID; r++) {
                const float *wi = ctx->w_ih + (size_t)r * IN, *wh = ctx->w_hh + (size_t)r * HID;
                double acc = (double)ctx->b_ih[r] + ctx->b_hh[r];
                for (int k = 0; k < IN; k++) acc += (double)xt[k] * wi[k];
                for (int k = 0; k < HID; k++) acc += (double)h[k] * wh[k];
                gates[r] = acc;
            }
            /* every gate has read the old h by now, so h can be overwritten in place */
            for (int j = 0; j < HID; j++) {
                double i_g = sigmoid(gates[j]), f_g = sigmoid(gates[HID + j]);
                double g_g = tanh(gates[2 * HID + j]), o_g = sigmoid(gates[3 * HID + j]);
                c[j] = (float)(f_g * c[j] + i_g * g_g);
                h[j] = (float)(o_g * tanh((double)c[j]));
            }
        }
        for (int o = 0; o < OUT; o++) {
            double acc = 0.0;
            for (int k = 0; k < HID; k++) acc += (double)h[k] * ctx->fc_w[(size_t)o * HID + k];
            y[(size_t)b * OUT + o] = (float)(acc + ctx->fc_b[o]);
        }
    }
    return 0;
}
