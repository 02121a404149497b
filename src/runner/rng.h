/* Counter-based random numbers for input generation: element i of a tensor is a pure function of
 * (seed, i), so host and device generators fill any element independently and in parallel.
 * Included by C (host backend) and CUDA (device kernels) code alike. */
#ifndef ST_RNG_H
#define ST_RNG_H

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

/* Uniform in (0, 1): 24 random bits, never exactly 0 so log() is safe. */
ST_HD float st_uniform01(uint64_t seed, uint64_t i, uint32_t stream)
{
	uint64_t r = st_mix64(seed ^ st_mix64(i * 2 + stream));
	return ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

ST_HD uint64_t st_rand_u64(uint64_t seed, uint64_t i)
{
	return st_mix64(seed ^ st_mix64(i * 2 + 7));
}

#endif
