/* Task hooks for t3/kmeans: a clustered-data generator and a validator that judges Lloyd's
 * iterations by their meaning, since legitimate float differences (distance formula, summation
 * order) can flip near-tied points and so change later iterations.
 *
 * Generator: M = k + k/2 + 1 blobs with centres uniform in [-4, 4]^d and spreads uniform in
 * [0.5, 1.5] (more blobs than centroids, so Lloyd keeps moving for tens of iterations); each point
 * picks a blob uniformly and adds an approximately normal offset per coordinate (a scaled sum of
 * four 16-bit uniforms: one hash per value, fast at 33 M values). The initial centroids are k
 * distinct points picked at random (Forgy).
 *
 * Validator, with prev = prev_centroids (the centroids the last assignment used) and C = centroids:
 *  1. every label in [0, k); every output finite;
 *  2. assignment: for a sample of points (all when n <= 16384, else 16384 hashed ones plus the
 *     first and last 512), ||p - prev[label]||^2 <= min_c ||p - prev[c]||^2 + slack, slack =
 *     2e-5 (|p|^2 + |prev[label]|^2 + |prev[best]|^2): fp32 with either distance formula stays far
 *     inside, tf32 or half precision distances do not;
 *  3. update: C[c] equals the mean of the points labelled c, within 1e-6 (sqrt(count) + 16) max|p|
 *     per coordinate (float accumulation of thousands of points is fine), or prev[c] exactly when
 *     no point has label c;
 *  4. inertia sum ||p - C[label]||^2 (double) at most 1 + 2e-4 times the reference's: skipping an
 *     iteration costs 4e-4 to 3e-3 at the eval size, float differences ~1e-9. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define BOX 4.0
#define SPREAD_LO 0.5
#define SPREAD_HI 1.5
#define SAMPLES 16384
#define EDGE_SAMPLES 512
#define SLACK 2e-5
#define MEAN_TOL 1e-6
#define INERTIA_TOL 2e-4

// ----------------------------------------------------------------------------
// random numbers: splitmix64

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state) { return mix64(*state += 0x9e3779b97f4a7c15ull); }

static double unit(uint64_t r) { return (double)(r >> 11) * (1.0 / 9007199254740992.0); }

/* sum of four 16-bit uniforms, centred and scaled to unit variance (Irwin-Hall, close to normal) */
static float approx_normal(uint64_t r) {
    const double s = (double)(r & 0xffff) + (double)(r >> 16 & 0xffff) + (double)(r >> 32 & 0xffff) +
                     (double)(r >> 48);
    return (float)((s * (1.0 / 65536.0) - 2.0) * 1.7320508075688772);
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

static int is_mat(const st_tensor *t, st_dtype dt, int64_t rows, int64_t cols) {
    if (!t || t->dtype != dt || !t->data) return 0;
    if (cols == 0) return t->ndim == 1 && t->shape[0] == rows;
    return t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

typedef struct {
    int64_t n, d, k, iters;
} dims;

static int get_dims(const st_config *sizes, dims *s, char *msg, size_t msglen) {
    s->n = size_get(sizes, "n");
    s->d = size_get(sizes, "d");
    s->k = size_get(sizes, "k");
    s->iters = size_get(sizes, "I");
    if (s->n < 1 || s->d < 1 || s->k < 1 || s->k > s->n || s->iters < 1) {
        snprintf(msg, msglen, "kmeans: need n, d, k, I >= 1 and k <= n");
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// generator

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    dims s;
    if (get_dims(sizes, &s, msg, msglen)) return 1;
    const st_tensor *tp = find(t, n_t, "points"), *tc = find(t, n_t, "init");
    if (!is_mat(tp, ST_F32, s.n, s.d) || !is_mat(tc, ST_F32, s.k, s.d)) {
        snprintf(msg, msglen, "kmeans: expected f32 points[n, d] and init[k, d]");
        return 1;
    }
    float *pts = tp->data, *init = tc->data;
    const int64_t blobs = s.k + s.k / 2 + 1;
    float *centre = malloc(sizeof(float) * (size_t)(blobs * s.d)), *spread = malloc(sizeof(float) * (size_t)blobs);
    uint8_t *taken = calloc((size_t)s.n, 1);
    if (!centre || !spread || !taken) {
        free(centre); free(spread); free(taken);
        snprintf(msg, msglen, "kmeans: out of memory");
        return 1;
    }
    uint64_t rng = seed;
    for (int64_t b = 0; b < blobs; b++) {
        spread[b] = (float)(SPREAD_LO + (SPREAD_HI - SPREAD_LO) * unit(next64(&rng)));
        for (int64_t j = 0; j < s.d; j++) centre[b * s.d + j] = (float)(BOX * (2.0 * unit(next64(&rng)) - 1.0));
    }
    const uint64_t key = next64(&rng);
    for (int64_t i = 0; i < s.n; i++) {
        const uint64_t h = mix64(key ^ (uint64_t)i * 0x9e3779b97f4a7c15ull);
        const int64_t b = (int64_t)(h % (uint64_t)blobs);
        const float *cb = centre + b * s.d;
        float *p = pts + i * s.d;
        for (int64_t j = 0; j < s.d; j++)
            p[j] = cb[j] + spread[b] * approx_normal(mix64(h + (uint64_t)j + 1));
    }
    /* Forgy: k distinct points */
    for (int64_t c = 0; c < s.k; c++) {
        int64_t i;
        do i = (int64_t)(next64(&rng) % (uint64_t)s.n);
        while (taken[i]);
        taken[i] = 1;
        memcpy(init + c * s.d, pts + i * s.d, sizeof(float) * (size_t)s.d);
    }
    free(centre); free(spread); free(taken);
    return 0;
}

// ----------------------------------------------------------------------------
// validator

static double sqnorm(const float *a, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) s += (double)a[j] * a[j];
    return s;
}

static double sqdist(const float *a, const float *b, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; j++) {
        const double t = (double)a[j] - b[j];
        s += t * t;
    }
    return s;
}

/* point i's assignment against prev: 0 if label[i] is nearest up to the slack */
static int check_nearest(const dims *s, const float *pts, const float *prev, const int32_t *label,
                         int64_t i, char *msg, size_t msglen) {
    const float *p = pts + i * s->d;
    int64_t best = 0;
    double best_d = INFINITY;
    for (int64_t c = 0; c < s->k; c++) {
        const double dc = sqdist(p, prev + c * s->d, s->d);
        if (dc < best_d) {
            best_d = dc;
            best = c;
        }
    }
    const int64_t l = label[i];
    const double dl = sqdist(p, prev + l * s->d, s->d);
    const double slack = SLACK * (sqnorm(p, s->d) + sqnorm(prev + l * s->d, s->d) + sqnorm(prev + best * s->d, s->d));
    if (dl <= best_d + slack) return 0;
    snprintf(msg, msglen,
             "labels[%lld] = %lld but prev_centroids[%lld] is nearer: squared distance %.9g against %.9g "
             "(slack %.3g)",
             (long long)i, (long long)l, (long long)best, dl, best_d, slack);
    return 1;
}

static double inertia(const dims *s, const float *pts, const float *cent, const int32_t *label) {
    double j = 0;
    for (int64_t i = 0; i < s->n; i++) j += sqdist(pts + i * s->d, cent + (int64_t)label[i] * s->d, s->d);
    return j;
}

static int finite_all(const float *a, int64_t len, const char *what, int64_t d, char *msg, size_t msglen) {
    for (int64_t i = 0; i < len; i++)
        if (!isfinite(a[i])) {
            snprintf(msg, msglen, "%s[%lld][%lld] = %g is not finite", what, (long long)(i / d),
                     (long long)(i % d), a[i]);
            return 1;
        }
    return 0;
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    dims s;
    if (get_dims(sizes, &s, msg, msglen)) return 1;
    const st_tensor *tp = find(in, n_in, "points");
    const st_tensor *gl = find(got, n_out, "labels"), *gc = find(got, n_out, "centroids"),
                    *gp = find(got, n_out, "prev_centroids");
    const st_tensor *wl = find(want, n_out, "labels"), *wc = find(want, n_out, "centroids");
    if (!is_mat(tp, ST_F32, s.n, s.d) || !is_mat(gl, ST_I32, s.n, 0) || !is_mat(gc, ST_F32, s.k, s.d) ||
        !is_mat(gp, ST_F32, s.k, s.d) || !is_mat(wl, ST_I32, s.n, 0) || !is_mat(wc, ST_F32, s.k, s.d)) {
        snprintf(msg, msglen, "kmeans: expected points[n,d], labels[n] i32, centroids and prev_centroids [k,d]");
        return 1;
    }
    const float *pts = tp->data, *cent = gc->data, *prev = gp->data;
    const int32_t *label = gl->data;
    for (int64_t i = 0; i < s.n; i++)
        if (label[i] < 0 || label[i] >= s.k) {
            snprintf(msg, msglen, "labels[%lld] = %d is not in [0, %lld)", (long long)i, label[i], (long long)s.k);
            return 1;
        }
    if (finite_all(cent, s.k * s.d, "centroids", s.d, msg, msglen) ||
        finite_all(prev, s.k * s.d, "prev_centroids", s.d, msg, msglen))
        return 1;

    /* 2. assignment against prev, on a sample */
    if (s.n <= SAMPLES + 2 * EDGE_SAMPLES) {
        for (int64_t i = 0; i < s.n; i++)
            if (check_nearest(&s, pts, prev, label, i, msg, msglen)) return 1;
    } else {
        for (int64_t e = 0; e < EDGE_SAMPLES; e++)
            if (check_nearest(&s, pts, prev, label, e, msg, msglen) ||
                check_nearest(&s, pts, prev, label, s.n - 1 - e, msg, msglen))
                return 1;
        for (int64_t e = 0; e < SAMPLES; e++) {
            const int64_t i = (int64_t)(mix64((uint64_t)e ^ 0x6b6d65616e73ull) % (uint64_t)s.n);
            if (check_nearest(&s, pts, prev, label, i, msg, msglen)) return 1;
        }
    }

    /* 3. update: means of the labelled points */
    double *sum = calloc((size_t)(s.k * s.d), sizeof(double));
    int64_t *count = calloc((size_t)s.k, sizeof(int64_t));
    if (!sum || !count) {
        free(sum); free(count);
        snprintf(msg, msglen, "kmeans: validator out of memory");
        return 1;
    }
    double amax = 0;
    for (int64_t i = 0; i < s.n; i++) {
        const float *p = pts + i * s.d;
        double *acc = sum + (int64_t)label[i] * s.d;
        count[label[i]]++;
        for (int64_t j = 0; j < s.d; j++) {
            acc[j] += p[j];
            if (fabs(p[j]) > amax) amax = fabs(p[j]);
        }
    }
    int bad = 0;
    for (int64_t c = 0; c < s.k && !bad; c++)
        for (int64_t j = 0; j < s.d; j++) {
            const float v = cent[c * s.d + j];
            if (count[c] == 0) {
                if (v != prev[c * s.d + j]) {
                    snprintf(msg, msglen, "no point has label %lld, so centroids[%lld] must stay at prev_centroids[%lld], "
                             "but coordinate %lld is %.9g instead of %.9g",
                             (long long)c, (long long)c, (long long)c, (long long)j, v, prev[c * s.d + j]);
                    bad = 1;
                    break;
                }
                continue;
            }
            const double mean = sum[c * s.d + j] / (double)count[c];
            const double tol = MEAN_TOL * (sqrt((double)count[c]) + 16.0) * amax;
            if (!(fabs(v - mean) <= tol)) {
                snprintf(msg, msglen, "centroids[%lld][%lld] = %.9g but the mean of the %lld points labelled %lld is "
                         "%.9g (off by %.3g, allowed %.3g)",
                         (long long)c, (long long)j, v, (long long)count[c], (long long)c, mean, fabs(v - mean), tol);
                bad = 1;
                break;
            }
        }
    free(sum);
    free(count);
    if (bad) return 1;

    /* 4. inertia against the reference's */
    const double j_got = inertia(&s, pts, cent, label), j_ref = inertia(&s, pts, wc->data, wl->data);
    if (!(j_got <= j_ref * (1.0 + INERTIA_TOL) + 1e-30)) {
        snprintf(msg, msglen, "inertia (sum of squared distances to the assigned centroid) %.9g is above the "
                 "reference's %.9g by %.3g (allowed %.0e): fewer or different iterations?",
                 j_got, j_ref, j_got / j_ref - 1.0, INERTIA_TOL);
        return 1;
    }
    return 0;
}
