/* redteam: race that passes once | expect: incorrect | task: tests/data/tasks/t1/scale
 * Right on the first call only, then skips every other element, as a race that wins the first time would. */
#include <stddef.h>
#include "stitch/solution.h"

static float g_b;

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
}

static int calls;

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)n_in; (void)n_out; (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int step = calls++ == 0 ? 1 : 2;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = (i % step == 0) ? 2.0f * x[i] + g_b : 0.0f;
	return 0;
}
