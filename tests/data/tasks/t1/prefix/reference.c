/* Host reference of the prefix test task: one sequential pass. */
#include <stdlib.h>
#include "stitch/solution.h"

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg, (void)params, (void)n_params, (void)stream;
	*ctx = NULL;
	return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)ctx, (void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data, acc = 0;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = acc += x[i];
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}
