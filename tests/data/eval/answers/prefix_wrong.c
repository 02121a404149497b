/* t1/prefix, wrong: an exclusive scan (y[i] = x[0] + ... + x[i-1]) instead of an inclusive one. */
#include <stddef.h>
#include "stitch/solution.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define API extern "C"

__global__ static void scan(const float *x, float *y, long long n)
{
	float acc = 0;
	for (long long i = 0; i < n; i++) {
		y[i] = acc;
		acc += x[i];
	}
}
#else
#define API
#endif

API int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                cudaStream_t stream, void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
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
	scan<<<1, 1, 0, stream>>>(x, y, n);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
#else
	(void)stream;
	float acc = 0;
	for (long long i = 0; i < n; i++) {
		y[i] = acc;
		acc += x[i];
	}
	return 0;
#endif
}

API void st_free(void *ctx)
{
	(void)ctx;
}
