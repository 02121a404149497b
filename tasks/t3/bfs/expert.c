/* Host expert for t3/bfs: direction-optimising BFS (Beamer, Asanovic, Patterson, SC 2012), the
 * same plan as the GPU expert. Small frontiers expand top-down from a queue; once the frontier's
 * edges outnumber a fraction of the unvisited vertices' edges, levels go bottom-up instead: every
 * unvisited vertex scans its neighbours in id order and stops at the first one on the frontier,
 * which skips most edges of the big middle levels and reads the graph sequentially. One array
 * holds all frontiers back to back (each vertex enters once), allocated in st_init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/solution.h"

/* Beamer's switch points: go bottom-up when frontier edges > unvisited edges / ALPHA, back
 * top-down when the frontier has fewer than n / BETA vertices. */
#define ALPHA 14
#define BETA 24

typedef struct {
    int64_t n, nnz;
    int32_t *queue; /* n entries: every vertex enters at most once */
} bfs_ctx;

static int cfg_get(const st_config *cfg, const char *name, int64_t *v) {
    for (int i = 0; i < cfg->n; i++)
        if (strcmp(cfg->names[i], name) == 0) { *v = cfg->values[i]; return 0; }
    fprintf(stderr, "bfs host expert: size '%s' missing from the config\n", name);
    return 1;
}

static int check_vec(const st_tensor *t, const char *what, int64_t len) {
    int ok = t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data != NULL;
    if (!ok) fprintf(stderr, "bfs host expert: %s: expected i32 of shape [%lld]\n", what, (long long)len);
    return !ok;
}

void st_free(void *p) {
    bfs_ctx *ctx = p;
    if (!ctx) return;
    free(ctx->queue);
    free(ctx);
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **out_ctx) {
    (void)params; (void)stream;
    *out_ctx = NULL;
    int64_t n, deg;
    if (cfg_get(cfg, "n", &n) || cfg_get(cfg, "deg", &deg)) return 1;
    if (n_params != 0 || n < 1 || deg < 0 || n * deg > INT32_MAX) {
        fprintf(stderr, "bfs host expert: bad sizes or params (n=%lld deg=%lld, %d params)\n",
                (long long)n, (long long)deg, n_params);
        return 1;
    }
    bfs_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return 1;
    ctx->n = n;
    ctx->nnz = n * deg;
    ctx->queue = malloc(sizeof(int32_t) * (size_t)n);
    if (!ctx->queue) { st_free(ctx); return 1; }
    *out_ctx = ctx;
    return 0;
}

int st_run(void *p, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream) {
    (void)stream;
    const bfs_ctx *ctx = p;
    if (n_in != 3 || n_out != 1) {
        fprintf(stderr, "bfs host expert: expected 3 inputs and 1 output, got %d and %d\n", n_in, n_out);
        return 1;
    }
    if (check_vec(&in[0], "row_ptr", ctx->n + 1) || check_vec(&in[1], "col_idx", ctx->nnz) ||
        check_vec(&in[2], "source", 1) || check_vec(&out[0], "level", ctx->n))
        return 1;
    const int32_t *row_ptr = in[0].data, *col = in[1].data;
    const int32_t source = *(const int32_t *)in[2].data;
    int32_t *level = out[0].data, *queue = ctx->queue;
    if (source < 0 || source >= ctx->n) {
        fprintf(stderr, "bfs host expert: source %d out of range\n", source);
        return 1;
    }

    const int64_t n = ctx->n;
    for (int64_t v = 0; v < n; v++) level[v] = -1;
    level[source] = 0;
    queue[0] = source;
    /* the frontier of level L is queue[lo, hi); the next level is appended after it */
    int64_t lo = 0, hi = 1;
    int64_t frontier_edges = row_ptr[source + 1] - row_ptr[source];
    int64_t unvisited_edges = ctx->nnz - frontier_edges;
    int bottom_up = 0;
    for (int32_t L = 0; lo < hi; L++) {
        if (!bottom_up && frontier_edges > unvisited_edges / ALPHA) bottom_up = 1;
        else if (bottom_up && hi - lo < n / BETA) bottom_up = 0;
        int64_t tail = hi, next_edges = 0;
        if (bottom_up) {
            for (int64_t v = 0; v < n; v++) {
                if (level[v] != -1) continue;
                for (int32_t j = row_ptr[v]; j < row_ptr[v + 1]; j++)
                    if (level[col[j]] == L) {
                        level[v] = L + 1;
                        queue[tail++] = (int32_t)v;
                        next_edges += row_ptr[v + 1] - row_ptr[v];
                        break;
                    }
            }
        } else {
            for (int64_t i = lo; i < hi; i++) {
                const int32_t u = queue[i];
                for (int32_t j = row_ptr[u]; j < row_ptr[u + 1]; j++) {
                    const int32_t v = col[j];
                    if (level[v] == -1) {
                        level[v] = L + 1;
                        queue[tail++] = v;
                        next_edges += row_ptr[v + 1] - row_ptr[v];
                    }
                }
            }
        }
        lo = hi;
        hi = tail;
        frontier_edges = next_edges;
        unvisited_edges -= next_edges;
    }
    return 0;
}
