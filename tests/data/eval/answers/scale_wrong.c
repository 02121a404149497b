/* t1/scale, wrong: copies x to y and leaves out the scale and the bias. */
#include <stddef.h>
#include "stitch/solution.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define API extern "C"

__global__ static void copy(const float *x, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i];
}
#else
#define API
#endif

API int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                cudaStream_t stream, void **ctx)
{
	(void)cfg, (void)params, (void)stream;
	if (n_params != 1)
		return 1;
	*ctx = NULL;
	return 0;
}

API int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
               cudaStream_t stream)
{
	(void)ctx;
	if (n_in != 1 || n_out != 1)
		return 1;
	const float *x = (const float *)in[0].data;
	float *y = (float *)out[0].data;
	long long n = in[0].shape[0];
#ifdef __CUDACC__
	copy<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
#else
	(void)stream;
	for (long long i = 0; i < n; i++)
		y[i] = x[i];
	return 0;
#endif
}

API void st_free(void *ctx)
{
	(void)ctx;
}
