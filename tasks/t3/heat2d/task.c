/* Task hooks for t3/heat2d: a validator that judges the grid after S Jacobi sweeps of the 2-D
 * Poisson problem by meaning, not bytes. The inputs come from plain distributions (u0 and b
 * uniform in [-1, 1]), so there is no generator.
 *
 * Checks: the boundary is the input boundary, bit for bit; every value is finite and within
 * (1e-5 + 1e-7 S) (1 + max|u_ref|) of the reference (fp32 rounding moves the field by ~1e-6 after
 * 100 sweeps; one sweep more or fewer moves it by 0.05 to 0.4, fp16 storage by 3e-4 to 4e-3); and
 * the residual ||b + N + S + E + W - 4u||_2 over the interior, computed in double, is at most
 * 1.001 times the reference's: the candidate has converged at least as far. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define ATOL 1e-5          /* closeness, times (1 + max|u_ref|) ... */
#define ATOL_PER_SWEEP 1e-7 /* ... plus this per sweep */
#define RES_FACTOR 1.001

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

static int is_grid(const st_tensor *t, int64_t ny, int64_t nx) {
    return t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == ny && t->shape[1] == nx && t->data;
}

/* ||b + (sum of the 4 neighbours) - 4u||_2 over the interior, in double */
static double residual(const float *u, const float *b, int64_t ny, int64_t nx) {
    double sum = 0;
    for (int64_t i = 1; i < ny - 1; i++) {
        const float *up = u + (i - 1) * nx, *row = u + i * nx, *down = u + (i + 1) * nx;
        const float *br = b + i * nx;
        for (int64_t j = 1; j < nx - 1; j++) {
            const double r = (double)br[j] + up[j] + down[j] + row[j - 1] + row[j + 1] - 4.0 * row[j];
            sum += r * r;
        }
    }
    return sqrt(sum);
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    const int64_t ny = size_get(sizes, "ny"), nx = size_get(sizes, "nx"), sweeps = size_get(sizes, "S");
    const st_tensor *tu = find(in, n_in, "u0"), *tb = find(in, n_in, "b");
    const st_tensor *gu = find(got, n_out, "u"), *wu = find(want, n_out, "u");
    if (ny < 1 || nx < 1 || sweeps < 1 || !is_grid(tu, ny, nx) || !is_grid(tb, ny, nx) ||
        !is_grid(gu, ny, nx) || !is_grid(wu, ny, nx)) {
        snprintf(msg, msglen, "heat2d: expected f32 u0, b and output u of shape [ny, nx]");
        return 1;
    }
    const float *u0 = tu->data, *b = tb->data, *u = gu->data, *ref = wu->data;

    double scale = 0;
    for (int64_t k = 0; k < ny * nx; k++)
        if (fabs(ref[k]) > scale) scale = fabs(ref[k]);
    const double tol = (ATOL + ATOL_PER_SWEEP * (double)sweeps) * (1.0 + scale);
    for (int64_t i = 0; i < ny; i++)
        for (int64_t j = 0; j < nx; j++) {
            const int64_t k = i * nx + j;
            const int edge = i == 0 || i == ny - 1 || j == 0 || j == nx - 1;
            if (edge && !(u[k] == u0[k])) {
                snprintf(msg, msglen, "u[%lld][%lld] = %.9g is on the boundary, which stays fixed at %.9g",
                         (long long)i, (long long)j, u[k], u0[k]);
                return 1;
            }
            const double e = fabs((double)u[k] - ref[k]);
            if (!(e <= tol)) {
                snprintf(msg, msglen,
                         "u[%lld][%lld] = %.9g but the reference has %.9g: off by %.3g, more than %.3g "
                         "(wrong sweep count, update rule or precision?)",
                         (long long)i, (long long)j, u[k], ref[k], e, tol);
                return 1;
            }
        }
    const double r = residual(u, b, ny, nx), r_ref = residual(ref, b, ny, nx);
    if (!(r <= RES_FACTOR * r_ref + 1e-30)) {
        snprintf(msg, msglen, "residual ||b + Laplacian(u)||_2 = %.9g is above the reference's %.9g (allowed %.9g)",
                 r, r_ref, RES_FACTOR * r_ref);
        return 1;
    }
    return 0;
}
