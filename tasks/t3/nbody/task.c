/* Task hooks for t3/nbody: a Plummer-sphere generator and a validator that judges the final
 * state by its physics and by its distance from the reference trajectory, never by bytes.
 *
 * Generator: N bodies drawn from a Plummer sphere (Aarseth, Henon and Wielen 1974) in Henon units
 * (G = 1, total mass 1, virial radius 1, E = -1/4), with masses varying by a factor of up to 3,
 * the centre of mass put at rest at the origin. The inputs are f32 pos[N,3], vel[N,3], mass[N].
 *
 * Validator: after S leapfrog steps of dt = 0.01 the bodies have moved about 0.007*S. Honest fp32
 * implementations differ from the reference by about 1e-6 of that displacement (summation order,
 * rsqrtf, fused or split kicks), a wrong integrator (drift-kick-drift, a missing half kick) by
 * 5e-5 to 6e-2 of it, state kept in bf16 or fp16 by far more. So positions and velocities must be
 * within 3e-5 (RMS) and 3e-4 (every component) of the RMS displacement (or velocity change) from
 * the reference, and on top of that the total energy (softened potential, computed in float with
 * double sums) may drift at most twice as far as the reference's drift plus 1e-5 of the energy
 * scale, and the total momentum must stay at its initial value (1e-6 of sum m|v|). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define EPS2 0.0025f  /* softening length squared; the description fixes it */
#define HENON_SCALE (3.0 * 3.14159265358979323846 / 16.0)
#define R_MAX 10.0    /* Plummer radii beyond this (0.1% of bodies) are redrawn */

#define RMS_TOL 3e-5  /* RMS deviation / RMS displacement */
#define MAX_TOL 3e-4  /* per-component deviation / RMS displacement */
#define ULP_TOL 1e-6  /* per step, relative to the value itself: rounding of x += dt*v */
#define ENERGY_TOL 1e-5
#define MOMENTUM_TOL 1e-6

// ----------------------------------------------------------------------------
// random numbers: splitmix64

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state) { return mix64(*state += 0x9e3779b97f4a7c15ull); }

/* uniform in [0, 1) with 53 bits */
static double unit(uint64_t *state) { return (double)(next64(state) >> 11) * (1.0 / 9007199254740992.0); }

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

static int is_f32(const st_tensor *t, int64_t rows, int64_t cols) {
    if (!t || t->dtype != ST_F32 || !t->data) return 0;
    if (cols == 0) return t->ndim == 1 && t->shape[0] == rows;
    return t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols;
}

/* a uniformly random direction scaled to length r */
static void random_vector(uint64_t *rng, double r, double *v) {
    const double z = 2.0 * unit(rng) - 1.0, phi = 2.0 * 3.14159265358979323846 * unit(rng);
    const double s = sqrt(1.0 - z * z);
    v[0] = r * s * cos(phi);
    v[1] = r * s * sin(phi);
    v[2] = r * z;
}

// ----------------------------------------------------------------------------
// generator

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    const int64_t n = size_get(sizes, "N");
    const st_tensor *tp = find(t, n_t, "pos"), *tv = find(t, n_t, "vel"), *tm = find(t, n_t, "mass");
    if (n < 1 || !is_f32(tp, n, 3) || !is_f32(tv, n, 3) || !is_f32(tm, n, 0)) {
        snprintf(msg, msglen, "nbody: expected f32 pos[N,3], vel[N,3], mass[N] with N >= 1 (N=%lld)",
                 (long long)n);
        return 1;
    }
    float *pos = tp->data, *vel = tv->data, *mass = tm->data;
    double *x = malloc(sizeof(double) * 3 * (size_t)n), *v = malloc(sizeof(double) * 3 * (size_t)n);
    double *m = malloc(sizeof(double) * (size_t)n);
    if (!x || !v || !m) {
        free(x); free(v); free(m);
        snprintf(msg, msglen, "nbody: out of memory generating N=%lld", (long long)n);
        return 1;
    }
    uint64_t rng = seed;
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += m[i] = 0.5 + unit(&rng);
    for (int64_t i = 0; i < n; i++) {
        m[i] /= total;
        /* radius from the inverse of the Plummer cumulative mass M(r) = r^3 / (1 + r^2)^1.5 */
        double r;
        do {
            double u = unit(&rng);
            r = u > 0 ? 1.0 / sqrt(pow(u, -2.0 / 3.0) - 1.0) : R_MAX;
        } while (!(r < R_MAX));
        random_vector(&rng, r * HENON_SCALE, &x[3 * i]);
        /* speed as a fraction q of the local escape speed, by rejection from g(q) = q^2 (1-q^2)^3.5 */
        double q, y;
        do {
            q = unit(&rng);
            y = 0.1 * unit(&rng);
        } while (y > q * q * pow(1.0 - q * q, 3.5));
        const double speed = q * sqrt(2.0) * pow(1.0 + r * r, -0.25) / sqrt(HENON_SCALE);
        random_vector(&rng, speed, &v[3 * i]);
    }
    for (int d = 0; d < 3; d++) {
        double cx = 0, cv = 0;
        for (int64_t i = 0; i < n; i++) {
            cx += m[i] * x[3 * i + d];
            cv += m[i] * v[3 * i + d];
        }
        for (int64_t i = 0; i < n; i++) {
            pos[3 * i + d] = (float)(x[3 * i + d] - cx);
            vel[3 * i + d] = (float)(v[3 * i + d] - cv);
        }
    }
    for (int64_t i = 0; i < n; i++) mass[i] = (float)m[i];
    free(x); free(v); free(m);
    return 0;
}

// ----------------------------------------------------------------------------
// validator

/* 1/sqrt(a) by Newton steps from a bit-level guess: plain arithmetic, so the blocked loop below
 * vectorises (sqrtf sets errno and would not); three steps reach float accuracy. */
static inline float rsqrt_newton(float a) {
    union { float f; uint32_t u; } c = {a};
    c.u = 0x5f375a86u - (c.u >> 1);
    float y = c.f;
    for (int k = 0; k < 3; k++) y = y * (1.5f - 0.5f * a * y * y);
    return y;
}

#define BLK 16

/* Softened potential energy -sum_{i<j} m_i m_j / sqrt(r_ij^2 + eps^2) of bodies packed as
 * structure of arrays, padded to a multiple of BLK with massless bodies at the origin (which add
 * exactly zero). Terms in float, sums per block in float and per row in double. */
static double potential(const float *sx, const float *sy, const float *sz, const float *sm,
                        int64_t n, int64_t padded) {
    double u = 0;
    for (int64_t i = 0; i < n; i++) {
        const float xi = sx[i], yi = sy[i], zi = sz[i];
        int64_t j = i + 1;
        double row = 0;
        for (; j < padded && j % BLK; j++) {
            const float dx = sx[j] - xi, dy = sy[j] - yi, dz = sz[j] - zi;
            row += sm[j] * rsqrt_newton(dx * dx + dy * dy + dz * dz + EPS2);
        }
        for (; j < padded; j += BLK) {
            float acc[BLK], s = 0;
            for (int k = 0; k < BLK; k++) {
                const float dx = sx[j + k] - xi, dy = sy[j + k] - yi, dz = sz[j + k] - zi;
                acc[k] = sm[j + k] * rsqrt_newton(dx * dx + dy * dy + dz * dz + EPS2);
            }
            for (int k = 0; k < BLK; k++) s += acc[k];
            row += s;
        }
        u -= (double)sm[i] * row;
    }
    return u;
}

typedef struct {
    double kinetic, potential, p[3], p_scale; /* p_scale = sum m |v| */
} invariants;

static void measure(const float *pos, const float *vel, const float *mass, int64_t n, int64_t padded,
                    float *soa, invariants *out) {
    float *sx = soa, *sy = soa + padded, *sz = soa + 2 * padded, *sm = soa + 3 * padded;
    memset(soa, 0, sizeof(float) * 4 * (size_t)padded);
    memset(out, 0, sizeof(*out));
    for (int64_t i = 0; i < n; i++) {
        sx[i] = pos[3 * i];
        sy[i] = pos[3 * i + 1];
        sz[i] = pos[3 * i + 2];
        sm[i] = mass[i];
        double v2 = 0;
        for (int d = 0; d < 3; d++) {
            out->p[d] += (double)mass[i] * vel[3 * i + d];
            v2 += (double)vel[3 * i + d] * vel[3 * i + d];
        }
        out->kinetic += 0.5 * mass[i] * v2;
        out->p_scale += mass[i] * sqrt(v2);
    }
    out->potential = potential(sx, sy, sz, sm, n, padded);
}

/* Compare got against want for one [N,3] array: per component, and as an RMS over all. `scale`
 * is the RMS distance the reference moved from `start`. Returns 0 or fills msg. */
static int compare_state(const char *what, const float *got, const float *want, const float *start,
                         int64_t n, int64_t steps, char *msg, size_t msglen) {
    double moved = 0, mag = 0;
    for (int64_t i = 0; i < 3 * n; i++) {
        moved += ((double)want[i] - start[i]) * ((double)want[i] - start[i]);
        mag += (double)want[i] * want[i];
    }
    moved = sqrt(moved / (double)n);
    mag = sqrt(mag / (double)n);
    double err2 = 0;
    for (int64_t i = 0; i < 3 * n; i++) {
        if (!isfinite(got[i])) {
            snprintf(msg, msglen, "%s[%lld][%lld] = %g is not finite", what, (long long)(i / 3),
                     (long long)(i % 3), got[i]);
            return 1;
        }
        const double e = fabs((double)got[i] - want[i]);
        const double tol = MAX_TOL * moved + ULP_TOL * (double)steps * fabs(want[i]);
        if (e > tol) {
            snprintf(msg, msglen,
                     "%s[%lld][%lld] = %.9g but the reference has %.9g: off by %.3g, more than %.3g "
                     "(%.0e of the RMS change %.4g over %lld steps)",
                     what, (long long)(i / 3), (long long)(i % 3), got[i], want[i], e, tol, MAX_TOL,
                     moved, (long long)steps);
            return 1;
        }
        err2 += e * e;
    }
    const double rms = sqrt(err2 / (double)n);
    const double tol = RMS_TOL * moved + ULP_TOL * sqrt((double)steps) * mag;
    if (rms > tol) {
        snprintf(msg, msglen,
                 "%s: RMS deviation from the reference %.4g is more than %.4g (%.0e of the RMS change "
                 "%.4g over %lld steps): wrong integrator, step or precision?",
                 what, rms, tol, RMS_TOL, moved, (long long)steps);
        return 1;
    }
    return 0;
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    const int64_t n = size_get(sizes, "N"), steps = size_get(sizes, "S");
    const st_tensor *tp = find(in, n_in, "pos"), *tv = find(in, n_in, "vel"), *tm = find(in, n_in, "mass");
    const st_tensor *gp = find(got, n_out, "pos_out"), *gv = find(got, n_out, "vel_out");
    const st_tensor *wp = find(want, n_out, "pos_out"), *wv = find(want, n_out, "vel_out");
    if (n < 1 || steps < 1 || !is_f32(tp, n, 3) || !is_f32(tv, n, 3) || !is_f32(tm, n, 0) ||
        !is_f32(gp, n, 3) || !is_f32(gv, n, 3) || !is_f32(wp, n, 3) || !is_f32(wv, n, 3)) {
        snprintf(msg, msglen, "nbody: expected f32 pos, vel [N,3], mass [N] and outputs pos_out, vel_out [N,3]");
        return 1;
    }
    const float *pos0 = tp->data, *vel0 = tv->data, *mass = tm->data;
    if (compare_state("pos_out", gp->data, wp->data, pos0, n, steps, msg, msglen) ||
        compare_state("vel_out", gv->data, wv->data, vel0, n, steps, msg, msglen))
        return 1;

    const int64_t padded = (n + BLK - 1) / BLK * BLK;
    float *soa = malloc(sizeof(float) * 4 * (size_t)padded);
    if (!soa) {
        snprintf(msg, msglen, "nbody: validator out of memory");
        return 1;
    }
    invariants start, mine, ref;
    measure(pos0, vel0, mass, n, padded, soa, &start);
    measure(gp->data, gv->data, mass, n, padded, soa, &mine);
    measure(wp->data, wv->data, mass, n, padded, soa, &ref);
    free(soa);

    const double e0 = start.kinetic + start.potential, e = mine.kinetic + mine.potential;
    const double e_ref = ref.kinetic + ref.potential;
    const double e_tol = 2.0 * fabs(e_ref - e0) + ENERGY_TOL * (start.kinetic - start.potential) + 1e-30;
    if (!(fabs(e - e0) <= e_tol)) {
        snprintf(msg, msglen,
                 "total energy drifted from %.9g to %.9g (relative %.3g); the reference drifted to "
                 "%.9g, allowed %.3g",
                 e0, e, (e - e0) / fabs(e0), e_ref, e_tol);
        return 1;
    }
    const double dp = sqrt((mine.p[0] - start.p[0]) * (mine.p[0] - start.p[0]) +
                           (mine.p[1] - start.p[1]) * (mine.p[1] - start.p[1]) +
                           (mine.p[2] - start.p[2]) * (mine.p[2] - start.p[2]));
    const double p_tol = MOMENTUM_TOL * (mine.p_scale > start.p_scale ? mine.p_scale : start.p_scale) + 1e-30;
    if (!(dp <= p_tol)) {
        snprintf(msg, msglen,
                 "total momentum changed by %.3g (from (%.3g, %.3g, %.3g) to (%.3g, %.3g, %.3g)), more "
                 "than %.3g: forces are not equal and opposite (mass of the wrong body?)",
                 dp, start.p[0], start.p[1], start.p[2], mine.p[0], mine.p[1], mine.p[2], p_tol);
        return 1;
    }
    return 0;
}
