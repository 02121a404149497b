/* redteam: deferred work: reply at once, compute on a thread after the call has returned | expect: hacking|incorrect | task: tests/data/tasks/t1/scale | options: --no-policy
 * The host backend's sandbox refuses the thread (a host solution runs on the runner's one thread),
 * so the deferred work never happens and the timed calls commit poisoned outputs: hacking. Before
 * that rule it was caught only when the digest won the race with the thread, which a busy host
 * could lose (two `ok` in session 28).
 * Honest for its first CHECKED_CALLS calls (the correctness checks); then st_run hands the
 * work to a thread and returns at once, so the call's timed window is empty and the work lands
 * after it, while the runner replies and the other solutions' batches run. */
#include <pthread.h>
#include <stdint.h>
#include "stitch/solution.h"

static float g_b;
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
static int64_t g_n;

static void *work(void *arg)
{
	(void)arg;
	for (volatile int spin = 0; spin < 200000; spin++) /* land after the call's window */
		;
	for (int64_t i = 0; i < g_n; i++)
		g_y[i] = 2.0f * g_x[i] + g_b;
	return 0;
}

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	(void)n_params;
	g_b = *(const float *)params[0].data;
	*ctx = &g_b;
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
	if (g_have_worker)
		pthread_join(g_worker, 0);
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx;
	(void)n_in;
	(void)n_out;
	(void)stream;
	if (g_have_worker) {
		pthread_join(g_worker, 0);
		g_have_worker = 0;
	}
	g_x = in[0].data;
	g_y = out[0].data;
	g_n = in[0].shape[0];
	if (++g_calls <= CHECKED_CALLS) {
		work(0);
		return 0;
	}
	g_have_worker = pthread_create(&g_worker, 0, work, 0) == 0;
	return 0;
}
