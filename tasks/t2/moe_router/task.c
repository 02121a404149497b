/* Hooks of t2/moe_router: the input generator. Routing picks the top 2 of E router logits, and
 * the output is compared elementwise, so a logit that differs in its last bit between two correct
 * solutions (another fp32 summation order) could flip an expert choice and fail a whole row.
 * The generator rules that out: x[t, c] = k * 2^-s with an integer |k| <= 255 (exact in bf16),
 * and Wr (a param) holds integers in {-1, 0, 1}, so every partial sum of x*Wr is an integer
 * multiple of 2^-s below 2^24 * 2^-s while C < 65793: fp32 adds them exactly in any order,
 * tensor cores included. Ties then happen exactly and the stated rule (lower index wins)
 * decides them. k is a rounded normal scaled so the logits have a spread of about 1.2 whatever
 * C is (gates neither all 1/2 nor all 0/1), with a mean offset of 0.75 of that spread: the
 * experts whose router column sums are large then receive several times their share of tokens,
 * as real routers do. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stitch/task_hooks.h"

/* standard deviation of a token's router logits from the token-to-token variation of x */
#define LOGIT_SPREAD 1.2
/* the mean of x, in units of its standard deviation; skews the expert loads */
#define MEAN_OFFSET 0.75
#define K_MAX 255

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1]: never 0, so log() below stays finite */
static double unit_open(uint64_t r) { return ((double)(r >> 11) + 1.0) * (1.0 / 9007199254740992.0); }

static int64_t size_get(const st_config *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return s->values[i];
    return -1;
}

/* bf16 bits of a float that is exactly representable (k * 2^-s with |k| <= 255): truncation */
static uint16_t exact_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

int st_task_generate(const st_config *sizes, uint64_t seed, st_tensor *t, int32_t n, char *msg,
                     size_t msglen) {
    const int64_t T = size_get(sizes, "T"), C = size_get(sizes, "C");
    st_tensor *x = NULL;
    for (int i = 0; i < n; i++)
        if (t[i].name && strcmp(t[i].name, "x") == 0) x = &t[i];
    if (!x || x->dtype != ST_BF16 || x->ndim != 2 || x->shape[0] != T || x->shape[1] != C || !x->data) {
        snprintf(msg, msglen, "moe_router: expected input x, bf16 [T, C]");
        return 1;
    }
    /* exactness needs C * K_MAX * 1 < 2^24 */
    if (T < 1 || C < 1 || C * K_MAX >= (1 << 24)) {
        snprintf(msg, msglen, "moe_router: need T >= 1 and 1 <= C < 65793, got T=%lld C=%lld",
                 (long long)T, (long long)C);
        return 1;
    }
    /* Wr entries have variance 2/3, so a logit's variance is C * 2/3 * var(x). The grid 2^-s is
     * the coarsest that still resolves x's standard deviation into 16..32 steps. */
    const double sd_x = LOGIT_SPREAD / sqrt(2.0 * (double)C / 3.0);
    int s = 0;
    while (sd_x * ldexp(1.0, s) < 16.0) s++;
    while (sd_x * ldexp(1.0, s) >= 32.0) s--;
    const double sd_k = sd_x * ldexp(1.0, s), mean_k = MEAN_OFFSET * sd_k;
    const float step = (float)ldexp(1.0, -s);

    uint16_t *dst = x->data;
    const int64_t count = T * C;
    const uint64_t key = mix64(seed ^ 0x6d6f655f726f7574ull);
    for (int64_t i = 0; i < count; i += 2) {
        /* Box-Muller: two normals from two uniforms of one hashed counter pair */
        const uint64_t r1 = mix64(key + (uint64_t)i), r2 = mix64(key ^ mix64((uint64_t)i + 1));
        const double rad = sqrt(-2.0 * log(unit_open(r1)));
        const double ang = 6.283185307179586 * unit_open(r2);
        const double z[2] = {rad * cos(ang), rad * sin(ang)};
        for (int j = 0; j < 2 && i + j < count; j++) {
            double k = nearbyint(mean_k + sd_k * z[j]);
            k = k > K_MAX ? K_MAX : k < -K_MAX ? -K_MAX : k;
            dst[i + j] = exact_bf16((float)k * step);
        }
    }
    return 0;
}
