/* What a timed call commits to: the digest a runner commits for each timed call's outputs, and the parent recomputes from the
 * bytes of an audited re-run (docs/architecture.md, "commit, then audit"). It is a sum, modulo
 * 2^64, of a full-avalanche mix of every 8-byte word with its position, so the GPU computes it in
 * parallel in any order and gets the bits the CPU gets. It is no MAC: its only job is that no
 * one can write the right value for a call without that call's outputs in hand. Included by C
 * (parent, host runner) and CUDA (the GPU runner's kernel) code alike. */
#ifndef ST_DIGEST_H
#define ST_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ST_DIGEST_HD __host__ __device__ __forceinline__
#else
#define ST_DIGEST_HD static inline
#endif

/* Word j of a tensor, holding w (a short last word is zero-padded, little-endian). */
ST_DIGEST_HD uint64_t st_digest_word(uint64_t j, uint64_t w)
{
	uint64_t x = w ^ (j * 0x9e3779b97f4a7c15ull) ^ 0xd1b54a32d192ed03ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Fold tensor number `index` of `bytes` bytes, whose word sum is `sum`, into the call's digest. */
ST_DIGEST_HD uint64_t st_digest_fold(uint64_t digest, uint64_t index, uint64_t bytes, uint64_t sum)
{
	return st_digest_word(index ^ (bytes << 8), digest ^ sum);
}

/* The seed of call i of a timing batch whose request carried `batch_seed`: the runner draws that
 * call's inputs from it, and the parent, which chose batch_seed, knows every call's inputs without
 * believing anything the runner reports. (splitmix64 of batch_seed + i, as rng.h's st_mix64.) */
ST_DIGEST_HD uint64_t st_call_seed(uint64_t batch_seed, uint64_t i)
{
	uint64_t x = batch_seed + i + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The seed buffer set `set` is filled from when a timing request carries "fill": the task's host
 * generator's inputs are kept through timing, and the parent re-makes a timed call's from this. */
ST_DIGEST_HD uint64_t st_fill_seed(uint64_t fill, int set)
{
	return st_call_seed(fill ^ 0xf111f111f111f111ull, (uint64_t)set);
}

#ifdef __cplusplus
extern "C" {
#endif
/* The word sum of `bytes` bytes at p, on this CPU. */
uint64_t st_digest_sum(const void *p, size_t bytes);
/* The same on up to `threads` threads (the parent's audit of large outputs): the same bits. */
uint64_t st_digest_sum_threads(const void *p, size_t bytes, int threads);
/* A digest as the 16 lowercase hex digits it travels as (JSON integers are signed). */
void st_digest_hex(uint64_t d, char out[17]);
/* Parse 16 hex digits; 0 on success, -1 when `s` is not exactly that. */
int st_digest_parse(const char *s, uint64_t *d);
#ifdef __cplusplus
}
#endif

#endif
