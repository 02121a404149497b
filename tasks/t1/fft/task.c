/* Task hooks for t1/fft: the validator. An FFT's rounding error is not proportional to each output
 * element (small outputs carry the same absolute error as large ones) but to the size of the whole
 * row, and it grows with the number of stages. So each element of row b, real and imaginary part
 * separately, must satisfy |y - y_ref| <= TOL * log2(2n) * ||x_b||, with ||x_b|| the 2-norm of the
 * input row, which is also the root-mean-square magnitude of the exact output row (Parseval).
 * A float32 FFT with accurate twiddles differs from the reference by about 1.3e-7 in these units,
 * the sincosf-of-a-rounded-angle kind of twiddle included; 16-bit twiddles by up to 1.4e-4 and
 * 16-bit data by 2e-4, far outside TOL. No generator: x comes from task.json. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define TOL 2e-6

static int64_t size_get(const st_config *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return s->values[i];
    return -1;
}

static int is_rows(const st_tensor *t, int64_t batch, int64_t n) {
    return t && t->dtype == ST_F32 && t->ndim == 3 && t->shape[0] == batch && t->shape[1] == n &&
           t->shape[2] == 2 && t->data;
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    const int64_t batch = size_get(sizes, "batch"), n = size_get(sizes, "n");
    if (batch < 1 || n < 1) {
        snprintf(msg, msglen, "fft: sizes batch and n must be >= 1");
        return 1;
    }
    if (n_in != 1 || n_out != 1 || !is_rows(&in[0], batch, n) || !is_rows(&got[0], batch, n) ||
        !is_rows(&want[0], batch, n)) {
        snprintf(msg, msglen, "fft: expected f32 x and y of shape [%lld, %lld, 2]", (long long)batch,
                 (long long)n);
        return 1;
    }
    const float *x = in[0].data, *y = got[0].data, *ref = want[0].data;
    const double stages = log2(2.0 * (double)n);
    int64_t bad = 0, first = -1;
    double first_limit = 0, worst = 0;
    for (int64_t b = 0; b < batch; b++) {
        const float *xb = x + 2 * b * n;
        double norm2 = 0;
        for (int64_t j = 0; j < 2 * n; j++) norm2 += (double)xb[j] * (double)xb[j];
        const double limit = TOL * stages * sqrt(norm2);
        for (int64_t j = 2 * b * n; j < 2 * (b + 1) * n; j++) {
            const double err = fabs((double)y[j] - (double)ref[j]);
            /* !(err <= limit) also catches NaN */
            if (!(err <= limit)) {
                if (first < 0) {
                    first = j;
                    first_limit = limit;
                }
                bad++;
            } else if (limit > 0 && err / limit > worst) {
                worst = err / limit;
            }
        }
    }
    if (bad) {
        const int64_t b = first / (2 * n), k = (first / 2) % n;
        snprintf(msg, msglen, "%lld of %lld values off: y[%lld, %lld].%s = %.9g, reference %.9g "
                 "(allowed error %.3g = %g * log2(2n) * ||x[%lld]||)",
                 (long long)bad, (long long)(2 * batch * n), (long long)b, (long long)k,
                 first % 2 ? "im" : "re", (double)y[first], (double)ref[first], first_limit, TOL,
                 (long long)b);
        return 1;
    }
    snprintf(msg, msglen, "all %lld values within tolerance (largest error %.3g of the allowed)",
             (long long)(2 * batch * n), worst);
    return 0;
}
