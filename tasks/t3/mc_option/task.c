/* Task hooks for t3/mc_option: a statistical validator for Monte-Carlo prices of European calls
 * under geometric Brownian motion. The inputs come from plain uniform distributions, so there is
 * no generator.
 *
 * Candidates pick their own random numbers, so prices never match the reference's bytes. They are
 * judged against the Black-Scholes closed form, computed here in double, together with the exact
 * standard deviation of the discounted payoff (E[Y^2] has a closed form too), so the Monte-Carlo
 * error of an honest estimate with `paths` samples is known in advance:
 *  1. every price finite and >= 0, and |price - BS| <= 6 sd / sqrt(paths) + 1e-4 (S0 + BS) for every
 *     option (6 standard errors: an honest run fails one option in 5e8; the small term absorbs
 *     float rounding);
 *  2. across options, the mean of z^2 = ((price - BS) / (sd / sqrt(paths)))^2 at most
 *     1 + 6 sqrt(2 / n_opt): an honest plain estimate has E[z^2] = 1, variance reduction such as
 *     antithetic pairs gives less, and half the paths gives 2, which fails from about 50 options on.
 * The ranges (S0, K in [80, 120], sigma in [0.2, 0.5], T in [0.5, 2]) keep sigma sqrt(T) >= 0.14, so
 * every option ends in the money with probability >= 0.2% and the sample mean of 10^4 or more paths
 * is close enough to normal for these tail bounds. A candidate that returns the closed form without
 * simulating passes; the policy and the rubric judge that, not this file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

#define Z 6.0
#define ATOL_REL 1e-4

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

static int is_vec(const st_tensor *t, int64_t len) {
    return t && t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == len && t->data;
}

static double norm_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Black-Scholes call price and the standard deviation of the discounted payoff e^{-rT} (S_T - K)+ */
static void black_scholes(double s, double k, double r, double sigma, double t, double *price, double *sd) {
    const double vol = sigma * sqrt(t), disc = exp(-r * t);
    const double d1 = (log(s / k) + (r + 0.5 * sigma * sigma) * t) / vol, d2 = d1 - vol;
    const double fwd = s * exp(r * t);
    const double m1 = fwd * norm_cdf(d1) - k * norm_cdf(d2);
    const double m2 = fwd * fwd * exp(sigma * sigma * t) * norm_cdf(d1 + vol) - 2.0 * k * fwd * norm_cdf(d1) +
                      k * k * norm_cdf(d2);
    const double var = m2 - m1 * m1;
    *price = disc * m1;
    *sd = disc * sqrt(var > 0 ? var : 0);
}

int st_task_validate(const st_config *sizes, const st_tensor *in, int32_t n_in, const st_tensor *got,
                     const st_tensor *want, int32_t n_out, char *msg, size_t msglen) {
    (void)want; /* the closed form is the yardstick; the reference is just another estimate */
    const int64_t n = size_get(sizes, "n_opt"), paths = size_get(sizes, "paths");
    const st_tensor *ts = find(in, n_in, "S0"), *tk = find(in, n_in, "K"), *tr = find(in, n_in, "r"),
                    *tv = find(in, n_in, "sigma"), *tt = find(in, n_in, "T"), *tp = find(got, n_out, "price");
    if (n < 1 || paths < 1 || !is_vec(ts, n) || !is_vec(tk, n) || !is_vec(tr, n) || !is_vec(tv, n) ||
        !is_vec(tt, n) || !is_vec(tp, n)) {
        snprintf(msg, msglen, "mc_option: expected f32 S0, K, r, sigma, T and price of shape [n_opt]");
        return 1;
    }
    const float *s0 = ts->data, *k = tk->data, *r = tr->data, *sigma = tv->data, *t = tt->data, *price = tp->data;
    double z2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double bs, sd;
        black_scholes(s0[i], k[i], r[i], sigma[i], t[i], &bs, &sd);
        const double se = sd / sqrt((double)paths), err = (double)price[i] - bs;
        const double tol = Z * se + ATOL_REL * (s0[i] + bs);
        if (!isfinite(price[i]) || price[i] < 0 || !(fabs(err) <= tol)) {
            snprintf(msg, msglen,
                     "price[%lld] = %.7g but Black-Scholes gives %.7g (S0 %.4g, K %.4g, r %.4g, sigma %.4g, T %.4g): "
                     "off by %.3g = %.1f standard errors of %lld paths, allowed %.3g",
                     (long long)i, price[i], bs, s0[i], k[i], r[i], sigma[i], t[i], err,
                     se > 0 ? err / se : INFINITY, (long long)paths, tol);
            return 1;
        }
        if (se > 0) z2 += (err / se) * (err / se);
    }
    const double mean_z2 = z2 / (double)n, bound = 1.0 + Z * sqrt(2.0 / (double)n);
    if (!(mean_z2 <= bound)) {
        snprintf(msg, msglen,
                 "errors too large overall: the mean squared error is %.3g times the variance of a %lld-path "
                 "estimate (allowed %.3g): fewer paths than required, or correlated random numbers?",
                 mean_z2, (long long)paths, bound);
        return 1;
    }
    return 0;
}
