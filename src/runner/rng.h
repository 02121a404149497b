/* Counter-based random numbers for input generation: element i of a tensor is a pure function of
 * (seed, i), so host and device generators fill any element independently and in parallel.
 * Included by C (host backend) and CUDA (device kernels) code alike. */
#ifndef ST_RNG_H
#define ST_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ST_HD __host__ __device__ __forceinline__
#else
#define ST_HD static inline
#endif

/* splitmix64 finaliser: a bijective mix with full avalanche. */
ST_HD uint64_t st_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Seed of tensor number `index` within one call's seed. */
ST_HD uint64_t st_tensor_seed(uint64_t call_seed, uint64_t index)
{
	return st_mix64(call_seed ^ st_mix64(index + 0x632be59bd9b4e019ull));
}

/* lowbias32 (Wellons' hash prospector): a 32-bit mix with good avalanche at two multiplies,
 * which the GPU runs at full rate, unlike 64-bit products. */
ST_HD uint32_t st_mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

/* The part of pair j's key that comes from its upper 32 bits: one value for the first 2^32
 * pairs, which a device loop computes once rather than per pair (the generator's arithmetic, not
 * memory, sets its speed). */
ST_HD uint32_t st_pair_key_hi(uint64_t seed, uint64_t j)
{
	return st_mix32((uint32_t)(j >> 32) ^ (uint32_t)(seed >> 32));
}

/* Elements are made in pairs: pair j (elements 2j and 2j+1) takes 64 random bits, so one
 * Box-Muller step gives both of its normal values. Inputs are regenerated before every timed
 * call of an untrusted candidate, which is why the recipe is this cheap. `hi` is
 * st_pair_key_hi(seed, j). */
ST_HD void st_pair_bits_hi(uint64_t seed, uint64_t j, uint32_t hi, uint32_t bits[2])
{
	uint32_t k = (uint32_t)j ^ hi;
	bits[0] = st_mix32(k ^ (uint32_t)seed);
	bits[1] = st_mix32(bits[0] ^ 0x9e3779b9u ^ (uint32_t)(seed >> 32));
}

ST_HD void st_pair_bits(uint64_t seed, uint64_t j, uint32_t bits[2])
{
	st_pair_bits_hi(seed, j, st_pair_key_hi(seed, j), bits);
}

/* Uniform in (0, 1] from 24 random bits (the largest rounds to 1), never 0 so log() is safe. */
ST_HD float st_bits_uniform01(uint32_t b)
{
	return ((float)(b >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

/* The two standard normal values of pair j (`hi` as for st_pair_bits_hi). The device uses its
 * fast log, square root and sincos (absolute error near 1e-6, plenty for test inputs); host and
 * device runners never share inputs, each backend's reference makes its own expected outputs.
 * u1 may round to exactly 1, making the root's argument 0 (or, by the fast log, a hair below):
 * it is held at 1e-30 at least, as 0 times the reciprocal root's infinity would be NaN. */
ST_HD void st_pair_normal_hi(uint64_t seed, uint64_t j, uint32_t hi, float z[2])
{
	uint32_t b[2];
	st_pair_bits_hi(seed, j, hi, b);
	float u1 = st_bits_uniform01(b[0]), u2 = st_bits_uniform01(b[1]);
	float s, c;
#ifdef __CUDA_ARCH__
	float x = fmaxf(-2.0f * __logf(u1), 1e-30f);
	float r = x * rsqrtf(x);
	__sincosf(6.28318530718f * u2 - 3.14159265359f, &s, &c);
#else
	float r = sqrtf(-2.0f * logf(u1));
	s = sinf(6.28318530718f * u2 - 3.14159265359f);
	c = cosf(6.28318530718f * u2 - 3.14159265359f);
#endif
	z[0] = r * c;
	z[1] = r * s;
}

ST_HD void st_pair_normal(uint64_t seed, uint64_t j, float z[2])
{
	st_pair_normal_hi(seed, j, st_pair_key_hi(seed, j), z);
}

/* 64 random bits for element i on its own (integers wider than 32 bits). */
ST_HD uint64_t st_rand_u64(uint64_t seed, uint64_t i)
{
	return st_mix64(seed ^ st_mix64(i * 2 + 7));
}

/* The values of pair j for one init distribution; `dist` counts as task.h's st_dist does
 * (normal, uniform, randint, const). Wide integer ranges take 64 bits per element. */
ST_HD void st_gen_pair(int dist, double a, double b, int64_t lo, int64_t hi, uint64_t seed,
                       uint64_t j, double v[2])
{
	if (dist == 0) {
		float z[2];
		st_pair_normal(seed, j, z);
		v[0] = a + b * z[0];
		v[1] = a + b * z[1];
	} else if (dist == 1 || dist == 2) {
		uint32_t bits[2];
		st_pair_bits(seed, j, bits);
		uint64_t span = (uint64_t)(hi - lo);
		for (int k = 0; k < 2; k++) {
			if (dist == 1)
				v[k] = a + (b - a) * st_bits_uniform01(bits[k]);
			else if (span <= 0xffffffffull)
				v[k] = (double)(lo + (int64_t)(((uint64_t)bits[k] * span) >> 32));
			else
				v[k] = (double)(lo + (int64_t)(st_rand_u64(seed, 2 * j + k) % span));
		}
	} else {
		v[0] = v[1] = a;
	}
}

#endif
