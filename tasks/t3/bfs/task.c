/* Hooks of t3/bfs: the graph generator and the semantic validator. The generator builds a random
 * undirected graph in CSR form with a skewed degree distribution (one endpoint of every edge drawn
 * from a power law, the other uniformly), a few isolated vertices and a few small components the
 * source cannot reach, so that searches see a realistic frontier profile and -1 levels occur. The
 * validator accepts any level array that is the BFS distance from the source, judged edge by edge
 * against the graph, never by comparing bytes with the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

/* Vertices in little side components form paths of this many vertices (CHAIN - 1 edges). */
#define CHAIN 8
/* Steps of the random walk that picks the source. */
#define WALK 16
/* The CSR build scatters every entry twice. Done directly, each scatter is 33 M cache misses at
 * eval size; instead each goes in two cache-friendly steps: entries are first grouped by block
 * of BLOCK_ROWS rows (a few hundred sequential write streams), then placed in their rows block by
 * block, within a window that stays in cache. About 1.4x faster at eval size. */
#define BLOCK_SHIFT 13
#define BLOCK_ROWS (1 << BLOCK_SHIFT)
#define BLOCK_MASK (BLOCK_ROWS - 1)

// ----------------------------------------------------------------------------
// random numbers: splitmix64, as a stream and as a hash of a counter

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state) { return mix64(*state += 0x9e3779b97f4a7c15ull); }

/* uniform in [0, 1) with 53 bits */
static double unit(uint64_t r) { return (double)(r >> 11) * (1.0 / 9007199254740992.0); }

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

static int is_i32_vector(const st_tensor *t, int64_t len) {
    return t && t->dtype == ST_I32 && t->ndim == 1 && t->shape[0] == len && t->data;
}

/* n and deg from the size set, checked; on failure msg says why */
static int graph_sizes(const st_config *sizes, int64_t *n, int64_t *deg, char *msg, size_t msglen) {
    *n = size_get(sizes, "n");
    *deg = size_get(sizes, "deg");
    if (*n < 3 || *deg < 2 || *n * *deg > INT32_MAX) {
        snprintf(msg, msglen, "bfs: need sizes n >= 3 and deg >= 2 with n*deg < 2^31, got n=%lld deg=%lld",
                 (long long)*n, (long long)*deg);
        return 1;
    }
    /* each edge stores two entries and nnz = n*deg exactly, so deg must be even */
    if (*deg % 2) {
        snprintf(msg, msglen, "bfs: deg must be even (n*deg/2 undirected edges), got %lld", (long long)*deg);
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// generator

/* Vertex roles, decided by a random permutation so that neither hubs nor outsiders cluster by
 * id: perm[0, n_iso) get no edges, perm[n_iso, main) form paths of CHAIN vertices, the rest
 * (the main pool) share all other edges. */
typedef struct {
    int32_t *perm;
    int64_t n_iso, n_chains, main, n_main;
} roles;

static int roles_init(roles *r, int64_t n, uint64_t *rng) {
    r->perm = malloc(sizeof(int32_t) * (size_t)n);
    if (!r->perm) return 1;
    for (int64_t i = 0; i < n; i++) r->perm[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(next64(rng) % (uint64_t)(i + 1));
        int32_t t = r->perm[i]; r->perm[i] = r->perm[j]; r->perm[j] = t;
    }
    /* about 0.2% isolated and 0.4% in side paths; tiny graphs get none of either */
    r->n_iso = n >= 64 ? (n / 512 > 0 ? n / 512 : 1) : 0;
    r->n_chains = n >= 64 ? (n / 2048 > 0 ? n / 2048 : 1) : 0;
    r->main = r->n_iso + r->n_chains * CHAIN;
    r->n_main = n - r->main;
    return 0;
}

/* Edge e of the main pool, a pure function of (key, e). The first endpoint follows a power law:
 * main-pool index floor(n_main * u^2) has probability density ~ 1/sqrt(index), so the vertex of
 * rank k gets degree ~ k^-1/2 (a tail P(degree > d) ~ d^-2) and the top hub about
 * m / sqrt(n_main) edges. The second endpoint is uniform, redrawn until it differs from the first:
 * no self loops. Duplicate edges are left in, as in real edge lists. */
static void main_edge(const roles *r, uint64_t key, int64_t e, int32_t *u, int32_t *v) {
    uint64_t h = mix64(key ^ (uint64_t)e * 0x9e3779b97f4a7c15ull);
    double x = unit(h);
    int64_t iu = (int64_t)((double)r->n_main * x * x);
    *u = r->perm[r->main + iu];
    for (uint64_t k = 1;; k++) {
        h = mix64(h + k);
        *v = r->perm[r->main + (int64_t)(unit(h) * (double)r->n_main)];
        if (*v != *u) return;
    }
}

/* Entries grouped by block of rows, each at its block's final CSR range with its row offset in
 * lo, go to their rows in the order they come; all writes of a block land in a window that stays
 * in cache. */
static void place_rows(const int32_t *row_ptr, int64_t n, const int32_t *in, const uint16_t *lo,
                       int32_t *out, int32_t *cursor) {
    memcpy(cursor, row_ptr, sizeof(int32_t) * (size_t)n);
    for (int64_t b0 = 0; b0 < n; b0 += BLOCK_ROWS) {
        const int64_t b1 = b0 + BLOCK_ROWS < n ? b0 + BLOCK_ROWS : n;
        for (int32_t j = row_ptr[b0]; j < row_ptr[b1]; j++) out[cursor[b0 + lo[j]]++] = in[j];
    }
}

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    int64_t n, deg;
    if (graph_sizes(sizes, &n, &deg, msg, msglen)) return 1;
    const int64_t nnz = n * deg, m = nnz / 2;
    const st_tensor *trp = find(t, n_t, "row_ptr"), *tci = find(t, n_t, "col_idx"),
                    *tsrc = find(t, n_t, "source");
    if (!is_i32_vector(trp, n + 1) || !is_i32_vector(tci, nnz) || !is_i32_vector(tsrc, 1)) {
        snprintf(msg, msglen, "bfs: expected i32 tensors row_ptr[n+1], col_idx[n*deg], source[1]");
        return 1;
    }
    int32_t *row_ptr = trp->data, *col = tci->data;

    uint64_t rng = seed;
    roles r;
    const int64_t n_blocks = (n + BLOCK_MASK) >> BLOCK_SHIFT;
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)nnz);
    uint16_t *lo = malloc(sizeof(uint16_t) * (size_t)nnz); /* row offset within its block */
    int32_t *cursor = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int32_t *bcur = malloc(sizeof(int32_t) * (size_t)n_blocks); /* next free slot of each block */
    if (!tmp || !lo || !cursor || !bcur || roles_init(&r, n, &rng)) {
        free(tmp);
        free(lo);
        free(cursor);
        free(bcur);
        snprintf(msg, msglen, "bfs: out of memory generating n=%lld deg=%lld", (long long)n, (long long)deg);
        return 1;
    }
    const int64_t m_side = r.n_chains * (CHAIN - 1), m_main = m - m_side;
    const uint64_t key = next64(&rng);

    /* 1. the edge list, parked as (u, v) pairs in col_idx (exactly 2m entries), and degrees */
    memset(cursor, 0, sizeof(int32_t) * (size_t)(n + 1));
    for (int64_t e = 0; e < m_main; e++) {
        int32_t u, v;
        main_edge(&r, key, e, &u, &v);
        col[2 * e] = u;
        col[2 * e + 1] = v;
    }
    for (int64_t c = 0, e = m_main; c < r.n_chains; c++)
        for (int64_t i = 0; i < CHAIN - 1; i++, e++) {
            col[2 * e] = r.perm[r.n_iso + c * CHAIN + i];
            col[2 * e + 1] = r.perm[r.n_iso + c * CHAIN + i + 1];
        }
    for (int64_t i = 0; i < nnz; i++) cursor[col[i] + 1]++;
    row_ptr[0] = 0;
    for (int64_t v = 0; v < n; v++) row_ptr[v + 1] = row_ptr[v] + cursor[v + 1];
    for (int64_t b = 0; b < n_blocks; b++) bcur[b] = row_ptr[b << BLOCK_SHIFT];

    /* 2. both directions into an unsorted CSR (the pairs are all read before col is rewritten) */
    for (int64_t i = 0; i < nnz; i += 2) {
        int32_t u = col[i], v = col[i + 1];
        int32_t k = bcur[u >> BLOCK_SHIFT]++;
        tmp[k] = v;
        lo[k] = (uint16_t)(u & BLOCK_MASK);
        k = bcur[v >> BLOCK_SHIFT]++;
        tmp[k] = u;
        lo[k] = (uint16_t)(v & BLOCK_MASK);
    }
    place_rows(row_ptr, n, tmp, lo, col, cursor);
    /* 3. sorted rows without sorting: the graph is symmetric, so its transpose is itself, and
     * transposing row by row in increasing order appends each row's entries in increasing order
     * (grouping by block and placing keep that order) */
    for (int64_t b = 0; b < n_blocks; b++) bcur[b] = row_ptr[b << BLOCK_SHIFT];
    for (int64_t v = 0; v < n; v++)
        for (int32_t j = row_ptr[v]; j < row_ptr[v + 1]; j++) {
            int32_t c = col[j], k = bcur[c >> BLOCK_SHIFT]++;
            tmp[k] = (int32_t)v;
            lo[k] = (uint16_t)(c & BLOCK_MASK);
        }
    place_rows(row_ptr, n, tmp, lo, col, cursor);

    /* The source ends a random walk from the top hub (main-pool index 0): it has degree > 0 and
     * lies in the giant component even at deg = 2, where a quarter of the graph is in small
     * pieces, and it is a degree-weighted random vertex rather than the hub itself. A graph too
     * small to give the hub an edge starts the walk from a random entry instead. */
    int32_t source = r.perm[r.main];
    if (row_ptr[source] == row_ptr[source + 1]) source = col[next64(&rng) % (uint64_t)nnz];
    for (int i = 0; i < WALK; i++) {
        int32_t d = row_ptr[source + 1] - row_ptr[source];
        source = col[row_ptr[source] + (int32_t)(next64(&rng) % (uint64_t)d)];
    }
    *(int32_t *)tsrc->data = source;
    free(r.perm);
    free(tmp);
    free(lo);
    free(cursor);
    free(bcur);
    return 0;
}

// ----------------------------------------------------------------------------
// validator

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    /* `want` is not consulted: any correct level array is the unique BFS distance, and the checks
     * below establish exactly that from the graph alone. */
    (void)want;
    int64_t n, deg;
    if (graph_sizes(sizes, &n, &deg, msg, msglen)) return 1;
    const int64_t nnz = n * deg;
    const st_tensor *trp = find(in, n_in, "row_ptr"), *tci = find(in, n_in, "col_idx"),
                    *tsrc = find(in, n_in, "source");
    if (!is_i32_vector(trp, n + 1) || !is_i32_vector(tci, nnz) || !is_i32_vector(tsrc, 1)) {
        snprintf(msg, msglen, "bfs: inputs are not i32 row_ptr[n+1], col_idx[n*deg], source[1]");
        return 1;
    }
    if (n_out != 1 || !is_i32_vector(&got[0], n)) {
        snprintf(msg, msglen, "bfs: expected one i32 output level[%lld]", (long long)n);
        return 1;
    }
    const int32_t *row_ptr = trp->data, *col = tci->data, *level = got[0].data;
    const int32_t source = *(const int32_t *)tsrc->data;

    /* the inputs are ours, but a broken graph must not send the checks out of bounds */
    if (source < 0 || source >= n || row_ptr[0] != 0 || row_ptr[n] != nnz) {
        snprintf(msg, msglen, "bfs: malformed input graph (source %d, row_ptr[0] %d, row_ptr[n] %d)",
                 source, row_ptr[0], row_ptr[n]);
        return 1;
    }
    for (int64_t v = 0; v < n; v++)
        if (row_ptr[v + 1] < row_ptr[v]) {
            snprintf(msg, msglen, "bfs: malformed input graph: row_ptr decreases at %lld", (long long)v);
            return 1;
        }
    for (int64_t j = 0; j < nnz; j++)
        if (col[j] < 0 || col[j] >= n) {
            snprintf(msg, msglen, "bfs: malformed input graph: col_idx[%lld] = %d", (long long)j, col[j]);
            return 1;
        }

    if (level[source] != 0) {
        snprintf(msg, msglen, "level[%d] = %d but %d is the source (want 0)", source, level[source], source);
        return 1;
    }
    /* By induction these local rules force level = distance: a vertex at L > 0 has a neighbour at
     * L-1 (so a path of length L to the only level-0 vertex, the source, exists), no edge spans
     * more than one level (so no shorter path exists), and -1 never borders a reached vertex (so
     * everything reachable is reached). */
    for (int64_t u = 0; u < n; u++) {
        const int32_t L = level[u];
        if (L < -1 || L >= n) {
            snprintf(msg, msglen, "level[%lld] = %d is neither -1 nor in [0, n)", (long long)u, L);
            return 1;
        }
        if (L == 0 && u != source) {
            snprintf(msg, msglen, "level[%lld] = 0 but only the source %d is at level 0", (long long)u, source);
            return 1;
        }
        int has_parent = L <= 0;
        for (int32_t j = row_ptr[u]; j < row_ptr[u + 1]; j++) {
            const int32_t v = col[j], Lv = level[v];
            if (L == -1 && Lv != -1) {
                snprintf(msg, msglen, "level[%lld] = -1 but its neighbour %d has level %d (so it is reachable)",
                         (long long)u, v, Lv);
                return 1;
            }
            if (L >= 0 && (Lv == -1 || Lv > L + 1)) {
                snprintf(msg, msglen, "edge %lld-%d: level[%lld] = %d but level[%d] = %d (want at most %d)",
                         (long long)u, v, (long long)u, L, v, Lv, L + 1);
                return 1;
            }
            if (Lv == L - 1) has_parent = 1;
        }
        if (!has_parent) {
            snprintf(msg, msglen, "level[%lld] = %d but no neighbour of %lld has level %d",
                     (long long)u, L, (long long)u, L - 1);
            return 1;
        }
    }
    return 0;
}
