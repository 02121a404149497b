/* Elementwise input generation on the device, the same recipe as runner_gen.c on the host:
 * element i is a function of (seed, i) only, so a grid-stride loop fills any size. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"
#include "rng.h"

enum { D_NORMAL, D_UNIFORM, D_RANDINT, D_CONST };

struct fill_args {
	int dist;
	double a, b;
	long long lo, hi;
	uint64_t seed;
};

__device__ __forceinline__ double gen_one(const fill_args &f, uint64_t i)
{
	switch (f.dist) {
	case D_NORMAL: {
		float u1 = st_uniform01(f.seed, i, 0), u2 = st_uniform01(f.seed, i, 1);
		float z = sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
		return f.a + f.b * z;
	}
	case D_UNIFORM:
		return f.a + (f.b - f.a) * st_uniform01(f.seed, i, 0);
	case D_RANDINT: {
		unsigned long long span = (unsigned long long)(f.hi - f.lo);
		return (double)(f.lo + (long long)(st_rand_u64(f.seed, i) % (span ? span : 1)));
	}
	default:
		return f.a;
	}
}

template <typename T> __device__ __forceinline__ T convert(double v);
template <> __device__ __forceinline__ float convert<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double convert<double>(double v) { return v; }
template <> __device__ __forceinline__ __half convert<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16>(double v) { return __float2bfloat16_rn((float)v); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 convert<__nv_fp8_e4m3>(double v) { return __nv_fp8_e4m3((float)v); }
template <> __device__ __forceinline__ __nv_fp8_e5m2 convert<__nv_fp8_e5m2>(double v) { return __nv_fp8_e5m2((float)v); }

template <typename I> __device__ __forceinline__ I sat(double v, double lo, double hi)
{
	return (I)(v < lo ? lo : v > hi ? hi : v);
}
template <> __device__ __forceinline__ int convert<int>(double v) { return sat<int>(v, -2147483648.0, 2147483647.0); }
template <> __device__ __forceinline__ long long convert<long long>(double v) { return sat<long long>(v, -9.2e18, 9.2e18); }
template <> __device__ __forceinline__ signed char convert<signed char>(double v) { return sat<signed char>(v, -128, 127); }
template <> __device__ __forceinline__ unsigned char convert<unsigned char>(double v) { return sat<unsigned char>(v, 0, 255); }

template <typename T> __global__ void fill_kernel(T *dst, long long n, fill_args f)
{
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		dst[i] = convert<T>(gen_one(f, (uint64_t)i));
}

template <typename T> static int launch(void *dst, int64_t n, const fill_args &f, cudaStream_t s)
{
	if (n <= 0)
		return 0;
	long long blocks = (n + 255) / 256;
	if (blocks > 132 * 32)
		blocks = 132 * 32;
	fill_kernel<T><<<(unsigned)blocks, 256, 0, s>>>((T *)dst, n, f);
	return (int)cudaGetLastError();
}

extern "C" int st_cuda_fill(void *dst, int dt, int64_t n, int dist, double a, double b, int64_t lo,
                            int64_t hi, uint64_t seed, cudaStream_t stream)
{
	fill_args f = {dist, a, b, lo, hi, seed};
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
