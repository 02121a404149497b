/* Test task "scale", expert: the same kernel (the test only needs a second solution). */
#include <cuda_runtime.h>
#include "stitch/solution.h"

struct ctx { const float *b; };

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx)
{
	(void)cfg;
	(void)stream;
	if (n_params != 1)
		return 1;
	static struct ctx c;
	c.b = (const float *)params[0].data;
	*ctx = &c;
	return 0;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	if (n_in != 1 || n_out != 1)
		return 1;
	long long n = in[0].shape[0];
	scale<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float *)in[0].data,
	                                                       ((struct ctx *)ctx)->b,
	                                                       (float *)out[0].data, n);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
}
