/* Host reference for t3/bfs: level-synchronous BFS over the CSR graph, the same algorithm as the
 * GPU reference. Each sweep visits every vertex, expands the ones on the current level and stops
 * after a sweep that discovers nothing: O(n * levels + edges), obviously correct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

typedef struct {
    int64_t n, nnz;
} bfs_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "bfs host reference: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "bfs host reference: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

void st_free(void *ctx) { free(ctx); }

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, deg;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "deg", &deg)) return 1;
    if (n_params != 0 || n < 1 || deg < 0 || n * deg > INT32_MAX) {
        fprintf(stderr, "bfs host reference: bad sizes or params (n=%lld deg=%lld, %d params)\n",
                (long long)n, (long long)deg, n_params);
        return 1;
    }
    bfs_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) return 1;
    ctx->n = n;
    ctx->nnz = n * deg;
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const bfs_ctx *ctx = p;
    if (n_in != 3 || n_out != 1) {
        fprintf(stderr, "bfs host reference: expected 3 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_vec(&in[0], "row_ptr", ctx->n + 1) || check_vec(&in[1], "col_idx", ctx->nnz) ||
        check_vec(&in[2], "source", 1) || check_vec(&out[0], "level", ctx->n))
        return 1;
    const int32_t *row_ptr = in[0].data, *col = in[1].data;
    const int32_t source = *(const int32_t *)in[2].data;
    int32_t *level = out[0].data;
    const int64_t n = ctx->n;
    if (source < 0 || source >= n) {
        fprintf(stderr, "bfs host reference: source %d out of range\n", source);
        return 1;
    }

    for (int64_t v = 0; v < n; v++) level[v] = -1;
    level[source] = 0;
    for (int32_t cur = 0, changed = 1; changed; cur++) {
        changed = 0;
        for (int64_t u = 0; u < n; u++) {
            if (level[u] != cur) continue;
            for (int32_t j = row_ptr[u]; j < row_ptr[u + 1]; j++)
                if (level[col[j]] == -1) {
                    level[col[j]] = cur + 1;
                    changed = 1;
                }
        }
    }
    return 0;
}
