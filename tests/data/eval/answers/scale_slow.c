/* t1/scale, correct but slow: y = 2 * x + b, the whole pass done 256 times over. */
#include <stddef.h>
#include "stitch/solution.h"

#define PASSES 256

static float g_b;

#ifdef __CUDACC__
#include <cuda_runtime.h>

__global__ static void scale_pass(const float *x, float *y, long long n, float b)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx)
{
	(void)cfg, (void)stream;
	if (n_params != 1)
		return 1;
	if (cudaMemcpy(&g_b, params[0].data, sizeof g_b, cudaMemcpyDeviceToHost) != cudaSuccess)
		return 2;
	*ctx = &g_b;
	return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out,
                      int32_t n_out, cudaStream_t stream)
{
	if (n_in != 1 || n_out != 1)
		return 1;
	long long n = in[0].shape[0];
	float b = *(const float *)ctx;
	for (int pass = 0; pass < PASSES; pass++) {
		scale_pass<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(
			(const float *)in[0].data, (float *)out[0].data, n, b);
		if (cudaGetLastError() != cudaSuccess)
			return 2;
	}
	return 0;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
}

#else

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg, (void)stream;
	if (n_params != 1)
		return 1;
	g_b = *(const float *)params[0].data;
	*ctx = &g_b;
	return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return 1;
	const float *x = (const float *)in[0].data;
	float *y = (float *)out[0].data, b = *(const float *)ctx;
	int64_t n = in[0].shape[0];
	for (int pass = 0; pass < PASSES; pass++) {
		for (int64_t i = 0; i < n; i++)
			y[i] = 2.0f * x[i] + b;
		__asm__ __volatile__("" ::: "memory");
	}
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}

#endif
