/* The device input generator against its recipe: for each case (dtype, distribution), fill a
 * tensor on the GPU, copy it back and hold it to the host generator (runner_gen.c), element by
 * element (exact for integers, within the fast math's error for floats), and to the distribution
 * (mean and spread; no NaN or infinity). One case holds a pair whose first uniform rounds to
 * exactly 1, found on the host first: its Box-Muller radius is 0, a case fast reciprocal-root
 * arithmetic turns into NaN if it is not guarded. Prints one line per case; exit 0 when all
 * pass, 1 on a mismatch, 2 on a CUDA error. Then the digest a timed call commits (common/digest.h):
 * the GPU's word sums of spans of the last case (whole, ragged, not 8-byte aligned, tiny) must be
 * the host's bit for bit, or every audit of an honest candidate on the GPU would fail.
 * Usage: stitch-test-gen [MiB]   (tensor size per case, 32 to 4096, default 64) */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/digest.h"
#include "runner/cuda_kernels.h"
#include "runner/runner_gen.h"
#include "task/dtype.h"
}
#include "runner/rng.h"

#define CK(x)                                                                                     \
	do {                                                                                          \
		cudaError_t e_ = (x);                                                                     \
		if (e_ != cudaSuccess) {                                                                  \
			fprintf(stderr, "gen_check: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, \
			        __LINE__);                                                                    \
			exit(2);                                                                              \
		}                                                                                         \
	} while (0)

typedef struct gen_case {
	const char *name;
	st_dtype dt;
	rb_init init;
	double tol;          /* per element, against the host recipe, relative to b (or b - a) */
	double mean, sd;     /* what the distribution has; sd < 0: not checked */
} gen_case;

/* A seed and a pair index below 2^22 whose first 24 random bits are all ones (some 15 of the
 * 2^28 tried are expected). */
static int find_u1_one(uint64_t *seed, uint64_t *pair)
{
	for (uint64_t i = 1; i < 64; i++) /* seeds that differ in both halves, as verifies' do */
		for (uint64_t j = 0, s = st_mix64(i); j < (1u << 22); j++) {
			uint32_t b[2];
			st_pair_bits(s, j, b);
			if ((b[0] >> 8) == 0xffffffu) {
				*seed = s;
				*pair = j;
				return 1;
			}
		}
	return 0;
}

static int run_case(const gen_case *c, int64_t n, uint64_t seed, void *dev, void *got, void *want,
                    int64_t watch)
{
	size_t es = st_dtype_size(c->dt);
	CK((cudaError_t)st_cuda_fill(dev, (int)c->dt, n, (int)c->init.dist, c->init.a, c->init.b,
	                             c->init.lo, c->init.hi, seed, 0));
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got, dev, (size_t)n * es, cudaMemcpyDeviceToHost));
	st_gen_host(want, c->dt, n, &c->init, seed);
	double scale = c->init.dist == ST_DIST_UNIFORM   ? c->init.b - c->init.a
	             : c->init.dist == ST_DIST_RANDINT ? (double)(c->init.hi - c->init.lo)
	                                               : c->init.b;
	double worst = 0, sum = 0, sum2 = 0;
	int64_t worst_i = 0, bad = 0, nonfinite = 0;
	for (int64_t i = 0; i < n; i++) {
		double g = st_dtype_get(c->dt, got, i), w = st_dtype_get(c->dt, want, i);
		if (!isfinite(g)) {
			nonfinite++;
			continue;
		}
		double d = fabs(g - w) / (scale > 0 ? scale : 1);
		if (d > worst) {
			worst = d;
			worst_i = i;
		}
		bad += d > c->tol;
		sum += g;
		sum2 += g * g;
	}
	double mean = sum / (double)n, sd = sqrt(sum2 / (double)n - mean * mean);
	int ok = !bad && !nonfinite && fabs(mean - c->mean) < 0.01 * (scale > 0 ? scale : 1) &&
	         (c->sd < 0 || fabs(sd - c->sd) < 0.01 * c->sd);
	printf("%-22s n %lld seed %llu: mismatches %lld (worst %.3g at %lld, allowed %.3g), "
	       "non-finite %lld, mean %.5f (want %.5f), sd %.5f (want %.5f): %s\n",
	       c->name, (long long)n, (unsigned long long)seed, (long long)bad, worst,
	       (long long)worst_i, c->tol, (long long)nonfinite, mean, c->mean, sd, c->sd,
	       ok ? "ok" : "FAILED");
	if (watch >= 0) {
		double g = st_dtype_get(c->dt, got, watch), w = st_dtype_get(c->dt, want, watch);
		int wok = isfinite(g) && fabs(g - w) <= c->tol * c->init.b;
		printf("%-22s element %lld (first uniform exactly 1): got %g, host %g: %s\n", c->name,
		       (long long)watch, g, w, wok ? "ok" : "FAILED");
		ok = ok && wok;
	}
	return ok;
}

/* The GPU digest kernel against the host's code over spans of what `dev` holds: whole and ragged,
 * 16-byte aligned (the vector path, with and without a tail of words), only 8-byte aligned or not
 * at all (word by word), and spans too short for every thread to get a vector. */
static int digest_cases(unsigned char *dev, unsigned char *host, size_t bytes)
{
	CK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
	const size_t off[] = {0, 0, 1, 8, 3, 4096, 16, 8, 32, 48, 0};
	const size_t len[] = {bytes, bytes - 5, bytes - 9, 13, 7, 1, bytes - 16 - 13, 100003, 4096 * 16 + 8,
	                      64, bytes - 16};
	int n = sizeof off / sizeof off[0], ok = 1;
	st_prep_span spans[ST_PREP_SPANS];
	for (int k = 0; k < n; k++)
		spans[k] = (st_prep_span){dev + off[k], len[k], 0};
	unsigned long long *sums, got[ST_PREP_SPANS];
	CK(cudaMalloc((void **)&sums, sizeof got));
	CK(cudaMemset(sums, 0, sizeof got));
	CK((cudaError_t)st_cuda_digest(spans, n, sums, 264, 0));
	CK(cudaMemcpy(got, sums, n * sizeof *got, cudaMemcpyDeviceToHost));
	cudaFree(sums);
	for (int k = 0; k < n; k++) {
		uint64_t want = st_digest_sum(host + off[k], len[k]);
		int same = got[k] == want;
		printf("digest of %zu bytes at +%zu: gpu %016llx host %016llx %s\n", len[k], off[k],
		       got[k], (unsigned long long)want, same ? "ok" : "FAILED");
		ok &= same;
	}
	return ok;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	if (mib < 32 || mib > 4096) {
		fprintf(stderr, "usage: stitch-test-gen [MiB from 32 to 4096]\n");
		return 2;
	}
	size_t bytes = mib << 20;
	void *dev, *got = malloc(bytes), *want = malloc(bytes);
	if (!got || !want) {
		fprintf(stderr, "gen_check: out of host memory for %zu MiB\n", mib);
		return 2;
	}
	CK(cudaMalloc(&dev, bytes));
	/* Normal values: the device's fast log, root and sincos against libm, mostly some 1e-6
	 * apart; where the first uniform is within 1e-6 of 1 the fast log's absolute error (5e-7)
	 * moves the small radius by up to some 5e-4. Narrow types: a unit in the last place. */
	static const gen_case cases[] = {
		{"f32 normal(0, 1)", ST_F32, {ST_DIST_NORMAL, 0, 1, 0, 0}, 2e-3, 0, 1},
		{"f32 normal(3, 25)", ST_F32, {ST_DIST_NORMAL, 3, 25, 0, 0}, 2e-3, 3, 25},
		{"f32 uniform(-1, 1)", ST_F32, {ST_DIST_UNIFORM, -1, 1, 0, 0}, 1e-6, 0, 0.57735},
		{"bf16 normal(0, 1)", ST_BF16, {ST_DIST_NORMAL, 0, 1, 0, 0}, 4e-2, 0, 1},
		{"f16 normal(0, 1)", ST_F16, {ST_DIST_NORMAL, 0, 1, 0, 0}, 8e-3, 0, 1},
		{"i32 randint[0, 1000)", ST_I32, {ST_DIST_RANDINT, 0, 0, 0, 1000}, 0, 499.5, -1},
	};
	int ok = 1;
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		int64_t n = (int64_t)(bytes / st_dtype_size(cases[k].dt)) - 3; /* a ragged tail */
		ok &= run_case(&cases[k], n, 1000 + k, dev, got, want, -1);
	}
	uint64_t seed, pair;
	if (!find_u1_one(&seed, &pair)) {
		printf("no pair with a first uniform of 1 below 2^22 pairs for 63 seeds: FAILED\n");
		ok = 0;
	} else {
		/* past the pair (below 2^22: 2^23 elements at most, 32 MiB) and enough for the
		 * statistics */
		int64_t n = 2 * (int64_t)pair + 2 > ((int64_t)4 << 20) ? 2 * (int64_t)pair + 2 : (int64_t)4 << 20;
		ok &= run_case(&cases[0], n, seed, dev, got, want, (int64_t)(2 * pair));
	}
	ok &= digest_cases((unsigned char *)dev, (unsigned char *)got, bytes);
	cudaFree(dev);
	free(got);
	free(want);
	printf("gen_check: %s\n", ok ? "all cases ok" : "FAILED");
	return ok ? 0 : 1;
}
