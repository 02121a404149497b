/* Host reference for t1/radix_sort: stable argsort of int32 keys by a least-significant-digit
 * counting sort, one byte per pass, four passes. Each pass counts the digits, turns the counts
 * into starting offsets and moves the (key, index) pairs in input order, which keeps equal digits
 * in order and so makes the whole sort stable. Keys are sorted with their sign bit flipped, so
 * negative keys come first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t n;
    uint32_t *tmp_keys; /* [n]: the other half of the ping-pong, sign-flipped keys */
    int32_t *tmp_perm;  /* [n] */
} sort_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "radix_sort host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok)
        fprintf(stderr, "radix_sort host reference: %s: expected i32 of shape [%lld]\n", what,
                (long long)len);
    return !ok;
}

void st_free(void *p) {
    sort_ctx *c = p;
    if (!c) return;
    free(c->tmp_keys);
    free(c->tmp_perm);
    free(c);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n;
    if (cfg_get(cfg, "n", &n)) return 1;
    if (n_params != 0 || n < 1 || n > INT32_MAX) {
        fprintf(stderr, "radix_sort host reference: bad n %lld or %d params\n", (long long)n, n_params);
        return 1;
    }
    sort_ctx *c = calloc(1, sizeof(*c));
    if (!c) return 1;
    c->n = n;
    c->tmp_keys = malloc(sizeof(uint32_t) * (size_t)n);
    c->tmp_perm = malloc(sizeof(int32_t) * (size_t)n);
    if (!c->tmp_keys || !c->tmp_perm) {
        st_free(c);
        return 1;
    }
    *out_ctx = c;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const sort_ctx *c = p;
    if (!c || n_in != 1 || n_out != 2) return 1;
    if (check_vec(&in[0], "keys", c->n) || check_vec(&out[0], "sorted", c->n) ||
        check_vec(&out[1], "perm", c->n))
        return 1;
    const int64_t n = c->n;
    const int32_t *keys = in[0].data;
    /* The outputs double as one half of the ping-pong: until the last pass their bits hold
     * unsigned sign-flipped keys, which the end turns back into signed keys. */
    uint32_t *out_k = (uint32_t *)out[0].data;
    int32_t *out_p = out[1].data;
    uint32_t *buf_k[2] = {out_k, c->tmp_keys};
    int32_t *buf_p[2] = {out_p, c->tmp_perm};

    for (int64_t i = 0; i < n; i++) {
        out_k[i] = (uint32_t)keys[i] ^ 0x80000000u;
        out_p[i] = (int32_t)i;
    }
    /* four passes: out -> tmp -> out -> tmp -> out */
    for (int pass = 0; pass < 4; pass++) {
        const int shift = 8 * pass;
        const uint32_t *src_k = buf_k[pass % 2];
        const int32_t *src_p = buf_p[pass % 2];
        uint32_t *dst_k = buf_k[1 - pass % 2];
        int32_t *dst_p = buf_p[1 - pass % 2];
        int64_t start[256] = {0};
        for (int64_t i = 0; i < n; i++) start[(src_k[i] >> shift) & 255u]++;
        int64_t sum = 0;
        for (int d = 0; d < 256; d++) {
            const int64_t count = start[d];
            start[d] = sum;
            sum += count;
        }
        for (int64_t i = 0; i < n; i++) {
            const int64_t dst = start[(src_k[i] >> shift) & 255u]++;
            dst_k[dst] = src_k[i];
            dst_p[dst] = src_p[i];
        }
    }
    int32_t *sorted = out[0].data;
    for (int64_t i = 0; i < n; i++) sorted[i] = (int32_t)(out_k[i] ^ 0x80000000u);
    return 0;
}
