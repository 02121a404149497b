/* Task hooks for t3/cg: a generator of sparse symmetric positive definite systems and a validator
 * that judges the solution by its residual, computed in double, never by bytes.
 *
 * The matrix is a weighted graph Laplacian plus a random positive diagonal: the 7-point stencil
 * of an nx x ny x nz grid (vertex (x, y, z) is row (z*ny + y)*nx + x), each edge weighted
 * uniformly in [0.5, 1.5], plus n/8 long-range edges between random vertex pairs (each vertex in
 * at most one, never a grid neighbour), so rows hold 7 or 8 entries (fewer on the faces) and a
 * solution cannot assume a fixed stencil. Off-diagonal entries are -w; the diagonal is the sum of
 * the row's weights plus a shift uniform in [0.01, 0.1], so A is strictly diagonally dominant with
 * a positive diagonal: symmetric positive definite, condition number ~300. CSR with rows sorted by
 * column, nnz = 7n - 2(nx ny + ny nz + nx nz) + 2 floor(n/8) exactly. b comes from the harness
 * (normal). Weights and shifts are hashes of the seed and the vertex ids, so the generator needs
 * no edge list: one pass over the rows, plus a shuffle for the long-range pairs.
 *
 * Validator: ||b - A x||_2 / ||b||_2 <= 1e-5, in double, with every x finite. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define W_LO 0.5
#define W_HI 1.5
#define SHIFT_LO 0.01
#define SHIFT_HI 0.1
#define REL_RESIDUAL 1e-5

// ----------------------------------------------------------------------------
// random numbers: splitmix64, as a stream and as a hash

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state) { return mix64(*state += 0x9e3779b97f4a7c15ull); }

static double unit(uint64_t r) { return (double)(r >> 11) * (1.0 / 9007199254740992.0); }

/* weight of the undirected edge {u, v}: the same from both ends */
static float weight(uint64_t key, int64_t u, int64_t v) {
    const uint64_t lo = (uint64_t)(u < v ? u : v), hi = (uint64_t)(u < v ? v : u);
    return (float)(W_LO + (W_HI - W_LO) * unit(mix64(key ^ mix64(lo * 0x9e3779b97f4a7c15ull + hi))));
}

static float shift(uint64_t key, int64_t v) {
    return (float)(SHIFT_LO + (SHIFT_HI - SHIFT_LO) * unit(mix64(~key ^ (uint64_t)v * 0xd6e8feb86659fd93ull)));
}

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

static int is_vec(const st_tensor *t, st_dtype dt, int64_t len) {
    return t && t->dtype == dt && t->ndim == 1 && t->shape[0] == len && t->data;
}

typedef struct {
    int64_t nx, ny, nz, n, nnz;
} dims;

static int get_dims(const st_config *sizes, dims *d, char *msg, size_t msglen) {
    d->nx = size_get(sizes, "nx");
    d->ny = size_get(sizes, "ny");
    d->nz = size_get(sizes, "nz");
    if (d->nx < 1 || d->ny < 1 || d->nz < 1 || d->nx * d->ny * d->nz > INT32_MAX / 8) {
        snprintf(msg, msglen, "cg: need sizes nx, ny, nz >= 1 with 8*nx*ny*nz < 2^31");
        return 1;
    }
    d->n = d->nx * d->ny * d->nz;
    d->nnz = 7 * d->n - 2 * (d->nx * d->ny + d->ny * d->nz + d->nx * d->nz) + 2 * (d->n / 8);
    return 0;
}

/* are u and v neighbours on the grid (or equal)? */
static int grid_adjacent(const dims *d, int64_t u, int64_t v) {
    const int64_t ux = u % d->nx, uy = u / d->nx % d->ny, uz = u / (d->nx * d->ny);
    const int64_t vx = v % d->nx, vy = v / d->nx % d->ny, vz = v / (d->nx * d->ny);
    return llabs(ux - vx) + llabs(uy - vy) + llabs(uz - vz) <= 1;
}

// ----------------------------------------------------------------------------
// generator

/* partner[v] = the far end of v's long-range edge, or -1. Pairs come from a shuffle (so no vertex
 * is in two), skipping grid neighbours; reshuffle in the unlikely case that too few remain. */
static int pick_partners(const dims *d, uint64_t *rng, int32_t *partner, int32_t *perm) {
    const int64_t want = d->n / 8;
    for (int attempt = 0; attempt < 64; attempt++) {
        for (int64_t i = 0; i < d->n; i++) {
            perm[i] = (int32_t)i;
            partner[i] = -1;
        }
        for (int64_t i = d->n - 1; i > 0; i--) {
            const int64_t j = (int64_t)(next64(rng) % (uint64_t)(i + 1));
            const int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int64_t got = 0;
        for (int64_t k = 0; k + 1 < d->n && got < want; k += 2) {
            const int32_t u = perm[k], v = perm[k + 1];
            if (grid_adjacent(d, u, v)) continue;
            partner[u] = v;
            partner[v] = u;
            got++;
        }
        if (got == want) return 0;
    }
    return 1;
}

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    dims d;
    if (get_dims(sizes, &d, msg, msglen)) return 1;
    const st_tensor *trp = find(t, n_t, "row_ptr"), *tci = find(t, n_t, "col_idx"), *tv = find(t, n_t, "val");
    if (!is_vec(trp, ST_I32, d.n + 1) || !is_vec(tci, ST_I32, d.nnz) || !is_vec(tv, ST_F32, d.nnz)) {
        snprintf(msg, msglen, "cg: expected row_ptr i32[n+1], col_idx i32[nnz], val f32[nnz]");
        return 1;
    }
    int32_t *row_ptr = trp->data, *col = tci->data;
    float *val = tv->data;
    int32_t *partner = malloc(sizeof(int32_t) * (size_t)d.n), *perm = malloc(sizeof(int32_t) * (size_t)d.n);
    uint64_t rng = seed;
    const uint64_t key = next64(&rng);
    if (!partner || !perm || pick_partners(&d, &rng, partner, perm)) {
        snprintf(msg, msglen, "cg: %s for n=%lld", partner && perm ? "cannot place the long-range edges"
                                                                   : "out of memory", (long long)d.n);
        free(partner);
        free(perm);
        return 1;
    }
    free(perm);

    const int64_t sx = 1, sy = d.nx, sz = d.nx * d.ny;
    int64_t k = 0;
    for (int64_t v = 0; v < d.n; v++) {
        const int64_t x = v % d.nx, y = v / d.nx % d.ny, z = v / sz;
        int64_t nb[8]; /* the row's columns, ascending: stencil (diagonal included) and partner */
        int m = 0;
        if (z > 0) nb[m++] = v - sz;
        if (y > 0) nb[m++] = v - sy;
        if (x > 0) nb[m++] = v - sx;
        nb[m++] = v;
        if (x < d.nx - 1) nb[m++] = v + sx;
        if (y < d.ny - 1) nb[m++] = v + sy;
        if (z < d.nz - 1) nb[m++] = v + sz;
        if (partner[v] >= 0) {
            int i = m++;
            for (; i > 0 && nb[i - 1] > partner[v]; i--) nb[i] = nb[i - 1];
            nb[i] = partner[v];
        }
        row_ptr[v] = (int32_t)k;
        float diag = 0.0f; /* the sum of the row's weights, in column order */
        int64_t kdiag = -1;
        for (int i = 0; i < m; i++, k++) {
            col[k] = (int32_t)nb[i];
            if (nb[i] == v) {
                kdiag = k;
                continue;
            }
            const float w = weight(key, v, nb[i]);
            val[k] = -w;
            diag += w;
        }
        val[kdiag] = diag + shift(key, v);
    }
    row_ptr[d.n] = (int32_t)k;
    free(partner);
    if (k != d.nnz) {
        snprintf(msg, msglen, "cg: generator bug: %lld entries, expected %lld", (long long)k, (long long)d.nnz);
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// validator

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    /* `want` is not consulted: any x with a small enough residual solves the system */
    (void)want;
    dims d;
    if (get_dims(sizes, &d, msg, msglen)) return 1;
    const st_tensor *trp = find(in, n_in, "row_ptr"), *tci = find(in, n_in, "col_idx"),
                    *tv = find(in, n_in, "val"), *tb = find(in, n_in, "b");
    const st_tensor *tx = find(got, n_out, "x");
    if (!is_vec(trp, ST_I32, d.n + 1) || !is_vec(tci, ST_I32, d.nnz) || !is_vec(tv, ST_F32, d.nnz) ||
        !is_vec(tb, ST_F32, d.n) || !is_vec(tx, ST_F32, d.n)) {
        snprintf(msg, msglen, "cg: expected inputs row_ptr, col_idx, val, b and output x of the declared shapes");
        return 1;
    }
    const int32_t *row_ptr = trp->data, *col = tci->data;
    const float *val = tv->data, *b = tb->data, *x = tx->data;
    if (row_ptr[0] != 0 || row_ptr[d.n] != d.nnz) {
        snprintf(msg, msglen, "cg: malformed input matrix (row_ptr[0] %d, row_ptr[n] %d)", row_ptr[0], row_ptr[d.n]);
        return 1;
    }
    for (int64_t i = 0; i < d.n; i++)
        if (!isfinite(x[i])) {
            snprintf(msg, msglen, "x[%lld] = %g is not finite", (long long)i, x[i]);
            return 1;
        }
    double rr = 0, bb = 0, worst = -1;
    int64_t worst_i = 0;
    for (int64_t i = 0; i < d.n; i++) {
        double ax = 0;
        for (int32_t k = row_ptr[i]; k < row_ptr[i + 1]; k++) {
            if (col[k] < 0 || col[k] >= d.n) {
                snprintf(msg, msglen, "cg: malformed input matrix: col_idx[%d] = %d", k, col[k]);
                return 1;
            }
            ax += (double)val[k] * x[col[k]];
        }
        const double r = (double)b[i] - ax;
        rr += r * r;
        bb += (double)b[i] * b[i];
        if (fabs(r) > worst) {
            worst = fabs(r);
            worst_i = i;
        }
    }
    const double rel = bb > 0 ? sqrt(rr / bb) : sqrt(rr);
    if (!(rel <= REL_RESIDUAL)) {
        snprintf(msg, msglen,
                 "relative residual ||b - A x|| / ||b|| = %.3g is above %.0e (largest |b - A x| = %.3g at "
                 "row %lld)",
                 rel, REL_RESIDUAL, worst, (long long)worst_i);
        return 1;
    }
    return 0;
}
