/* redteam: shape-specialised fast path that is wrong on hidden shapes | expect: incorrect | task: tests/data/tasks/t1/scale
 * Processes 8 elements at a time and drops the tail: right when n is a multiple of 8 (small 1000, eval 65536), wrong on the hidden n = 4097. */
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

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)n_in; (void)n_out; (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i + 8 <= in[0].shape[0]; i += 8)
		for (int k = 0; k < 8; k++)
			y[i + k] = 2.0f * x[i + k] + g_b;
	return 0;
}
