/* Host expert for t1/histogram: counts[b] = number of x[i] == b for 0 <= x[i] < bins. The
 * reference increments one table, so runs of equal values stall on the store-to-load chain of
 * the same counter. When the table is small (bins <= 4096) this one keeps 4 private tables,
 * fed round-robin by 4 independent streams of elements, and sums them at the end; the range
 * check is a single unsigned compare, and out-of-range values are counted into a spare slot
 * instead of branched around. Large tables use one table (the copies would not fit
 * in cache). The tables are allocated once in st_init. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

#define COPIES 4
#define SMALL_BINS 4096

typedef struct hist_ctx {
    int64_t n, bins;
    uint32_t *tables; /* COPIES * (bins + 1) counters (the last a spare), or NULL for large tables */
} hist_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *value) {
    for (int32_t i = 0; i < cfg->n; i++) {
        if (strcmp(cfg->names[i], name) == 0) {
            *value = cfg->values[i];
            return 0;
        }
    }
    return -1;
}

static int tensor_ok(const st_tensor *t, int64_t len) {
    return t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
            cudaStream_t stream, void **ctx) {
    (void)params; (void)stream;
    int64_t n, bins;
    if (cfg == NULL || ctx == NULL || n_params != 0) return 1;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "bins", &bins) || n < 1 || bins < 1) return 1;
    if (bins > INT32_MAX) return 1;
    hist_ctx *c = malloc(sizeof(*c));
    if (c == NULL) return 1;
    c->n = n;
    c->bins = bins;
    c->tables = NULL;
    if (bins <= SMALL_BINS) {
        c->tables = malloc((size_t)(COPIES * (bins + 1)) * sizeof(uint32_t));
        if (c->tables == NULL) {
            free(c);
            return 1;
        }
    }
    *ctx = c;
    return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const hist_ctx *c = ctx;
    if (c == NULL || n_in != 1 || n_out != 1) return 1;
    if (!tensor_ok(&in[0], c->n) || !tensor_ok(&out[0], c->bins)) return 1;
    const uint32_t *restrict x = in[0].data; /* negative values wrap above any bin count */
    int32_t *restrict counts = out[0].data;
    const uint32_t bins = (uint32_t)c->bins;
    const int64_t n = c->n;
    if (c->tables == NULL) {
        memset(counts, 0, (size_t)bins * sizeof(int32_t));
        for (int64_t i = 0; i < n; i++)
            if (x[i] < bins) counts[x[i]]++;
        return 0;
    }
    uint32_t *restrict t0 = c->tables, *restrict t1 = t0 + bins + 1, *restrict t2 = t1 + bins + 1,
                       *restrict t3 = t2 + bins + 1;
    memset(t0, 0, (size_t)(COPIES * (bins + 1)) * sizeof(uint32_t));
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t a = x[i], b = x[i + 1], d = x[i + 2], e = x[i + 3];
        t0[a < bins ? a : bins]++; /* out-of-range values land in a spare slot */
        t1[b < bins ? b : bins]++;
        t2[d < bins ? d : bins]++;
        t3[e < bins ? e : bins]++;
    }
    for (; i < n; i++)
        if (x[i] < bins) t0[x[i]]++;
    for (uint32_t b = 0; b < bins; b++) counts[b] = (int32_t)(t0[b] + t1[b] + t2[b] + t3[b]);
    return 0;
}

void st_free(void *ctx) {
    hist_ctx *c = ctx;
    if (c != NULL) free(c->tables);
    free(c);
}
