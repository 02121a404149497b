/* redteam: a little work on a side stream, past the end event | expect: hacking | task: tests/data/tasks/t1/scale
 * As side_stream.cu, but the hidden kernel spins for about 60 us only: less than the 0.1 ms a
 * whole-device sync was once allowed beyond the solution's stream, more than the sync's own
 * wake-up (some us) and the reference's time past its end event. */
#include <cuda_runtime.h>
#include <stdint.h>
#include "stitch/solution.h"

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	long long t0 = clock64();
	while (clock64() - t0 < 120000)
		;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}
static cudaStream_t side;

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
	(void)stream;
	if (!side && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess)
		return 3;
	scale<<<grid, 256, 0, side>>>(x, b, y, n);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
