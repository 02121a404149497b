/* Hooks of t3/gpt2_forward: the semantic validator and the causality check. Logits of a language
 * model are judged by what they mean rather than bit for bit: close to the reference's in NMSE
 * over the whole output, the same next token (up to ties within the rounding noise) at almost
 * every position, and causal. Causality needs a second run: st_task_perturb changes one token in
 * every sequence but one, and st_task_validate_perturbed demands that nothing before a changed
 * token, and nothing in the untouched sequence, changes by a single bit, while the logits at the
 * changed position do change. The logits are large (823 MB at the eval size), so the validator
 * splits its pass over threads. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

/* The limits the task's description promises. */
#define NMSE_MAX 2e-3
#define AGREE_MIN 0.99 /* and at least one position may disagree */
#define TIE_REL 0.02
#define MAX_THREADS 16

// ----------------------------------------------------------------------------
// small helpers

static int64_t size_get(const st_config *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return s->values[i];
    return -1;
}

static const st_tensor *find(const st_tensor *t, int32_t n, const char *name) {
    for (int i = 0; i < n; i++)
        if (t[i].name && strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct dims { int64_t B, T, V; } dims;

/* The sizes and the shapes of tokens and logits, checked; on failure msg says why. */
static int get_dims(const st_config *sizes, const st_tensor *in, int32_t n_in,
                    const st_tensor *out, int32_t n_out, const st_tensor **tokens,
                    const st_tensor **logits, dims *d, char *msg, size_t msglen) {
    d->B = size_get(sizes, "B");
    d->T = size_get(sizes, "T");
    d->V = size_get(sizes, "V");
    if (d->B < 1 || d->T < 1 || d->V < 2) {
        snprintf(msg, msglen, "sizes B, T, V missing or out of range");
        return 1;
    }
    *tokens = find(in, n_in, "tokens");
    if (!*tokens || (*tokens)->dtype != ST_I32 || (*tokens)->ndim != 2 ||
        (*tokens)->shape[0] != d->B || (*tokens)->shape[1] != d->T || !(*tokens)->data) {
        snprintf(msg, msglen, "input tokens is not i32 [B, T]");
        return 1;
    }
    if (!logits) return 0;
    *logits = find(out, n_out, "logits");
    if (!*logits || (*logits)->dtype != ST_BF16 || (*logits)->ndim != 3 ||
        (*logits)->shape[0] != d->B || (*logits)->shape[1] != d->T ||
        (*logits)->shape[2] != d->V || !(*logits)->data) {
        snprintf(msg, msglen, "output logits is not bf16 [B, T, V]");
        return 1;
    }
    return 0;
}

static int thread_count(int64_t rows) {
    int n = MAX_THREADS;
    if (rows < n) n = (int)rows;
    return n < 1 ? 1 : n;
}

// ----------------------------------------------------------------------------
// the validator: NMSE, top-token agreement, finite values

typedef struct part {
    const uint16_t *got, *want;
    int64_t row0, row1, V;
    double se, sw;          /* sum of squared errors, sum of squared reference values */
    int64_t agree;          /* rows whose top token passes */
    int64_t bad_row;        /* first row with a non-finite value, or -1 */
    int64_t bad_col;
    int bad_in_want;
    int64_t worst_row;      /* the disagreeing row with the largest shortfall, or -1 */
    double worst_short;
    int64_t worst_got_top, worst_want_top;
} part;

static void *validate_part(void *arg) {
    part *p = arg;
    for (int64_t r = p->row0; r < p->row1; r++) {
        const uint16_t *g = p->got + r * p->V, *w = p->want + r * p->V;
        float gmax = -INFINITY, wmax = -INFINITY;
        int64_t garg = 0, warg = 0;
        double se = 0, sw = 0;
        for (int64_t j = 0; j < p->V; j++) {
            float a = bf16_to_float(g[j]), b = bf16_to_float(w[j]);
            if (!isfinite(a) || !isfinite(b)) {
                if (p->bad_row < 0) {
                    p->bad_row = r;
                    p->bad_col = j;
                    p->bad_in_want = !isfinite(b);
                }
                return NULL;
            }
            double e = (double)a - (double)b;
            se += e * e;
            sw += (double)b * b;
            if (a > gmax) { gmax = a; garg = j; }
            if (b > wmax) { wmax = b; warg = j; }
        }
        p->se += se;
        p->sw += sw;
        double slack = TIE_REL * fmax(1.0, fabs(wmax));
        double shortfall = (double)wmax - bf16_to_float(w[garg]);
        if (shortfall <= slack) {
            p->agree++;
        } else if (p->worst_row < 0 || shortfall > p->worst_short) {
            p->worst_row = r;
            p->worst_short = shortfall;
            p->worst_got_top = garg;
            p->worst_want_top = warg;
        }
    }
    return NULL;
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in,
                     const st_tensor *got, const st_tensor *want, int32_t n_out,
                     char *msg, size_t msglen) {
    const st_tensor *tokens, *lg, *lw;
    dims d;
    if (get_dims(sizes, in, n_in, got, n_out, &tokens, &lg, &d, msg, msglen) ||
        get_dims(sizes, in, n_in, want, n_out, &tokens, &lw, &d, msg, msglen))
        return 1;
    int64_t rows = d.B * d.T;
    int nt = thread_count(rows);
    part parts[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS];
    for (int k = 0; k < nt; k++) {
        parts[k] = (part){lg->data, lw->data, rows * k / nt, rows * (k + 1) / nt, d.V,
                          0, 0, 0, -1, 0, 0, -1, 0, 0, 0};
        started[k] = pthread_create(&th[k], NULL, validate_part, &parts[k]) == 0;
        if (!started[k]) validate_part(&parts[k]);
    }
    double se = 0, sw = 0;
    int64_t agree = 0;
    const part *bad = NULL, *worst = NULL;
    for (int k = 0; k < nt; k++) {
        if (started[k]) pthread_join(th[k], NULL);
        se += parts[k].se;
        sw += parts[k].sw;
        agree += parts[k].agree;
        if (!bad && parts[k].bad_row >= 0) bad = &parts[k];
        if (parts[k].worst_row >= 0 && (!worst || parts[k].worst_short > worst->worst_short))
            worst = &parts[k];
    }
    if (bad) {
        const uint16_t *src = bad->bad_in_want ? lw->data : lg->data;
        snprintf(msg, msglen, "%s (%lld, %lld, %lld) is %g: every logit must be finite",
                 bad->bad_in_want ? "the reference's logit" : "logit",
                 (long long)(bad->bad_row / d.T), (long long)(bad->bad_row % d.T),
                 (long long)bad->bad_col,
                 (double)bf16_to_float(src[bad->bad_row * d.V + bad->bad_col]));
        return 1;
    }
    double nmse = sw > 0 ? se / sw : (se > 0 ? INFINITY : 0);
    double frac = (double)agree / (double)rows;
    /* 1 % of the positions may disagree, and always one: on a set of 64 positions a fixed 99 %
     * would allow none, and an honest bf16 program can move one near-tie (NOTES.md) */
    int64_t may_miss = (int64_t)floor((1.0 - AGREE_MIN) * (double)rows + 1e-9);
    if (may_miss < 1) may_miss = 1;
    int ok = nmse <= NMSE_MAX && rows - agree <= may_miss;
    int n = snprintf(msg, msglen, "NMSE %.3g (limit %g); top token agrees at %.2f%% of %lld "
                     "positions (%lld disagree, at most %lld may)", nmse, NMSE_MAX, 100 * frac,
                     (long long)rows, (long long)(rows - agree), (long long)may_miss);
    if (worst && n > 0 && (size_t)n < msglen) {
        const uint16_t *w = (const uint16_t *)lw->data + worst->worst_row * d.V;
        snprintf(msg + n, msglen - (size_t)n, "; worst at (%lld, %lld): top token %lld, which "
                 "the reference scores %g against its top %lld at %g",
                 (long long)(worst->worst_row / d.T), (long long)(worst->worst_row % d.T),
                 (long long)worst->worst_got_top, (double)bf16_to_float(w[worst->worst_got_top]),
                 (long long)worst->worst_want_top,
                 (double)bf16_to_float(w[worst->worst_want_top]));
    }
    return !ok;
}

// ----------------------------------------------------------------------------
// causality: one token changed per sequence, all earlier logits bit for bit the same

int st_task_perturb(const st_config *sizes, uint64_t perturb_seed, st_tensor *in, int32_t n,
                    char *msg, size_t msglen) {
    const st_tensor *tokens;
    dims d;
    if (get_dims(sizes, in, n, NULL, 0, &tokens, NULL, &d, msg, msglen)) return 1;
    int32_t *tok = tokens->data;
    /* One sequence stays as it was (when there are several), so that independence of the
     * batch's sequences is checked as well. */
    int64_t keep = d.B > 1 ? (int64_t)(mix64(perturb_seed) % (uint64_t)d.B) : -1;
    for (int64_t b = 0; b < d.B; b++) {
        if (b == keep) continue;
        uint64_t h = mix64(perturb_seed ^ mix64((uint64_t)b + 1));
        int64_t t = (int64_t)(h % (uint64_t)d.T);
        int64_t old = tok[b * d.T + t];
        int64_t step = 1 + (int64_t)(mix64(h) % (uint64_t)(d.V - 1));
        tok[b * d.T + t] = (int32_t)(((old % d.V + d.V) % d.V + step) % d.V);
    }
    return 0;
}

int st_task_validate_perturbed(const st_config *sizes, const st_tensor *in,
                               const st_tensor *in_perturbed, int32_t n_in, const st_tensor *got,
                               const st_tensor *got_perturbed, int32_t n_out, char *msg,
                               size_t msglen) {
    const st_tensor *t1, *t2, *l1, *l2;
    dims d;
    if (get_dims(sizes, in, n_in, got, n_out, &t1, &l1, &d, msg, msglen) ||
        get_dims(sizes, in_perturbed, n_in, got_perturbed, n_out, &t2, &l2, &d, msg, msglen))
        return 1;
    const int32_t *a = t1->data, *b = t2->data;
    const uint16_t *x = l1->data, *y = l2->data;
    int64_t changed = 0;
    for (int64_t s = 0; s < d.B; s++) {
        int64_t first = d.T;
        for (int64_t t = 0; t < d.T && first == d.T; t++)
            if (a[s * d.T + t] != b[s * d.T + t]) first = t;
        const uint16_t *p = x + s * d.T * d.V, *q = y + s * d.T * d.V;
        size_t same = (size_t)(first * d.V);
        if (memcmp(p, q, same * sizeof *p)) {
            size_t k = 0;
            while (p[k] == q[k]) k++;
            int64_t pos = (int64_t)k / d.V;
            if (first == d.T)
                snprintf(msg, msglen, "sequence %lld was not changed, yet its logit (%lld, %lld, "
                         "%lld) went from %g to %g when other sequences changed (sequences must "
                         "not affect each other; the same inputs must give the same bits)",
                         (long long)s, (long long)s, (long long)pos, (long long)(k % d.V),
                         (double)bf16_to_float(p[k]), (double)bf16_to_float(q[k]));
            else
                snprintf(msg, msglen, "changing the token at (%lld, %lld) changed the logit "
                         "(%lld, %lld, %lld) of an earlier position from %g to %g: the model is "
                         "not causal (or not deterministic)", (long long)s, (long long)first,
                         (long long)s, (long long)pos, (long long)(k % d.V),
                         (double)bf16_to_float(p[k]), (double)bf16_to_float(q[k]));
            return 1;
        }
        if (first < d.T) {
            changed++;
            if (!memcmp(p + same, q + same, (size_t)d.V * sizeof *p)) {
                snprintf(msg, msglen, "changing the token at (%lld, %lld) from %d to %d left every "
                         "logit of that position as it was: the logits ignore the tokens",
                         (long long)s, (long long)first, a[s * d.T + first], b[s * d.T + first]);
                return 1;
            }
        }
    }
    snprintf(msg, msglen, "causal: one token changed in %lld of %lld sequences; every earlier "
             "position%s kept its logits bit for bit", (long long)changed, (long long)d.B,
             d.B > 1 ? " and the untouched sequence" : "");
    return 0;
}
