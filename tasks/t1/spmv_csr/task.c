/* Task hooks for t1/spmv_csr: the generator of the sparse matrix's structure (row_ptr, col_idx)
 * and the validator of y = A·x.
 *
 * Generator: row lengths with a realistic spread: about 1% empty rows, about 0.1% long rows of
 * 16·deg to 256·deg entries (log-uniform, at most cols), the rest uniform in [deg/2, 3·deg/2]
 * around the mean that makes the total exactly rows·deg. Each row's columns are sorted and
 * distinct: half of them in a band around the diagonal (a window of max(4·k/2, 64) columns, as in
 * meshes and banded operators), half spread over all columns (as in graphs), each half drawn one
 * per stratum so that no sort is needed, then merged. The values and x come from task.json.
 *
 * Validator: recomputes every y_i in double, with S_i = sum_j |a_ij·x_j|, and accepts
 * |y_i - exact_i| <= RTOL·S_i. Any order of summation in fp32 stays far inside this (the error of
 * a float sum is a small multiple of 2^-24·S_i), while a wrong or missing term, or values or x
 * rounded to half precision, do not. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define RTOL 1e-5

// ----------------------------------------------------------------------------
// random numbers: splitmix64, as a hash of a counter

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 bits */
static double unit(uint64_t r) { return (double)(r >> 11) * (1.0 / 9007199254740992.0); }

/* the i-th number of the stream `key` */
static double draw(uint64_t key, uint64_t i) { return unit(mix64(key + i * 0x9e3779b97f4a7c15ull)); }

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

static int is_vector(const st_tensor *t, st_dtype dtype, int64_t len) {
    return t && t->dtype == dtype && t->ndim == 1 && t->shape[0] == len && t->data;
}

static int matrix_sizes(const st_config *sizes, int64_t *rows, int64_t *cols, int64_t *deg,
                        char *msg, size_t msglen) {
    *rows = size_get(sizes, "rows");
    *cols = size_get(sizes, "cols");
    *deg = size_get(sizes, "deg");
    if (*rows < 1 || *cols < 1 || *deg < 1 || *deg > *cols || *rows * *deg > INT32_MAX) {
        snprintf(msg, msglen, "spmv_csr: need rows, cols, deg >= 1, deg <= cols and rows*deg < 2^31, "
                 "got rows=%lld cols=%lld deg=%lld", (long long)*rows, (long long)*cols, (long long)*deg);
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// generator

enum { ROW_NORMAL, ROW_EMPTY, ROW_LONG };

/* Row lengths that add up to exactly nnz, each at most cols. */
static void row_lengths(int64_t rows, int64_t cols, int64_t deg, uint64_t key, int32_t *len,
                        uint8_t *role) {
    const int64_t nnz = rows * deg;
    int64_t sum_long = 0, n_normal = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double u = draw(key, (uint64_t)r);
        role[r] = u < 0.001 ? ROW_LONG : u < 0.011 ? ROW_EMPTY : ROW_NORMAL;
        len[r] = 0;
        if (role[r] == ROW_LONG) {
            double l = (double)deg * exp2(4.0 + 4.0 * draw(key ^ 0x1111, (uint64_t)r));
            len[r] = (int32_t)(l < (double)cols ? l : (double)cols);
            sum_long += len[r];
        } else if (role[r] == ROW_NORMAL) {
            n_normal++;
        }
    }
    /* normal rows: uniform in [mu/2, 3mu/2), rounded at random so the mean stays mu */
    const double mu = n_normal ? (double)(nnz - sum_long) / (double)n_normal : 0.0;
    int64_t total = sum_long;
    for (int64_t r = 0; r < rows; r++) {
        if (role[r] != ROW_NORMAL || mu <= 0) continue;
        double l = floor(mu * (0.5 + draw(key ^ 0x2222, (uint64_t)r)) + draw(key ^ 0x3333, (uint64_t)r));
        len[r] = (int32_t)(l < (double)cols ? l : (double)cols);
        total += len[r];
    }
    /* Settle the difference one entry per row at a time, sweeping from a random row. Empty rows
     * stay empty and other rows keep at least one entry while that is possible; once a sweep can
     * move nothing under those rules, they are lifted. It ends because 0 <= nnz <= rows*cols. */
    int64_t diff = nnz - total, r = (int64_t)(draw(key ^ 0x4444, 0) * (double)rows);
    int strict = 1;
    while (diff != 0) {
        int64_t moved = 0;
        for (int64_t step = 0; step < rows && diff != 0; step++, r = (r + 1) % rows) {
            if (strict && role[r] == ROW_EMPTY) continue;
            if (diff > 0 && len[r] < cols) {
                len[r]++;
                diff--;
                moved++;
            } else if (diff < 0 && len[r] > strict) {
                len[r]--;
                diff++;
                moved++;
            }
        }
        if (!moved) strict = 0;
    }
}

/* k sorted distinct columns of row r: one per stratum of a band window, one per stratum of the
 * whole range, merged; equal neighbours are then pushed apart (k <= cols leaves room). */
static void row_columns(int64_t r, int64_t rows, int64_t cols, int32_t k, uint64_t key,
                        int32_t *out, int32_t *band, int32_t *spread) {
    const int32_t kb = k / 2, ks = k - kb;
    const uint64_t rk = mix64(key ^ ((uint64_t)r * 0xd1b54a32d192ed03ull));
    int64_t w = 4 * (int64_t)kb > 64 ? 4 * (int64_t)kb : 64;
    if (w > cols) w = cols;
    int64_t s0 = (int64_t)((double)r * (double)cols / (double)rows) - w / 2;
    if (s0 < 0) s0 = 0;
    if (s0 > cols - w) s0 = cols - w;
    for (int32_t j = 0; j < kb; j++) {
        const int64_t lo = s0 + w * j / kb, hi = s0 + w * (j + 1) / kb;
        band[j] = (int32_t)(lo + (int64_t)(draw(rk, (uint64_t)j) * (double)(hi - lo)));
    }
    for (int32_t j = 0; j < ks; j++) {
        const int64_t lo = cols * j / ks, hi = cols * (j + 1) / ks;
        spread[j] = (int32_t)(lo + (int64_t)(draw(rk, (uint64_t)(kb + j)) * (double)(hi - lo)));
    }
    for (int32_t a = 0, b = 0, j = 0; j < k; j++)
        out[j] = (b >= ks || (a < kb && band[a] <= spread[b])) ? band[a++] : spread[b++];
    for (int32_t j = 1; j < k; j++)
        if (out[j] <= out[j - 1]) out[j] = out[j - 1] + 1;
    if (out[k - 1] > cols - 1) {
        out[k - 1] = (int32_t)(cols - 1);
        for (int32_t j = k - 2; j >= 0; j--)
            if (out[j] >= out[j + 1]) out[j] = out[j + 1] - 1;
    }
}

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    int64_t rows, cols, deg;
    if (matrix_sizes(sizes, &rows, &cols, &deg, msg, msglen)) return 1;
    const int64_t nnz = rows * deg;
    const st_tensor *trp = find(t, n_t, "row_ptr"), *tci = find(t, n_t, "col_idx");
    if (!is_vector(trp, ST_I32, rows + 1) || !is_vector(tci, ST_I32, nnz)) {
        snprintf(msg, msglen, "spmv_csr: expected i32 tensors row_ptr[rows+1], col_idx[rows*deg]");
        return 1;
    }
    int32_t *row_ptr = trp->data, *col = tci->data;
    int32_t *len = malloc(sizeof(int32_t) * (size_t)rows);
    uint8_t *role = malloc((size_t)rows);
    int32_t *band = NULL, *spread = NULL;
    if (!len || !role) goto oom;

    const uint64_t key = mix64(seed ^ 0x5eed5eed5eed5eedull);
    row_lengths(rows, cols, deg, key, len, role);
    int32_t longest = 0;
    row_ptr[0] = 0;
    for (int64_t r = 0; r < rows; r++) {
        row_ptr[r + 1] = row_ptr[r] + len[r];
        if (len[r] > longest) longest = len[r];
    }
    band = malloc(sizeof(int32_t) * (size_t)(longest + 1));
    spread = malloc(sizeof(int32_t) * (size_t)(longest + 1));
    if (!band || !spread) goto oom;
    const uint64_t ckey = mix64(key ^ 0xc01c01c01ull);
    for (int64_t r = 0; r < rows; r++)
        if (len[r] > 0) row_columns(r, rows, cols, len[r], ckey, col + row_ptr[r], band, spread);
    free(len);
    free(role);
    free(band);
    free(spread);
    return 0;
oom:
    free(len);
    free(role);
    free(band);
    free(spread);
    snprintf(msg, msglen, "spmv_csr: out of memory generating rows=%lld deg=%lld", (long long)rows,
             (long long)deg);
    return 1;
}

// ----------------------------------------------------------------------------
// validator

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    /* `want` is not consulted: y is checked against the exact product, computed here. */
    (void)want;
    int64_t rows, cols, deg;
    if (matrix_sizes(sizes, &rows, &cols, &deg, msg, msglen)) return 1;
    const int64_t nnz = rows * deg;
    const st_tensor *trp = find(in, n_in, "row_ptr"), *tci = find(in, n_in, "col_idx"),
                    *tv = find(in, n_in, "vals"), *tx = find(in, n_in, "x");
    if (!is_vector(trp, ST_I32, rows + 1) || !is_vector(tci, ST_I32, nnz) ||
        !is_vector(tv, ST_F32, nnz) || !is_vector(tx, ST_F32, cols)) {
        snprintf(msg, msglen, "spmv_csr: inputs are not row_ptr[rows+1], col_idx[nnz], vals[nnz], x[cols]");
        return 1;
    }
    if (n_out != 1 || !is_vector(&got[0], ST_F32, rows)) {
        snprintf(msg, msglen, "spmv_csr: expected one f32 output y[%lld]", (long long)rows);
        return 1;
    }
    const int32_t *row_ptr = trp->data, *col = tci->data;
    const float *val = tv->data, *x = tx->data, *y = got[0].data;
    if (row_ptr[0] != 0 || row_ptr[rows] != nnz) {
        snprintf(msg, msglen, "spmv_csr: malformed input matrix (row_ptr[0] %d, row_ptr[rows] %d)",
                 row_ptr[0], row_ptr[rows]);
        return 1;
    }
    int64_t bad = 0, first = -1;
    double first_exact = 0, first_scale = 0, worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        const int32_t j0 = row_ptr[r], j1 = row_ptr[r + 1];
        if (j1 < j0 || j1 > nnz) {
            snprintf(msg, msglen, "spmv_csr: malformed input matrix: row_ptr decreases at %lld", (long long)r);
            return 1;
        }
        double exact = 0, scale = 0;
        for (int32_t j = j0; j < j1; j++) {
            if (col[j] < 0 || col[j] >= cols) {
                snprintf(msg, msglen, "spmv_csr: malformed input matrix: col_idx[%d] = %d", j, col[j]);
                return 1;
            }
            const double p = (double)val[j] * (double)x[col[j]]; /* exact: 24 + 24 bits */
            exact += p;
            scale += fabs(p);
        }
        const double err = fabs((double)y[r] - exact);
        /* !(err <= limit) is also true for NaN */
        if (!(err <= RTOL * scale)) {
            if (first < 0) {
                first = r;
                first_exact = exact;
                first_scale = scale;
            }
            bad++;
        } else if (scale > 0 && err / scale > worst) {
            worst = err / scale;
        }
    }
    if (bad) {
        snprintf(msg, msglen, "%lld of %lld rows off: y[%lld] = %.9g but the exact value is %.9g "
                 "(row of %d entries, sum |a_ij x_j| = %.6g, allowed error %.3g)",
                 (long long)bad, (long long)rows, (long long)first, (double)y[first], first_exact,
                 row_ptr[first + 1] - row_ptr[first], first_scale, RTOL * first_scale);
        return 1;
    }
    snprintf(msg, msglen, "all %lld rows within %.0e of sum |a_ij x_j| (largest error %.3g of it)",
             (long long)rows, RTOL, worst);
    return 0;
}
