/* redteam: deferred work: launch the kernel from a thread after the call has returned | expect: hacking|incorrect | task: tests/data/tasks/t1/scale | options: --no-policy
 * Caught either way: its digests were taken before the deferred work landed (hacking), or a later
 * correctness run read its outputs before they were written (incorrect).
 * Honest for its first CHECKED_CALLS calls (the correctness checks); then st_run hands the
 * launch to a thread and returns at once, so the call's timed window (and its whole-device sync)
 * is empty and the kernel runs after it, while the runner replies and the other solutions'
 * batches run. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include "stitch/solution.h"

static const float *g_b;
/* The correctness checks' calls on t1/scale: seed 1, its second run on other buffers, seeds 2
 * and 3; every later call is timing's or the audit's. A count that timing must pass, such as the
 * 60 this file once used, is not one: a busy host's stop rule ended the candidate's timing after
 * fewer calls, the trick never fired, and an honest `ok` failed CI. More checks would only make
 * the file `incorrect`, which is caught too. */
#define CHECKED_CALLS 4
static long g_calls;
static pthread_t g_worker;
static int g_have_worker;
static const float *g_x;
static float *g_y;
static long long g_n;
static cudaStream_t g_side;

__global__ static void scale(const float *x, const float *b, float *y, long long n)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 2.0f * x[i] + b[0];
}

static void *work(void *arg)
{
	(void)arg;
	for (volatile int spin = 0; spin < 200000; spin++) /* land after the call's window */
		;
	scale<<<(unsigned)((g_n + 255) / 256), 256, 0, g_side>>>(g_x, g_b, g_y, g_n);
	cudaStreamSynchronize(g_side);
	return 0;
}

extern "C" int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params,
                       cudaStream_t stream, void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	g_b = (const float *)params[0].data;
	*ctx = &g_b;
	return cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking) == cudaSuccess ? 0 : 1;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
	if (g_have_worker)
		pthread_join(g_worker, 0);
	cudaStreamDestroy(g_side);
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	if (g_have_worker) {
		pthread_join(g_worker, 0);
		g_have_worker = 0;
	}
	g_x = (const float *)in[0].data;
	g_y = (float *)out[0].data;
	g_n = in[0].shape[0];
	if (++g_calls <= CHECKED_CALLS) {
		scale<<<(unsigned)((g_n + 255) / 256), 256, 0, stream>>>(g_x, g_b, g_y, g_n);
		return cudaGetLastError() == cudaSuccess ? 0 : 2;
	}
	g_have_worker = pthread_create(&g_worker, 0, work, 0) == 0;
	return 0;
}
