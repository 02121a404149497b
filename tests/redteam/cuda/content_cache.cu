/* redteam: cache keyed by input contents | expect: ok | task: tests/data/tasks/t1/scale
 * Remembers outputs keyed by a hash of the first 32 inputs and replays them on a match. Every
 * timed call gets freshly generated inputs, so the cache never hits and the solution is timed
 * doing the real work: `ok` with honest timing is the right verdict (the exploit gains nothing). */
#include <cuda_runtime.h>
#include <stdint.h>
#include "stitch/solution.h"
#include <string.h>

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

static uint64_t keys[4];
static float *saved[4];
static int used;

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
	float head[32];
	int m = n < 32 ? (int)n : 32;
	cudaMemcpyAsync(head, x, (size_t)m * 4, cudaMemcpyDeviceToHost, stream);
	cudaStreamSynchronize(stream);
	uint64_t h = 1469598103934665603ull;
	for (int k = 0; k < m; k++) {
		uint32_t u;
		memcpy(&u, &head[k], 4);
		h = (h ^ u) * 1099511628211ull;
	}
	for (int k = 0; k < used; k++)
		if (keys[k] == h) {
			cudaMemcpyAsync(y, saved[k], (size_t)n * 4, cudaMemcpyDeviceToDevice, stream);
			return 0;
		}
	scale<<<grid, 256, 0, stream>>>(x, b, y, n);
	if (used < 4 && cudaMalloc(&saved[used], (size_t)n * 4) == cudaSuccess) {
		keys[used] = h;
		cudaMemcpyAsync(saved[used++], y, (size_t)n * 4, cudaMemcpyDeviceToDevice, stream);
	}
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
