/* Hooks of t1/histogram: the input generator. x[i] is a pure function of (seed, i), so every
 * runner makes the same values for a seed. The in-range values are skewed on purpose: the bin
 * index is floor(bins * u^2) (u uniform), so bin k is hit with probability about
 * (sqrt(k + 1) - sqrt(k)) / sqrt(bins): the hottest bin takes 1/sqrt(bins) of the values (6.3%
 * at 256 bins, all of them at 1 bin) and neighbouring bins are hot too, which is what makes
 * naive global atomics contend. The hot region starts at a bin that moves with the seed. One value
 * in 32 is out of range and must be ignored: negative, >= bins, and the int32 extremes. */
#include <stdio.h>
#include <string.h>
#include "stitch/task_hooks.h"

/* bins above this would let bins + (r % bins) overflow int32 */
#define BINS_MAX (1 << 30)

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One multiply per value: the generator runs on the host before every call, 67 M values at eval. */
static uint64_t mix_fast(uint64_t z) {
    z ^= z >> 32;
    z *= 0xd6e8feb86659fd93ull;
    return z ^ (z >> 32);
}

static int64_t size_get(const st_config *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return s->values[i];
    return -1;
}

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n_t, char *msg,
                     size_t msglen) {
    const int64_t n = size_get(sizes, "n"), bins = size_get(sizes, "bins");
    if (n < 1 || bins < 1 || bins > BINS_MAX) {
        snprintf(msg, msglen, "histogram: need sizes n >= 1 and 1 <= bins <= 2^30, got n=%lld bins=%lld",
                 (long long)n, (long long)bins);
        return 1;
    }
    st_tensor *x = NULL;
    for (int i = 0; i < n_t; i++)
        if (t[i].name && strcmp(t[i].name, "x") == 0) x = &t[i];
    if (!x || x->dtype != ST_I32 || x->ndim != 1 || x->shape[0] != n || !x->data) {
        snprintf(msg, msglen, "histogram: expected an i32 input x[n]");
        return 1;
    }
    int32_t *v = x->data;
    const uint64_t key = mix64(seed ^ 0x6a09e667f3bcc909ull);
    const int64_t rot = (int64_t)(mix64(key) % (uint64_t)bins);
    const double scale = 1.0 / 4294967296.0;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t h = mix_fast(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        const uint32_t lo = (uint32_t)h, hi = (uint32_t)(h >> 32);
        if ((hi & 31u) != 0) {
            const double u = lo * scale;
            int64_t b = (int64_t)((double)bins * u * u) + rot; /* < 2 * bins: u < 1 */
            if (b >= bins) b -= bins;
            v[i] = (int32_t)b;
            continue;
        }
        switch ((hi >> 5) & 7u) {
        case 0: v[i] = INT32_MIN; break;
        case 1: v[i] = INT32_MAX; break;
        case 2: v[i] = -1; break;
        case 3: v[i] = (int32_t)bins; break;
        case 4:
        case 5: v[i] = (int32_t)(-1 - (int64_t)(lo % (uint32_t)bins)); break;
        default: v[i] = (int32_t)(bins + (int64_t)(lo % (uint32_t)bins)); break;
        }
    }
    return 0;
}
