/* Test task "scale", host expert: the same loop (the test only needs a second solution). */
#include <stddef.h>
#include "stitch/solution.h"

struct ctx { float b; };
static struct ctx g;

int st_init(const st_config *cfg, const st_tensor *params, int32_t n_params, cudaStream_t stream,
            void **ctx)
{
	(void)cfg;
	(void)stream;
	if (n_params != 1)
		return 1;
	g.b = *(const float *)params[0].data;
	*ctx = &g;
	return 0;
}

int st_run(void *ctx, const st_tensor *in, int32_t n_in, st_tensor *out, int32_t n_out,
           cudaStream_t stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return 1;
	const float *x = in[0].data;
	float *y = out[0].data, b = ((struct ctx *)ctx)->b;
	for (int64_t i = 0; i < in[0].shape[0]; i++)
		y[i] = x[i] + x[i] + b;
	return 0;
}

void st_free(void *ctx)
{
	(void)ctx;
}
