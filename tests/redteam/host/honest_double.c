/* redteam: honest: higher precision than asked | expect: ok | task: tests/data/tasks/t1/scale
 * Computes in double and rounds once at the end: more precise than the reference, and it must
 * pass, not be mistaken for a different answer. */
#include "stitch/solution.h"

static double g_b;

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

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx; (void)n_in; (void)n_out; (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = (float)(2.0 * (double)x[i] + g_b);
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}
