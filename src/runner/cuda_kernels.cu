/* The runner's own device kernels: elementwise input generation, the recipe of rng.h that
 * runner_gen.c follows on the host (element i is a function of (seed, i) only, so a grid-stride
 * loop fills any size), the fill that poisons outputs and flushes the L2 before every timed
 * call, the digest of a timed call's outputs, and the L2 read, special-function and grid-barrier
 * probes of the device peaks. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "common/digest.h"
#include "rng.h"

struct fill_args {
	int dist;
	double a, b;
	long long lo, hi;
	uint64_t seed;
	float fa, fb; /* the float path's offset and scale: a and b, or a and b - a */
};

template <typename T> __device__ __forceinline__ T convert(double v);
template <> __device__ __forceinline__ float convert<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double convert<double>(double v) { return v; }
template <> __device__ __forceinline__ __half convert<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16>(double v) { return __float2bfloat16_rn((float)v); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 convert<__nv_fp8_e4m3>(double v) { return __nv_fp8_e4m3((float)v); }
template <> __device__ __forceinline__ __nv_fp8_e5m2 convert<__nv_fp8_e5m2>(double v) { return __nv_fp8_e5m2((float)v); }

/* The same conversions from float, with no trip through double. */
template <typename T> __device__ __forceinline__ T convertf(float v);
template <> __device__ __forceinline__ float convertf<float>(float v) { return v; }
template <> __device__ __forceinline__ __half convertf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 convertf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 convertf<__nv_fp8_e4m3>(float v) { return __nv_fp8_e4m3(v); }
template <> __device__ __forceinline__ __nv_fp8_e5m2 convertf<__nv_fp8_e5m2>(float v) { return __nv_fp8_e5m2(v); }

template <typename I> __device__ __forceinline__ I sat(double v, double lo, double hi)
{
	return (I)(v < lo ? lo : v > hi ? hi : v);
}
template <> __device__ __forceinline__ int convert<int>(double v) { return sat<int>(v, -2147483648.0, 2147483647.0); }
template <> __device__ __forceinline__ long long convert<long long>(double v) { return sat<long long>(v, -9.2e18, 9.2e18); }
template <> __device__ __forceinline__ signed char convert<signed char>(double v) { return sat<signed char>(v, -128, 127); }
template <> __device__ __forceinline__ unsigned char convert<unsigned char>(double v) { return sat<unsigned char>(v, 0, 255); }

/* Pair j's st_pair_key_hi, computed again only when j's upper half changes. */
struct key_cache {
	uint64_t top;
	uint32_t hi;
};
__device__ __forceinline__ uint32_t key_hi(const fill_args &f, uint64_t j, key_cache &c)
{
	if (c.top != j >> 32) {
		c.top = j >> 32;
		c.hi = st_pair_key_hi(f.seed, j);
	}
	return c.hi;
}

template <typename T> struct narrow_float { static const bool value = false; };
template <> struct narrow_float<float> { static const bool value = true; };
template <> struct narrow_float<__half> { static const bool value = true; };
template <> struct narrow_float<__nv_bfloat16> { static const bool value = true; };
template <> struct narrow_float<__nv_fp8_e4m3> { static const bool value = true; };
template <> struct narrow_float<__nv_fp8_e5m2> { static const bool value = true; };

/* The pair's two values by the recipe's double arithmetic: any type, any distribution. */
template <typename T, int D, bool F = narrow_float<T>::value> struct pair_math {
	static __device__ __forceinline__ void gen(const fill_args &f, uint64_t j, key_cache &kc,
	                                           T out[2])
	{
		(void)kc;
		double v[2];
		st_gen_pair(f.dist, f.a, f.b, f.lo, f.hi, f.seed, j, v);
		out[0] = convert<T>(v[0]);
		out[1] = convert<T>(v[1]);
	}
};

/* Narrow float types take float arithmetic for the normal (D 0) and uniform (D 1) distributions,
 * with the distribution a template argument and its scale and offset converted once, on the
 * host: with double conversions and a branch per pair, 128 MiB of normal floats took 58 us on
 * the H200 (host wall, launch and sync included), 52 without; a scratch kernel of the normal
 * path alone wrote them in 39 us by events, the stores alone in 35. The generator runs before
 * every timed call of an untrusted candidate, so its time is a large part of a verify's. */
template <typename T> struct pair_math<T, 0, true> {
	static __device__ __forceinline__ void gen(const fill_args &f, uint64_t j, key_cache &kc,
	                                           T out[2])
	{
		float v[2];
		st_pair_normal_hi(f.seed, j, key_hi(f, j, kc), v);
		out[0] = convertf<T>(f.fa + f.fb * v[0]);
		out[1] = convertf<T>(f.fa + f.fb * v[1]);
	}
};
template <typename T> struct pair_math<T, 1, true> {
	static __device__ __forceinline__ void gen(const fill_args &f, uint64_t j, key_cache &kc,
	                                           T out[2])
	{
		uint32_t bits[2];
		st_pair_bits_hi(f.seed, j, key_hi(f, j, kc), bits);
		out[0] = convertf<T>(f.fa + f.fb * st_bits_uniform01(bits[0]));
		out[1] = convertf<T>(f.fa + f.fb * st_bits_uniform01(bits[1]));
	}
};

template <typename T> struct alignas(4 * sizeof(T)) quad_of {
	T v[4];
};

/* One thread per two pairs of elements (see rng.h: the values are those of pairs 2q and 2q + 1
 * whoever computes them), grid-stride; where the buffer's alignment allows, the four values are
 * one store (16 bytes for 4-byte types; a store per pair was some 10 % slower on the H200). */
template <typename T, int D> __global__ void fill_kernel(T *dst, long long n, fill_args f, int vector)
{
	long long quads = (n + 3) / 4;
	key_cache kc = {~0ull, 0};
	for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < quads;
	     q += (long long)gridDim.x * blockDim.x) {
		quad_of<T> p;
		pair_math<T, D>::gen(f, (uint64_t)(2 * q), kc, p.v);
		pair_math<T, D>::gen(f, (uint64_t)(2 * q + 1), kc, p.v + 2);
		if (vector && 4 * q + 3 < n) {
			reinterpret_cast<quad_of<T> *>(dst)[q] = p;
		} else {
			for (int k = 0; k < 4 && 4 * q + k < n; k++)
				dst[4 * q + k] = p.v[k];
		}
	}
}

template <typename T> static int launch(void *dst, int64_t n, const fill_args &f, cudaStream_t s)
{
	if (n <= 0)
		return 0;
	long long blocks = ((n + 3) / 4 + 255) / 256;
	if (blocks > 132 * 32)
		blocks = 132 * 32;
	int vector = (uintptr_t)dst % sizeof(quad_of<T>) == 0;
	if constexpr (narrow_float<T>::value) {
		if (f.dist == 0 || f.dist == 1) {
			if (f.dist == 0)
				fill_kernel<T, 0><<<(unsigned)blocks, 256, 0, s>>>((T *)dst, n, f, vector);
			else
				fill_kernel<T, 1><<<(unsigned)blocks, 256, 0, s>>>((T *)dst, n, f, vector);
			return (int)cudaGetLastError();
		}
	}
	fill_kernel<T, 2><<<(unsigned)blocks, 256, 0, s>>>((T *)dst, n, f, vector);
	return (int)cudaGetLastError();
}

extern "C" int st_cuda_fill(void *dst, int dt, int64_t n, int dist, double a, double b, int64_t lo,
                            int64_t hi, uint64_t seed, cudaStream_t stream)
{
	fill_args f = {dist, a, b, lo, hi, seed, (float)a, (float)(dist == 1 ? b - a : b)};
	switch ((st_dtype)dt) {
	case ST_F32: return launch<float>(dst, n, f, stream);
	case ST_F64: return launch<double>(dst, n, f, stream);
	case ST_F16: return launch<__half>(dst, n, f, stream);
	case ST_BF16: return launch<__nv_bfloat16>(dst, n, f, stream);
	case ST_I32: return launch<int>(dst, n, f, stream);
	case ST_I64: return launch<long long>(dst, n, f, stream);
	case ST_I8: return launch<signed char>(dst, n, f, stream);
	case ST_U8: return launch<unsigned char>(dst, n, f, stream);
	case ST_F8E4M3: return launch<__nv_fp8_e4m3>(dst, n, f, stream);
	case ST_F8E5M2: return launch<__nv_fp8_e5m2>(dst, n, f, stream);
	}
	return (int)cudaErrorInvalidValue;
}

/* Byte fills of up to ST_PREP_SPANS spans, each with uint4 stores on its 16-byte aligned body. */
struct prep_args {
	unsigned char *p[ST_PREP_SPANS];
	unsigned long long bytes[ST_PREP_SPANS];
	unsigned val[ST_PREP_SPANS];
	int n;
};

__global__ static void __launch_bounds__(1024) prep_kernel(prep_args a)
{
	unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	for (int k = 0; k < a.n; k++) {
		unsigned char *p = a.p[k];
		unsigned long long n = a.bytes[k];
		unsigned v = a.val[k] * 0x01010101u;
		unsigned long long head = (16 - ((uintptr_t)p & 15)) & 15;
		if (head > n)
			head = n;
		if (tid < head)
			p[tid] = (unsigned char)v;
		uint4 *q = (uint4 *)(p + head);
		unsigned long long nq = (n - head) / 16;
		uint4 w = make_uint4(v, v, v, v);
		for (unsigned long long i = tid; i < nq; i += nth)
			q[i] = w;
		unsigned long long done = head + nq * 16;
		if (tid < n - done)
			p[done + tid] = (unsigned char)v;
	}
}

extern "C" int st_cuda_prep(const st_prep_span *spans, int n, int blocks, cudaStream_t stream)
{
	if (n < 1 || n > ST_PREP_SPANS)
		return (int)cudaErrorInvalidValue;
	prep_args a;
	a.n = n;
	for (int k = 0; k < n; k++) {
		a.p[k] = (unsigned char *)spans[k].p;
		a.bytes[k] = spans[k].bytes;
		a.val[k] = spans[k].val & 0xffu;
	}
	prep_kernel<<<blocks, 1024, 0, stream>>>(a);
	return (int)cudaGetLastError();
}

extern "C" int st_cuda_prep_blocks(int sms, int max_threads_per_sm)
{
	return sms * (max_threads_per_sm / 1024 > 0 ? max_threads_per_sm / 1024 : 1);
}

/* The digest's word sums: every thread adds the mixes of its words, a warp folds its lanes, and
 * one atomic per warp lands in the span's sum. Addition modulo 2^64 is associative, so the order
 * the atomics land in changes nothing. */
struct digest_args {
	const unsigned char *p[ST_PREP_SPANS];
	unsigned long long bytes[ST_PREP_SPANS];
	unsigned long long *sums;
};

__device__ static uint64_t digest_load(const unsigned char *p, unsigned long long j,
                                       unsigned long long bytes)
{
	unsigned long long at = 8 * j;
	if (at + 8 <= bytes && !((uintptr_t)p & 7))
		return *(const uint64_t *)(p + at);
	uint64_t w = 0; /* a short last word, or a buffer that is not 8-byte aligned */
	for (int k = 0; k < 8 && at + k < bytes; k++)
		w |= (uint64_t)p[at + k] << (8 * k);
	return w;
}

/* The word sums of one span, this thread's share. A 16-byte aligned span is read 16 bytes at a
 * time, four loads in flight per thread before any is mixed: with one 8-byte load a thread and
 * the mixing between, too few bytes were in flight to keep HBM busy and a 128 MiB output took
 * about 0.1 ms, a call's worth of the softmax expert. The vectors go from the last to the first:
 * the digest runs right behind the call that wrote the span, front to back as a kernel mostly
 * writes, so the span's tail is still in the L2 and read from there before the sweep evicts it
 * (read front to back, the sweep evicted it first). The words past the last whole vector (and
 * every word of an unaligned span) go one by one. Same words, same sum, any order. */
__device__ static uint64_t digest_share(const unsigned char *p, unsigned long long bytes,
                                        unsigned long long tid, unsigned long long nth)
{
	uint64_t sum = 0;
	unsigned long long j = 0;
	if (!((uintptr_t)p & 15)) {
		const ulonglong2 *q = (const ulonglong2 *)p;
		unsigned long long vecs = bytes / 16, v = tid, last = vecs - 1;
		for (; v + 3 * nth < vecs; v += 4 * nth) {
			ulonglong2 x[4];
#pragma unroll
			for (int u = 0; u < 4; u++)
				x[u] = __ldcs(q + (last - (v + u * nth)));
#pragma unroll
			for (int u = 0; u < 4; u++) {
				unsigned long long w = 2 * (last - (v + u * nth));
				sum += st_digest_word(w, x[u].x) + st_digest_word(w + 1, x[u].y);
			}
		}
		for (; v < vecs; v += nth) {
			ulonglong2 x = __ldcs(q + (last - v));
			sum += st_digest_word(2 * (last - v), x.x) + st_digest_word(2 * (last - v) + 1, x.y);
		}
		j = 2 * vecs;
	}
	unsigned long long words = (bytes + 7) / 8;
	for (j += tid; j < words; j += nth)
		sum += st_digest_word(j, digest_load(p, j, bytes));
	return sum;
}

__global__ static void __launch_bounds__(1024) digest_kernel(digest_args a)
{
	int k = blockIdx.y;
	unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	uint64_t sum = digest_share(a.p[k], a.bytes[k], tid, nth);
	for (int off = 16; off > 0; off >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, off);
	if ((threadIdx.x & 31) == 0 && sum)
		atomicAdd(&a.sums[k], (unsigned long long)sum);
}

extern "C" int st_cuda_digest(const st_prep_span *spans, int n, unsigned long long *sums,
                              int blocks, cudaStream_t stream)
{
	if (n < 1 || n > ST_PREP_SPANS)
		return (int)cudaErrorInvalidValue;
	digest_args a;
	a.sums = sums;
	for (int k = 0; k < n; k++) {
		a.p[k] = (const unsigned char *)spans[k].p;
		a.bytes[k] = spans[k].bytes;
	}
	digest_kernel<<<dim3((unsigned)blocks, (unsigned)n), 1024, 0, stream>>>(a);
	return (int)cudaGetLastError();
}

/* A 16-byte load cached in the L2 only (L1 bypassed). Volatile, so that the compiler can neither
 * hoist it out of the probe's loop over passes (the buffer never changes) nor drop it. */
__device__ __forceinline__ float4 ld_l2(const float4 *p)
{
	float4 v;
	asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
	             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
	             : "l"(p));
	return v;
}

/* The L2 read probe: every thread walks the buffer grid-stride, reps times over, four independent
 * loads at a time (so that each thread keeps four in flight however few strides the buffer
 * holds); after the first pass every load is an L2 hit that no L1 can serve. The store that never
 * happens in practice (a sum of exactly -1e30) keeps the sums, and so the loads, alive. */
__global__ static void __launch_bounds__(1024) l2_read_kernel(const float4 *buf, size_t n4,
                                                               int reps, float *sink)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t start = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
	for (int r = 0; r < reps; r++)
		for (size_t i = start; i < n4; i += 4 * stride) {
			float4 v[4];
#pragma unroll
			for (int k = 0; k < 4; k++)
				v[k] = i + k * stride < n4 ? ld_l2(buf + i + k * stride)
				                           : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				acc.x += v[k].x;
				acc.y += v[k].y;
				acc.z += v[k].z;
				acc.w += v[k].w;
			}
		}
	float s = acc.x + acc.y + acc.z + acc.w;
	if (s == -1e30f)
		*sink = s;
}

/* The special-function probe's chains: x = log2(2^x) keeps every value where it started, so
 * nothing overflows, while each step is two dependent MUFU operations the compiler cannot fold
 * (the approximate forms, one instruction each). Eight chains a thread and every thread slot
 * filled keep far more in flight than the unit's latency needs. */
__global__ static void __launch_bounds__(1024) sfu_kernel(int iters, float *sink)
{
	float x[ST_SFU_CHAINS];
#pragma unroll
	for (int k = 0; k < ST_SFU_CHAINS; k++)
		x[k] = 0.25f + 0.03125f * k + 1e-7f * (float)threadIdx.x;
	for (int i = 0; i < iters; i++) {
#pragma unroll
		for (int k = 0; k < ST_SFU_CHAINS; k++) {
			float e;
			asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x[k]));
			asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(x[k]) : "f"(e));
		}
	}
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < ST_SFU_CHAINS; k++)
		s += x[k];
	if (s == -1e30f)
		*sink = s;
}

extern "C" int st_cuda_sfu(int iters, int blocks, float *sink, cudaStream_t stream)
{
	sfu_kernel<<<blocks, 1024, 0, stream>>>(iters, sink);
	return (int)cudaGetLastError();
}

/* The grid-barrier probe: nothing but barriers, so each takes what a dependent step that every
 * SM must see the end of takes at the least. */
__global__ static void sync_kernel(int iters)
{
	cooperative_groups::grid_group grid = cooperative_groups::this_grid();
	for (int i = 0; i < iters; i++)
		grid.sync();
}

extern "C" int st_cuda_sync(int iters, int blocks, cudaStream_t stream)
{
	void *args[] = {&iters};
	return (int)cudaLaunchCooperativeKernel((const void *)sync_kernel, dim3((unsigned)blocks),
	                                        dim3(128), args, 0, stream);
}

__global__ static void probe_kernel(void) {}

extern "C" int st_cuda_probe(cudaStream_t stream)
{
	probe_kernel<<<1, 32, 0, stream>>>();
	return (int)cudaGetLastError();
}

extern "C" int st_cuda_l2_read(const void *buf, size_t bytes, int reps, int blocks, float *sink,
                               cudaStream_t stream)
{
	if (bytes < 16 || reps < 1 || blocks < 1)
		return (int)cudaErrorInvalidValue;
	l2_read_kernel<<<blocks, 1024, 0, stream>>>((const float4 *)buf, bytes / 16, reps, sink);
	return (int)cudaGetLastError();
}
