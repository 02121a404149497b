/* redteam: zeroing the inputs after use | expect: incorrect | task: tests/data/tasks/t1/scale
 * Zeroes its input after computing, hoping later calls run on zeros. The harness regenerates
 * inputs before every call on this task, so nothing would be gained; but inputs are read-only
 * (stitch/solution.h), and where a task's host generator makes them they are kept through
 * timing: the runner's digest of the inputs before and after each checked run shows the write,
 * `incorrect`, naming the input (it was `ok` here before session 46). */
#include <cuda_runtime.h>
#include <stdint.h>
#include "stitch/solution.h"

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

struct ctx {
	const float *b;
};

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **out)
{
	(void)cfg;
	(void)stream;
	if (n_params != 1)
		return 1;
	static struct ctx c;
	c.b = (const float *)params[0].data;
	*out = &c;
	return 0;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	(void)n_in;
	(void)n_out;
	long long n = in[0].shape[0];
	const float *x = (const float *)in[0].data;
	const float *b = ((struct ctx *)ctx)->b;
	float *y = (float *)out[0].data;
	unsigned grid = (unsigned)((n + 255) / 256);
	scale<<<grid, 256, 0, stream>>>(x, b, y, n);
	cudaMemsetAsync((void *)x, 0, (size_t)n * 4, stream);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
