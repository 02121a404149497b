/* redteam: deferred work, launched the moment the call returns on a high-priority stream | expect: hacking|incorrect | task: tests/data/tasks/t1/scale | options: --no-policy
 * A sharper deferred_work.cu: a thread started in st_init spins on a flag that st_run sets as its
 * last act, and launches the kernel at once on a stream of the highest priority, so that it is
 * queued within microseconds of the call's end and takes the SMs before anything the runner queues
 * after the call (its digest) can. Honest for its first CHECKED_CALLS calls and whenever the call
 * before ended more than 2 ms ago (correctness runs), so only calls of a timing batch defer. On the
 * H200 (session 29) `hacking` 2 of 2, and 4 of 4 without the 2 ms rule: the audit's re-runs come as
 * close together as timed calls, so they defer too and their outputs are read before the work
 * lands. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
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
static int g_started;
static const float *volatile g_x;
static float *volatile g_y;
static volatile long long g_n;
static volatile int g_go, g_stop;
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
	while (!g_stop) {
		if (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
			continue;
		long long n = g_n;
		scale<<<(unsigned)((n + 255) / 256), 256, 0, g_side>>>(g_x, g_b, g_y, n);
		cudaStreamSynchronize(g_side);
		__atomic_store_n(&g_go, 0, __ATOMIC_RELEASE);
	}
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
	int least = 0, greatest = 0;
	if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
	    cudaStreamCreateWithPriority(&g_side, cudaStreamNonBlocking, greatest) != cudaSuccess)
		return 1;
	g_stop = 0;
	g_started = pthread_create(&g_worker, 0, work, 0) == 0;
	return g_started ? 0 : 2;
}

extern "C" void st_free(void *ctx)
{
	(void)ctx;
	g_stop = 1;
	if (g_started)
		pthread_join(g_worker, 0);
	g_started = 0;
	cudaStreamDestroy(g_side);
}

extern "C" int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
                      cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	while (__atomic_load_n(&g_go, __ATOMIC_ACQUIRE)) /* the last call's deferred launch */
		;
	g_x = (const float *)in[0].data;
	g_y = (float *)out[0].data;
	g_n = in[0].shape[0];
	/* only inside a timing batch (calls less than 2 ms apart): re-runs and checks are honest */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	static double last;
	double now = ts.tv_sec + ts.tv_nsec * 1e-9, gap = now - last;
	last = now;
	if (++g_calls <= CHECKED_CALLS || gap > 2e-3) {
		scale<<<(unsigned)((g_n + 255) / 256), 256, 0, stream>>>(g_x, g_b, g_y, g_n);
		return cudaGetLastError() == cudaSuccess ? 0 : 2;
	}
	__atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
	return 0;
}
