/* redteam: honest: several streams joined properly | expect: ok | task: tests/data/tasks/t1/scale
 * Splits the work over two extra streams forked from and joined back to the given stream with
 * events; everything is ordered on the given stream when st_run returns. */
#include <cuda_runtime.h>
#include <stdint.h>
#include "stitch/solution.h"

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

static cudaStream_t s2[2];
static cudaEvent_t fork_ev, join_ev[2];

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
	if (!s2[0]) {
		for (int k = 0; k < 2; k++)
			if (cudaStreamCreateWithFlags(&s2[k], cudaStreamNonBlocking) != cudaSuccess ||
			    cudaEventCreateWithFlags(&join_ev[k], cudaEventDisableTiming) != cudaSuccess)
				return 3;
		if (cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming) != cudaSuccess)
			return 3;
	}
	long long half = n / 2;
	cudaEventRecord(fork_ev, stream);
	for (int k = 0; k < 2; k++) {
		long long off = k ? half : 0, len = k ? n - half : half;
		cudaStreamWaitEvent(s2[k], fork_ev, 0);
		if (len > 0)
			scale<<<(unsigned)((len + 255) / 256), 256, 0, s2[k]>>>(x + off, b, y + off, len);
		cudaEventRecord(join_ev[k], s2[k]);
		cudaStreamWaitEvent(stream, join_ev[k], 0);
	}
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
