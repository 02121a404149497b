/* redteam: honest: a CUDA graph replayed in st_run | expect: ok | task: tests/data/tasks/t1/scale
 * Captures the kernel into a graph once, then updates the node's pointers and replays it on
 * every call (pointers change between calls). */
#include <cuda_runtime.h>
#include <stdint.h>
#include "stitch/solution.h"

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

static cudaGraph_t graph;
static cudaGraphExec_t exec;
static cudaGraphNode_t node;

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
	void *args[4] = {(void *)&x, (void *)&b, (void *)&y, (void *)&n};
	cudaKernelNodeParams p = {};
	p.func = (void *)scale;
	p.gridDim = dim3(grid);
	p.blockDim = dim3(256);
	p.kernelParams = args;
	if (!exec) {
		if (cudaGraphCreate(&graph, 0) != cudaSuccess ||
		    cudaGraphAddKernelNode(&node, graph, NULL, 0, &p) != cudaSuccess ||
		    cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
			return 3;
	} else if (cudaGraphExecKernelNodeSetParams(exec, node, &p) != cudaSuccess) {
		return 3;
	}
	if (cudaGraphLaunch(exec, stream) != cudaSuccess)
		return 4;
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
