/* Host expert for t1/radix_sort: stable argsort of int32 keys by LSD counting sort on bytes of the
 * sign-flipped keys, as the reference does, but the 4 digit histograms are all counted in the
 * one pass that flips the keys (instead of one counting pass per digit), and a pass whose digit
 * is the same for every key is skipped (it would move nothing): small key ranges sort in one or
 * two moves instead of four. Offsets are 32-bit, pointers restrict. */
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
    const int32_t *restrict keys = in[0].data;
    uint32_t *out_k = (uint32_t *)out[0].data;
    int32_t *out_p = out[1].data;
    uint32_t *buf_k[2] = {out_k, c->tmp_keys};
    int32_t *buf_p[2] = {out_p, c->tmp_perm};

    static uint32_t hist[4][256]; /* not kept between calls: zeroed here */
    memset(hist, 0, sizeof hist);
    for (int64_t i = 0; i < n; i++) {
        const uint32_t k = (uint32_t)keys[i] ^ 0x80000000u;
        out_k[i] = k;
        out_p[i] = (int32_t)i;
        hist[0][k & 255u]++;
        hist[1][(k >> 8) & 255u]++;
        hist[2][(k >> 16) & 255u]++;
        hist[3][k >> 24]++;
    }
    int cur = 0; /* which buffer holds the keys */
    for (int pass = 0; pass < 4; pass++) {
        const int shift = 8 * pass;
        uint32_t *restrict h = hist[pass];
        /* skip a digit every key shares: the stable move would be the identity */
        if (h[(buf_k[cur][0] >> shift) & 255u] == (uint32_t)n) continue;
        uint32_t sum = 0;
        for (int d = 0; d < 256; d++) {
            const uint32_t count = h[d];
            h[d] = sum;
            sum += count;
        }
        const uint32_t *restrict src_k = buf_k[cur];
        const int32_t *restrict src_p = buf_p[cur];
        uint32_t *restrict dst_k = buf_k[1 - cur];
        int32_t *restrict dst_p = buf_p[1 - cur];
        for (int64_t i = 0; i < n; i++) {
            const uint32_t k = src_k[i];
            const uint32_t dst = h[(k >> shift) & 255u]++;
            dst_k[dst] = k;
            dst_p[dst] = src_p[i];
        }
        cur = 1 - cur;
    }
    int32_t *sorted = out[0].data;
    const uint32_t *restrict fin_k = buf_k[cur];
    if (cur == 1) memcpy(out_p, c->tmp_perm, sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) sorted[i] = (int32_t)(fin_k[i] ^ 0x80000000u);
    return 0;
}
